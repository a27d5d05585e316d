"""Hostile recipes: env that loads code, loose types, bombs, FIFOs. Each is one line, exit 2."""

from __future__ import annotations

import json
import os
import shutil
import threading

import pytest

from kit.bundle import write_manifest
from kit.io.errors import InputError
from kit.recipe import load_recipe
from kit.recipe.env import why_refused
from tests.conftest import ROOT, run_kit

FIXTURE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"
HEAD = "kit: 1\nname: demo\ngpus: 2\nbenchmarks:\n  - kind: allreduce\n"


def variant_env(key: str, value: str = "1") -> str:
    return HEAD + f"variants:\n  - name: v\n    env: {{{key}: {value!r}}}\n"


REFUSED_ENV = [
    "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PATH",
    "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN", "NCCL_ENV_PLUGIN",
    "NCCL_DEBUG_FILE", "NCCL_TOPO_FILE", "NCCL_CONF_FILE", "NCCL_GRAPH_DUMP_FILE",
    "CUDA_INJECTION64_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_CACHE_PATH", "CUDA_HOME",
    "TORCH_EXTENSIONS_DIR", "TORCH_HOME", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
    "OMP_TOOL_LIBRARIES", "OMP_TOOL", "NVSHMEM_BOOTSTRAP_PLUGIN", "TORCH_LOGS_OUT",
    "HOME", "BASH_ENV", "ENV", "MASTER_ADDR", "nccl_debug",
]  # fmt: skip
ALLOWED_ENV = [
    ("NCCL_P2P_DISABLE", "1"), ("NCCL_ALGO", "Ring"), ("NCCL_SOCKET_IFNAME", "^docker,lo"),
    ("NCCL_IB_HCA", "mlx5_0:1"), ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
    ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"), ("OMP_NUM_THREADS", "4"),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"), ("GLOO_SOCKET_IFNAME", "lo"),
    ("CUBLAS_WORKSPACE_CONFIG", ":4096:8"), ("NVSHMEM_DISABLE_NVLS", "1"),
]  # fmt: skip


@pytest.mark.parametrize("key", REFUSED_ENV)
def test_env_that_can_load_code_or_name_paths_is_refused(tmp_path, key):
    path = tmp_path / "r.yaml"
    path.write_text(variant_env(key))
    with pytest.raises(InputError) as err:
        load_recipe(path)
    assert key in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("key", "value"), ALLOWED_ENV)
def test_tuning_variables_are_allowed(key, value):
    assert why_refused(key, value) is None


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("NCCL_ALGO", "Ring\nLD_PRELOAD=/x.so", "line break"),
        ("NCCL_ALGO", "Ring\0", "NUL"),
        ("NCCL_A=B", "1", "'='"),
        ("NCCL_ALGO", "/tmp/x", "path"),
        ("NCCL_ALGO", 1, "string"),
    ],
)
def test_env_keys_and_values_are_checked(key, value, why):
    assert why in (why_refused(key, value) or "")


def test_nodes_env_is_checked_too(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(
        HEAD + 'nodes:\n  hosts: ["unix:///var/run/docker.sock"]\n  env: {LD_PRELOAD: x}\n'
    )
    with pytest.raises(InputError, match=r"r.yaml:\d+: nodes.env: LD_PRELOAD: not allowed"):
        load_recipe(path)


LOOSE = {
    "kit-string": (HEAD.replace("kit: 1", 'kit: "1"'), "kit"),
    "kit-true": (HEAD.replace("kit: 1", "kit: true"), "kit"),
    "gpus-true": (HEAD.replace("gpus: 2", "gpus: true"), "gpus"),
    "gpus-string": (HEAD.replace("gpus: 2", 'gpus: "2"'), "gpus"),
    "repeats-huge": (HEAD + "repeats: 1000000000\n", "repeats"),
    "gpu-ids-duplicate": (HEAD + "variants:\n  - {name: v, gpu_ids: [0, 0]}\n", "distinct"),
    "gpu-ids-too-many": (HEAD + "variants:\n  - {name: v, gpu_ids: [0, 1, 2, 3]}\n", "gpu_ids"),
    "gpu-ids-too-few": (HEAD + "variants:\n  - {name: v, gpu_ids: [0]}\n", "gpu_ids"),
    "gpu-ids-negative": (HEAD + "variants:\n  - {name: v, gpu_ids: [-1, 0]}\n", "gpu_ids"),
    "gpu-ids-bool": (HEAD + "variants:\n  - {name: v, gpu_ids: [true, false]}\n", "gpu_ids"),
    "timeout-true": (HEAD + "timeout_s: true\n", "timeout_s"),
    "timeout-a-millisecond": (HEAD + "timeout_s: 0.001\n", "timeout_s"),
    "deep": (HEAD.replace("kit: 1\n", "kit: 1\nx: " + "[" * 500 + "]" * 500 + "\n"), "nested"),
    "deep-map": (HEAD + "description: " + "{a: " * 400 + "1" + "}" * 400 + "\n", "nested"),
}


@pytest.mark.parametrize("case", sorted(LOOSE))
def test_loose_types_and_bombs_are_one_line(tmp_path, case):
    text, named = LOOSE[case]
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_recipe(path)
    assert named in str(err.value), str(err.value)


def test_deep_recipe_in_recipes_list_is_one_line(tmp_path):
    (tmp_path / "deep.yaml").write_text("x: " + "[" * 2000 + "]" * 2000 + "\n")
    proc = run_kit("recipes", "list", str(tmp_path))
    assert proc.returncode == 0 and "INVALID" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.parametrize("what", ["fifo", "dev-null", "dir"])
def test_non_regular_recipe_paths_are_refused_before_opening(tmp_path, what):
    path = {"fifo": tmp_path / "r.yaml", "dev-null": "/dev/null", "dir": tmp_path}[what]
    if what == "fifo":
        os.mkfifo(path)
    result: dict = {}

    def call():
        result["proc"] = run_kit("recipes", "validate", str(path), timeout=60)

    t = threading.Thread(target=call)
    t.start()
    t.join(90)
    if what == "fifo" and t.is_alive():  # unblock the hung reader so the test ends
        with open(path, "w") as f:
            f.write("")
        t.join(30)
        pytest.fail("kit opened the FIFO and hung")
    proc = result["proc"]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and str(path) in proc.stderr


def test_recipes_shipped_with_the_kit_still_validate():
    proc = run_kit("recipes", "validate", *sorted(str(p) for p in (
        __import__("tests.conftest").conftest.ROOT / "recipes").glob("*.yaml")))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # counted in words a reader would write: "1 benchmark, 2 variants", never "1 benchmarks"
    assert "recipes/allreduce.yaml: OK (1 benchmark, 2 variants)" in proc.stdout
    assert "recipes/silicon.yaml: OK (2 benchmarks, 1 variant)" in proc.stdout


FOREIGN_ENV = {
    "NCCL_COMM_ID": ("evil.example:4242", "dial"),
    "NCCL_NET": ("IB", "network plugin"),
    "TORCH_COMPILE_DEBUG": ("1", "debug files"),
    "TORCH_TRACE": ("trace", "trace files"),
    "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": ("1", "weights-only"),
    "TORCH_DEVICE_BACKEND_AUTOLOAD": ("1", "plug-ins"),
    "TORCH_NCCL_DUMP_ON_TIMEOUT": ("1", "known tuning variables"),
    "NCCL_SOME_FUTURE_KNOB": ("1", "known tuning variables"),
    "NCCL_ALGO": ("Ring;Tree", "expected a comma list of Ring"),
    "NCCL_P2P_DISABLE": ("yes", "an integer from 0 to 1"),
    "NCCL_BUFFSIZE": ("-1", "an integer from 1"),
    "NCCL_NTHREADS": ("7", "one of 64, 128"),
    "NCCL_SOCKET_IFNAME": ("eth0 lo", "interface names"),
    "NCCL_DEBUG": ("INFO\x1b[2J", "one of VERSION"),
    "PYTORCH_CUDA_ALLOC_CONF": ("x", "key:value"),
}


@pytest.mark.parametrize("key", sorted(FOREIGN_ENV))
def test_a_foreign_recipe_sets_only_known_tuning_variables_with_checked_values(tmp_path, key):
    """The name-prefix rule let these through; the table refuses each with one line and why."""
    value, why = FOREIGN_ENV[key]
    reason = why_refused(key, value)
    assert reason is not None and key in reason and why in reason, reason
    path = tmp_path / "r.yaml"
    path.write_text(HEAD + f"variants:\n  - name: v\n    env: {{{key}: {json.dumps(value)}}}\n")
    proc = run_kit("recipes", "validate", str(path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and key in proc.stderr
    assert "\x1b" not in proc.stderr


@pytest.mark.parametrize("key", ["NCCL_COMM_ID", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"])
def test_a_bundle_whose_recipe_sets_them_is_refused(tmp_path, key):
    b = tmp_path / "b"
    shutil.copytree(FIXTURE, b)
    text = (b / "recipe.yaml").read_text()
    (b / "recipe.yaml").write_text(text.replace("NCCL_P2P_DISABLE: '1'", f"{key}: '1'"))
    write_manifest(b)
    for args in (["reproduce", str(b), "--out", str(tmp_path / "r")], ["report", str(b)]):
        proc = run_kit(*args, timeout=120)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert key in proc.stderr and "not allowed" in proc.stderr
    assert not (tmp_path / "r").exists()


YAML_SHAPES = {
    "complex-key": ("? [a, b]\n: 1\n", "a key must be a plain word"),
    "binary-tag": (
        HEAD + "    params: {x: !!binary aGVsbG8=}\n",
        "not allowed in recipes ('!!binary')",
    ),
    "set-tag": (HEAD + "    params: !!set {a, b}\n", "not allowed in recipes ('!!set')"),
    "infinite": (HEAD + "    params: {x: .inf}\n", "not a finite number"),
    "10000-variants": (
        HEAD + "variants:\n" + "".join(f"  - {{name: v{i}}}\n" for i in range(10000)),
        "at most 64 items",
    ),
    "expect-1e400": (
        HEAD + "    expect:\n      busbw_largest: {value: 1e400, unit: GB/s}\n",
        "finite",
    ),
}


@pytest.mark.parametrize("case", sorted(YAML_SHAPES))
def test_yaml_shapes_a_recipe_never_holds(tmp_path, case):
    text, words = YAML_SHAPES[case]
    path = tmp_path / "r.yaml"
    path.write_text(text)
    proc = run_kit("recipes", "validate", str(path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert words in proc.stderr and "Traceback" not in proc.stderr


def test_a_complex_key_in_a_bundles_recipe_is_one_line(tmp_path):
    b = tmp_path / "b"
    shutil.copytree(FIXTURE, b)
    (b / "recipe.yaml").write_text((b / "recipe.yaml").read_text() + "? [a, b]\n: 1\n")
    write_manifest(b)
    for args in (["compare", str(b), str(FIXTURE), "--out", str(tmp_path / "c")],
                 ["accept", str(b), "--against", "1GB/s"]):  # fmt: skip
        proc = run_kit(*args)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (args, proc.stderr)
        assert "plain word" in proc.stderr
