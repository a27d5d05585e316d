"""Known machines: compact reference results to place a new bundle against.

Shipped references (kit/refs/data/*.json, extracted from the committed H200 example bundles)
plus a user store (embedded SQLite at $KIT_REFS_DB or ~/.local/share/kit/refs.sqlite). See
store.py for the functions and cli.py for the `kit refs` commands.
"""
