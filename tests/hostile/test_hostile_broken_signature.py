"""A bundle whose signature does not verify is evidence of an edit: every command that opens
bundles refuses it (one line naming it, exit 2), with or without --allowed-signers, and
`kit refs add` stores nothing from it. An unsigned bundle is a different thing: read as before.

The sender signs a bundle with a real ed25519 key, then edits a number and reseals it, or puts
a garbage signature there, or copies the signature of another bundle.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kit.bundle import SIGNATURE, write_manifest
from tests.conftest import ROOT, run_kit

FIXTURE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"
pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen missing")


def signed(tmp_path: Path, name: str) -> Path:
    b = tmp_path / name
    shutil.copytree(FIXTURE, b)
    key = tmp_path / "key"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    proc = run_kit("sign", str(b), "--key", str(key), "--identity", "alice@lab")
    assert proc.returncode == 0, proc.stderr
    return b


def edited_and_resealed(tmp_path: Path) -> Path:
    b = signed(tmp_path, "edited")
    signature = (b / SIGNATURE).read_bytes()
    results = json.loads((b / "results.json").read_text())
    results["created_at"] = "2020-01-01T00:00:00Z"
    (b / "results.json").write_text(json.dumps(results))
    write_manifest(b)  # the manifest matches again (kit's reseal drops the signature) ...
    (b / SIGNATURE).write_bytes(signature)  # ... and the sender puts the old one back
    return b


def garbage(tmp_path: Path) -> Path:
    b = signed(tmp_path, "garbage")
    (b / SIGNATURE).write_text("-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n")
    return b


def copied(tmp_path: Path) -> Path:
    other = tmp_path / "other"  # another bundle (its own results), properly signed
    shutil.copytree(FIXTURE, other)
    results = json.loads((other / "results.json").read_text())
    results["created_at"] = "2021-01-01T00:00:00Z"
    (other / "results.json").write_text(json.dumps(results))
    write_manifest(other)
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    assert run_kit("sign", str(other), "--key", str(key)).returncode == 0
    b = tmp_path / "copied"
    shutil.copytree(FIXTURE, b)
    shutil.copy(other / SIGNATURE, b / SIGNATURE)
    return b


BROKEN = {"edited-resealed": edited_and_resealed, "garbage": garbage, "copied": copied}


def commands(b: Path, tmp_path: Path) -> dict[str, tuple[str, ...]]:
    return {
        "compare": ("compare", str(b), str(FIXTURE), "--out", str(tmp_path / "cmp")),
        "accept": ("accept", str(b), "--against", "1GB/s"),
        "accept-against": ("accept", str(FIXTURE), "--against", str(b)),
        "reproduce": ("reproduce", str(b), "--out", str(tmp_path / "re"), "--device", "cpu"),
        "refs-add": ("refs", "add", str(b), "--label", "theirs"),
        "refs-standing": ("refs", "standing", str(b)),
    }


@pytest.mark.parametrize("how", sorted(BROKEN))
def test_a_broken_signature_is_refused_by_every_reader(tmp_path, how):
    b = BROKEN[how](tmp_path)
    assert run_kit("verify", str(b)).returncode != 0  # what verify says, every reader says
    env = {**os.environ, "KIT_REFS_DB": str(tmp_path / "refs.sqlite")}
    for name, args in commands(b, tmp_path).items():
        proc = run_kit(*args, env=env, timeout=300)
        assert proc.returncode == 2, (name, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "BAD SIGNATURE" in proc.stderr, (name, proc.stderr)
        assert str(b) in proc.stderr
    assert not (tmp_path / "cmp").exists() and not (tmp_path / "re").exists()
    listed = run_kit("refs", "list", env=env)
    assert "theirs" not in listed.stdout


def test_an_unsigned_bundle_is_still_read(tmp_path):
    env = {**os.environ, "KIT_REFS_DB": str(tmp_path / "refs.sqlite")}
    proc = run_kit("refs", "add", str(FIXTURE), "--label", "mine", env=env)
    assert proc.returncode == 0, proc.stderr


def test_read_anyway_names_the_cause_a_signer_the_file_does_not_list(tmp_path):
    """7th pass: a bundle signed by a key the allowed-signers file does not list, read with
    --read-broken-signature, was said to have been "changed after it was signed"; the warning
    gives the check's own reason."""
    b = signed(tmp_path, "b")
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    allowed = tmp_path / "allowed"
    allowed.write_text(f"someone@example {other.with_suffix('.pub').read_text()}")
    proc = run_kit("accept", str(b), "--against", "1GB/s", "--read-broken-signature",
                   "--allowed-signers", str(allowed), timeout=120)  # fmt: skip
    assert "does not list" in proc.stderr and "changed after" not in proc.stderr, proc.stderr
