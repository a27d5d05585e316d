"""Workloads: one folder per kind (params, worker entry, spec); kit.workloads.registry lists them."""
