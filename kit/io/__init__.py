"""The kit at its edges: files written anew and read without following links (safe.py), the
output paths a user names (outputs.py), and the terminal every line goes to (terminal.py)."""
