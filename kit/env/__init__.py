"""Two environments compared: which differences can change a number (diff.py), what differs
inside them (content.py), and the one verdict on both (check.py)."""
