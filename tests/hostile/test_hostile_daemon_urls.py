"""A node's Docker daemon URL is [USER@]HOST[:PORT] or a local socket: never an option to ssh.

ssh reads `ssh://-oProxyCommand=CMD` as the option -oProxyCommand and runs CMD; a recipe or
`--nodes` that names such a node is refused before anything connects (one line, exit 2).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.recipe.daemons import url_ok
from tests.conftest import run_kit

RECIPE = """kit: 1
name: hr
gpus: 2
repeats: 1
variants: [p2p]
nodes: {hosts: ["unix:///var/run/docker.sock", NODE]}
benchmarks:
  - kind: allreduce
    params: {min_bytes: 8, max_bytes: 1024, factor: 2, dtype: float32, iters: 2, trials: 1}
"""

HOSTILE = ["ssh://-oProxyCommand=id", "ssh://-oProxyCommand=id/x", "ssh://kit@-oProxyCommand=id",
           "ssh://a b", "tcp://host:99999", "tcp://host:0", "ssh://", "tcp://:2375"]  # fmt: skip
FINE = ["unix:///var/run/docker.sock", "ssh://node2", "ssh://kit@node2:2222", "tcp://10.0.0.3:2376",
        "tcp://[fe80::1]:2376", "https://docker.example:2376/"]  # fmt: skip


@pytest.mark.parametrize("url", HOSTILE)
def test_an_option_or_a_broken_host_is_no_daemon_url(url: str) -> None:
    assert not url_ok(url)


@pytest.mark.parametrize("url", FINE)
def test_daemon_urls_stay_accepted(url: str) -> None:
    assert url_ok(url)


def test_a_recipe_naming_an_ssh_option_is_refused(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.replace("NODE", '"ssh://-oProxyCommand=id"'))
    proc = run_kit("recipes", "validate", str(recipe), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip()
    assert (
        len(err.splitlines()) == 1 and "'ssh://-oProxyCommand=id' is not a Docker daemon URL" in err
    )


def test_nodes_naming_an_ssh_option_is_refused_before_anything(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_kit("reproduce", "recipes/allreduce.yaml", "--device", "cpu", "--runtime", "docker",
                   "--nodes", "unix:///var/run/docker.sock,ssh://-oProxyCommand=id",
                   "--out", str(out), timeout=60)  # fmt: skip
    assert proc.returncode == 2 and not out.exists(), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "--nodes" in proc.stderr


@pytest.mark.parametrize("nodes", ["unix:///var/run/docker.sock,", ",unix:///var/run/docker.sock",
                                   "unix:///var/run/docker.sock,,ssh://node2"])  # fmt: skip
def test_an_empty_node_entry_is_refused(tmp_path: Path, nodes: str) -> None:
    """`--nodes A,` ran on A alone: the empty entry was dropped without a word."""
    out = tmp_path / "out"
    proc = run_kit("reproduce", "recipes/allreduce.yaml", "--device", "cpu", "--runtime", "docker",
                   "--nodes", nodes, "--out", str(out), timeout=60)  # fmt: skip
    assert proc.returncode == 2 and not out.exists(), proc.stderr
    assert proc.stderr.count("\n") == 1 and "an empty entry" in proc.stderr
