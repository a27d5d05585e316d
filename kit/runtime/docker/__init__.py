"""The docker runtime: pinned environments, image building, fingerprints, one container per run."""
