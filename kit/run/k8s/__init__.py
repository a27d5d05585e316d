"""Kubernetes as a batch placement: an Indexed Job (or JobSet) per run behind a headless
Service; the driver watches the pods and gathers results, logs and inventories through the API."""
