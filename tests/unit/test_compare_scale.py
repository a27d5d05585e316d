"""Like for like: machines named by hardware and label, per GPU, scaling efficiency, sharding,
cost; and the one-line errors of --label and --price-per-gpu-hour."""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

import pytest

from kit.bundle import Bundle, write_manifest
from kit.io.errors import InputError
from kit.model import RunResult
from kit.report.compare import check_price, comparison, load_machines, parse_labels
from kit.report.facts.efficiency import cost_per_million
from tests.conftest import ROOT, run_kit
from tests.unit.test_compare import hardware

FSDP = "FSDP2 fully_shard per decoder layer + root"
DDP = "DistributedDataParallel (gradient_as_bucket_view)"


def training_bundle(root: Path, name: str, gpus: int, tput: list[float], mem: float,
                    parallelism: str = FSDP) -> Path:  # fmt: skip
    recipe = {"kit": 1, "name": "llama", "gpus": gpus, "repeats": len(tput), "variants": ["p2p"],
              "benchmarks": [{"kind": "llama_lora_fsdp", "name": "llama"}]}  # fmt: skip
    bundle = Bundle.create(root / name, recipe, {"recipe": "llama", "device": "cuda",
                           "runtime": "host", "pinned": False, "smoke": False,
                           "repeats": len(tput)})  # fmt: skip
    for i, t in enumerate(tput):
        bundle.add_run(RunResult.model_validate({
            "schema": 1, "run_id": f"llama.p2p.r{i}", "benchmark": "llama",
            "kind": "llama_lora_fsdp", "variant": "p2p", "repeat": i, "status": "ok",
            "device": "cuda", "world_size": gpus,
            "metrics": {"throughput": {"value": t, "unit": "tokens/s", "higher_is_better": True},
                        "peak_mem_gib": {"value": mem, "unit": "GiB", "higher_is_better": False}},
            "data": {"unit": "tokens", "parallelism": parallelism},
        }))  # fmt: skip
    bundle.finish("complete")
    bundle.write_json("hardware.json", hardware(gpus, "vm"))
    bundle.write_json("environment.json", {"name": "cuda13", "runtime": "host", "pinned": False})
    write_manifest(bundle.path)
    return bundle.path


X2 = [14073.0, 13588.0, 14442.0]
X4 = [28275.0, 28254.0, 28296.0]


@pytest.fixture
def pair(tmp_path):
    return (training_bundle(tmp_path, "x2", 2, X2, 16.96),
            training_bundle(tmp_path, "x4", 4, X4, 13.16))  # fmt: skip


def headline(data, variant="p2p", metric="throughput"):
    return next(w for w in data["workloads"] if w["variant"] == variant and w["metric"] == metric)


def test_machines_are_named_by_hardware_and_the_users_label(pair, tmp_path):
    machines = load_machines(list(pair))
    assert [m.label for m in machines] == ["2x H200 NV18", "4x H200 NV18"]
    labelled = load_machines(list(pair), parse_labels(["2=vendor-x"], list(pair)))
    assert [m.label for m in labelled] == ["2x H200 NV18", "vendor-x (4x H200 NV18)"]
    twin = training_bundle(tmp_path, "twin", 2, X2, 16.96)
    alike = load_machines([pair[0], twin])
    assert [m.label for m in alike] == ["2x H200 NV18 [1]", "2x H200 NV18 [2]"]


def test_label_option_is_checked_on_one_line(pair):
    paths = list(pair)
    assert parse_labels([f"{pair[0]}=lab box 3"], paths) == {0: "lab box 3"}
    for spec, words in (("vendor", "expected POSITION=TEXT"), ("3=x", "allowed: 1 to 2"),
                        ("1=" + "x" * 41, "at most 40"), ("1=<b>", "at most 40"),
                        ("/nowhere=x", "not one of the compared bundles")):  # fmt: skip
        with pytest.raises(InputError, match=words):
            parse_labels([spec], paths)
    with pytest.raises(InputError, match="labelled twice"):
        parse_labels(["1=a", "1=b"], paths)


def test_no_scaling_efficiency_between_two_gpu_models(pair):
    """Two H200s against one H100 read "scaling efficiency 120.7% from 1 to 2 GPUs": the H200's
    memory, not scaling. Across models only the per-GPU ratio is given."""
    x2, x4 = pair
    doc = json.loads((x4 / "hardware.json").read_text())
    for g in doc["gpus"]:
        g["name"] = "NVIDIA H100 80GB HBM3"
    (x4 / "hardware.json").write_text(json.dumps(doc))
    write_manifest(x4)
    other = headline(comparison(load_machines([x2, x4]), 0))["cells"][1]
    assert other["gpus"] == 4 and "per_gpu_ratio" in other and "scaling" not in other


def test_per_gpu_and_scaling_efficiency_when_gpu_counts_differ(pair):
    data = comparison(load_machines(list(pair)), 0)
    row = headline(data)
    base, other = row["cells"]
    assert base["gpus"] == 2 and other["gpus"] == 4
    assert base["per_gpu"]["median"] == pytest.approx(statistics.median(X2) / 2)
    assert other["per_gpu"]["median"] == pytest.approx(statistics.median(X4) / 4)
    expected = (statistics.median(X4) / 4) / (statistics.median(X2) / 2)
    assert other["scaling"]["efficiency"] == pytest.approx(expected)
    assert other["scaling"]["sentence"].startswith(f"scaling efficiency {expected:.1%} from 2 to 4")
    assert other["per_gpu_ratio"]["estimate"] == pytest.approx(expected)
    assert "per_gpu_ratio" not in base and "scaling" not in base
    # the 4-GPU machine as baseline: the efficiency is the same figure, seen from the other side
    flipped = headline(comparison(load_machines(list(pair)), 1))["cells"][0]
    assert flipped["scaling"]["efficiency"] == pytest.approx(expected)
    # no "95% CI" for three runs: each interval says what it is
    assert base["summary"]["label"] == "95% t-interval, n=3"


def test_memory_of_a_sharded_workload_is_named_as_sharding(pair, tmp_path):
    data = comparison(load_machines(list(pair)), 0)
    mem = headline(data, metric="peak_mem_gib")
    factor = 16.96 / 13.16
    assert mem["cells"][1]["sharding"] == (
        f"peak GPU memory {factor:.2f}x lower: FSDP shards over 4 GPUs instead of 2; "
        "not a hardware difference"
    )
    assert mem["notes"] == [f"4x H200 NV18, llama p2p: {mem['cells'][1]['sharding']}."]
    ddp = training_bundle(tmp_path, "ddp4", 4, X4, 13.16, parallelism=DDP)
    plain = headline(comparison(load_machines([pair[0], ddp]), 0), metric="peak_mem_gib")
    assert "sharding" not in plain["cells"][1] and not plain["notes"]


def test_cost_per_million_units_at_a_given_price(pair):
    data = comparison(load_machines(list(pair)), 0, price_per_gpu_hour=3.5)
    cells = headline(data)["cells"]
    for cell in cells:
        median = cell["summary"]["median"]
        assert cell["cost_per_million"] == pytest.approx(
            cost_per_million(median, cell["gpus"], 3.5)
        )
    assert "cost_per_million" not in headline(comparison(load_machines(list(pair)), 0))["cells"][0]


@pytest.mark.parametrize(
    ("text", "amount", "currency"),
    [("3.50USD", 3.5, "USD"), ("USD 3.5", 3.5, "USD"), ("$3.5", 3.5, "USD"),
     ("2.9 eur", 2.9, "EUR"), ("4", 4.0, None)],
)  # fmt: skip
def test_a_price_names_its_currency_and_source(pair, text, amount, currency):
    price = check_price(text, " vendor quote ")
    assert (price.amount, price.currency, price.source) == (amount, currency, "vendor quote")
    data = comparison(load_machines(list(pair)), 0, price_per_gpu_hour=price)
    assert data["price"]["currency"] == currency and data["price_per_gpu_hour"] == amount
    assert ("currency not given" in data["price_words"]) == (currency is None)


@pytest.mark.parametrize("price", [0, -1, 1000, 5000, "USD3.5EUR", "3.5 dollars"])
def test_price_out_of_bounds_is_refused(price):
    with pytest.raises(InputError, match=r"more than 0 and less than 1000|such as 3\.50USD"):
        check_price(price)


def kit(*args: str) -> subprocess.CompletedProcess:
    return run_kit(*args, cwd=ROOT)


@pytest.mark.parametrize("command", ["report", "compare"])
@pytest.mark.parametrize("price", ["0", "1000", "abc"])
def test_price_option_errors_are_one_line(pair, command, price):
    bundles = [str(pair[0])] if command == "report" else [str(p) for p in pair]
    proc = kit(command, *bundles, "--price-per-gpu-hour", price)
    assert proc.returncode == 2
    assert proc.stderr.startswith("kit: error:") and proc.stderr.count("\n") == 1
    assert "price-per-gpu-hour" in proc.stderr
    assert not (pair[0] / "report.html").exists()  # refused before anything is written


def test_label_option_error_is_one_line(pair):
    proc = kit("compare", *map(str, pair), "--label", "9=x")
    assert (
        proc.returncode == 2
        and proc.stderr == "kit: error: --label 9: allowed: 1 to 2 (a bundle's position)\n"
    )
