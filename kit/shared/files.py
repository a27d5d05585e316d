"""The names of a bundle's files, in one place: every writer and reader (the worker's result
too) takes them from here.

    BUNDLE/  results.json  recipe.yaml  hardware.json  environment.json  (software.json)
             runs/<run id>/spec.json  runs/<run id>/result.json  logs/
             nccl-tests/<program>-<variant>-<k>.txt  (same-call nccl-tests output, if added)
             report.html  report.pdf  MANIFEST.sha256  (MANIFEST.sha256.sig)
"""

from __future__ import annotations

SPEC_SCHEMA = 1  # the run spec's `schema`: what the worker reads
RESULT_SCHEMA = 1  # the run result's `schema`: what the worker writes

RESULTS = "results.json"
RECIPE = "recipe.yaml"
HARDWARE = "hardware.json"
ENVIRONMENT = "environment.json"
SOFTWARE = "software.json"  # what the image holds (kit.runtime.images.software), when it has one
RUNS = "runs"
LOGS = "logs"
SPEC = "spec.json"  # runs/<id>/spec.json: what the driver asks one launch to run
RESULT = "result.json"  # runs/<id>/result.json: what the worker measured
HASH_MEMO = "hash-memo.json"  # runs/<id>/: library hashes of earlier runs, there while one runs
REPORT_HTML = "report.html"
REPORT_PDF = "report.pdf"
REPORT_FILES = (REPORT_HTML, REPORT_PDF)
NCCL_TESTS = "nccl-tests"  # nccl-tests/<program>-<variant>-<k>.txt: `kit refs nccl-tests`
MANIFEST = "MANIFEST.sha256"
SIGNATURE = MANIFEST + ".sig"


def run_file(run_id: str, name: str) -> str:
    """A run's file, relative to the bundle: run_file("ar.p2p.r0", SPEC)."""
    return f"{RUNS}/{run_id}/{name}"
