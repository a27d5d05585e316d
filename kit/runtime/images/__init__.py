"""The pinned images every container engine runs: build, load, export, fingerprint (any engine's client)."""
