"""A bundle is complete and, when the user asks, signed by someone they trust, or it is refused.

Incomplete: a sender removes a file every bundle holds and recomputes the manifest, so the
manifest matches. Signature: a bundle that is unsigned, edited and resealed after signing, or
signed by a key the user's allowed-signers file does not list. Every command that reads a bundle
refuses each with one line and exit status 2 (`kit verify` fails it with exit 1).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kit.bundle import write_manifest
from tests.conftest import ROOT, one_line, run_kit

FIXTURE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"
needs_ssh_keygen = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="no ssh-keygen")


def copy(tmp_path: Path, name: str = "b") -> Path:
    shutil.copytree(FIXTURE, tmp_path / name)
    return tmp_path / name


def readers(b: Path, tmp_path: Path, *extra: str) -> dict[str, list[str]]:
    other = tmp_path / "other"
    if not other.exists():
        shutil.copytree(FIXTURE, other)
    return {
        "compare": ["compare", str(other), str(b), "--out", str(tmp_path / "c"), *extra],
        "reproduce": ["reproduce", str(b), "--out", str(tmp_path / "r"), *extra],
        "refs add": ["refs", "add", str(b), *extra],
        "accept": ["accept", str(b), "--against", "1GB/s", *extra],
    }


ENV = {**os.environ, "KIT_REFS_DB": "/nonexistent-kit-test/refs.sqlite"}


@pytest.mark.parametrize(
    "removed",
    [["results.json"], ["recipe.yaml"], ["hardware.json"], ["environment.json"],
     ["hardware.json", "environment.json"]],
)  # fmt: skip
def test_incomplete_bundle_is_refused_everywhere(tmp_path, removed):
    b = copy(tmp_path)
    for name in removed:
        (b / name).unlink()
    write_manifest(b)  # the sender recomputed it: it matches
    verify = run_kit("verify", str(b))
    assert verify.returncode in (1, 2) and "OK" not in verify.stdout, verify.stdout
    assert removed[0] in verify.stderr + verify.stdout
    commands = {"report": ["report", str(b)], "accept": ["accept", str(b), "--against", "1GB/s"],
                **readers(b, tmp_path)}  # fmt: skip
    for command, args in commands.items():
        line = one_line(run_kit(*args, timeout=120, env=ENV))
        assert all(name in line for name in removed), (command, line)
    assert not (tmp_path / "c").exists() and not (tmp_path / "r").exists()


def _keypair(tmp_path: Path, name: str) -> Path:
    key = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)],
                   check=True)  # fmt: skip
    return key


def _allowed(tmp_path: Path, who: str, key: Path) -> Path:
    path = tmp_path / f"allowed-{who}"
    public = " ".join(Path(f"{key}.pub").read_text().split()[:2])
    path.write_text(f'{who} namespaces="kit-bundle@kit" {public}\n')
    return path


@needs_ssh_keygen
def test_signature_is_a_gate_with_allowed_signers(tmp_path):
    alice, mallory = _keypair(tmp_path, "alice"), _keypair(tmp_path, "mallory")
    signers = _allowed(tmp_path, "alice@lab", alice)
    good = copy(tmp_path, "good")
    assert run_kit("sign", str(good), "--key", str(alice)).returncode == 0
    other = copy(tmp_path, "other")  # what compare puts first: signed by alice
    assert run_kit("sign", str(other), "--key", str(alice)).returncode == 0
    resealed = copy(tmp_path, "resealed")
    assert run_kit("sign", str(resealed), "--key", str(alice)).returncode == 0
    (resealed / "logs" / "note.txt").write_text("edited after signing\n")
    sig = (resealed / "MANIFEST.sha256.sig").read_bytes()
    write_manifest(resealed)  # removes the signature of the old manifest: put it back
    (resealed / "MANIFEST.sha256.sig").write_bytes(sig)
    stranger = copy(tmp_path, "stranger")
    assert run_kit("sign", str(stranger), "--key", str(mallory)).returncode == 0
    unsigned = copy(tmp_path, "unsigned")
    cases = {
        resealed: "BAD SIGNATURE",
        stranger: "does not list",
        unsigned: "unsigned; --allowed-signers asks",
    }
    for b, words in cases.items():
        for command, args in readers(b, tmp_path, "--allowed-signers", str(signers)).items():
            line = one_line(run_kit(*args, timeout=120, env=ENV))
            assert words in line and b.name in line, (command, line)
    # the user can say that unsigned is acceptable; a bad signature stays refused
    for b, code in ((unsigned, 0), (resealed, 2), (stranger, 2)):
        args = readers(b, tmp_path, "--allowed-signers", str(signers), "--allow-unsigned")
        proc = run_kit(*args["compare"], timeout=120)
        assert proc.returncode == code, (b.name, proc.stderr)
        shutil.rmtree(tmp_path / "c", ignore_errors=True)
    ok = run_kit("compare", str(good), str(unsigned), "--out", str(tmp_path / "c"),
                 "--allowed-signers", str(signers), "--allow-unsigned")  # fmt: skip
    assert ok.returncode == 0, ok.stderr


def test_signer_options_are_checked_before_anything(tmp_path):
    b = copy(tmp_path)
    empty = tmp_path / "empty"
    empty.write_text("# nobody\n")
    for signers, words in ((tmp_path / "nope", "not a regular file"), (empty, "no signer")):
        for args in readers(b, tmp_path, "--allowed-signers", str(signers)).values():
            assert words in one_line(run_kit(*args, timeout=120, env=ENV))
        assert words in one_line(run_kit("verify", str(b), "--allowed-signers", str(signers)))
    for args in readers(b, tmp_path, "--allow-unsigned").values():
        assert "only with --allowed-signers" in one_line(run_kit(*args, timeout=120, env=ENV))
    recipe = str(ROOT / "recipes" / "allreduce.yaml")
    for flag in (["--allowed-signers", str(empty)], ["--allow-unsigned"]):
        line = one_line(run_kit("reproduce", recipe, *flag, "--device", "cpu", cwd=tmp_path))
        assert "only for rerunning a bundle" in line
    assert not (tmp_path / "reports").exists() and not (tmp_path / "c").exists()
