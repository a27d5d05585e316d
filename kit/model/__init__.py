"""The typed bundle model: every file a bundle holds, validated, and the one loader.

    from kit.model import load_bundle, recipe_differences
    data = load_bundle("reports/examples/h200x2-fsdp-llama")
    data.results.runs[0].metrics["throughput"].value

Driver side only (pydantic). The worker writes the same shapes with the standard library
(kit.worker.records); tests check that the two agree, and schema/*.schema.json is generated
from these models (python -m kit.model.schema).
"""

from kit.model.base import BUNDLE_SCHEMA, HARDWARE_SCHEMA, SCHEMAS
from kit.model.environment import ContainerVersions, Environment
from kit.model.hardware import Hardware, NodeInventory
from kit.model.loader import BundleData, RunFiles, check_schema, load_bundle, read_model, validate
from kit.model.recipes import recipe_differences
from kit.model.results import (
    AdaptiveRecord,
    BundleStatus,
    EnvironmentDifference,
    PreflightFinding,
    Results,
    SealedAfter,
    SlurmInfo,
)
from kit.model.run import (
    Metric,
    Network,
    NodeRecord,
    RunData,
    RunResult,
    RunSpec,
    SizeRow,
    Telemetry,
)
from kit.model.software import Loaded, Software

__all__ = [
    "BUNDLE_SCHEMA",
    "HARDWARE_SCHEMA",
    "SCHEMAS",
    "AdaptiveRecord",
    "BundleData",
    "BundleStatus",
    "ContainerVersions",
    "Environment",
    "EnvironmentDifference",
    "Hardware",
    "Loaded",
    "Metric",
    "Network",
    "NodeInventory",
    "NodeRecord",
    "PreflightFinding",
    "Results",
    "RunData",
    "RunFiles",
    "RunResult",
    "RunSpec",
    "SealedAfter",
    "SizeRow",
    "SlurmInfo",
    "Software",
    "Telemetry",
    "check_schema",
    "load_bundle",
    "read_model",
    "recipe_differences",
    "validate",
]
