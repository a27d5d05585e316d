"""The multi-node runtime: one worker container per node, on several Docker daemons."""
