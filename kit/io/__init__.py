"""The kit at its edges: files written anew and read without following links (safe.py), the
output paths a user names (outputs.py), the terminal every line goes to (terminal.py), and the
probes that answer from a child process (child.py)."""
