"""Signed bundles (real ed25519 keys, the system's ssh-keygen) and interrupted seals (kit seal,
a full disk on a small tmpfs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kit.bundle import MANIFEST, SIGNATURE, Bundle, verify_manifest
from kit.bundle.signature import signature_status
from kit.io.errors import KitError
from tests.conftest import HEADER, ROOT, run_kit

FIXTURE = ROOT / "tests" / "fixtures" / "bundles" / "cpu-smoke"
needs_ssh_keygen = pytest.mark.skipif(
    shutil.which("ssh-keygen") is None, reason="ssh-keygen missing (apt-get install openssh-client)"
)


def sealed(tmp_path: Path, name: str = "b") -> Path:
    out = tmp_path / name
    shutil.copytree(FIXTURE, out)
    return out


def keypair(tmp_path: Path, name: str) -> Path:
    key = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)],
                   check=True)  # fmt: skip
    return key


def allowed(tmp_path: Path, who: str, key: Path) -> Path:
    public = " ".join(Path(f"{key}.pub").read_text().split()[:2])
    path = tmp_path / f"allowed-{who}"
    path.write_text(f'{who} namespaces="kit-bundle@kit" {public}\n')
    return path


@needs_ssh_keygen
def test_sign_then_verify_names_the_signer(tmp_path):
    b = sealed(tmp_path)
    key = keypair(tmp_path, "alice")
    proc = run_kit("sign", str(b), "--key", str(key), "--identity", "alice@lab")
    assert proc.returncode == 0, proc.stderr
    assert (b / SIGNATURE).read_text().startswith("-----BEGIN SSH SIGNATURE-----")
    assert 'alice@lab namespaces="kit-bundle@kit" ssh-ed25519 ' in proc.stderr
    assert verify_manifest(b).ok  # the signature is the one entry the manifest does not list
    plain = run_kit("verify", str(b))
    assert plain.returncode == 0 and "signer not checked" in plain.stdout
    signers = allowed(tmp_path, "alice@lab", key)
    checked = run_kit("verify", str(b), "--allowed-signers", str(signers))
    assert checked.returncode == 0 and "signed by alice@lab (ED25519 SHA256:" in checked.stdout
    # and ssh-keygen alone agrees, as the README says
    with open(b / MANIFEST, "rb") as data:
        ok = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(signers), "-I", "alice@lab",
                             "-n", "kit-bundle@kit", "-s", str(b / SIGNATURE)], stdin=data,
                            capture_output=True)  # fmt: skip
    assert ok.returncode == 0, ok.stderr


@needs_ssh_keygen
def test_a_re_sealed_edit_breaks_the_signature(tmp_path):
    b = sealed(tmp_path)
    key = keypair(tmp_path, "alice")
    assert run_kit("sign", str(b), "--key", str(key)).returncode == 0
    # the editor changes a number and recomputes the manifest, keeping the old signature
    results = b / "results.json"
    results.write_text(results.read_text().replace('"status": "ok"', '"status": "OK"', 1))
    sig = (b / SIGNATURE).read_bytes()
    from kit.bundle import write_manifest

    write_manifest(b)
    (b / SIGNATURE).write_bytes(sig)
    assert verify_manifest(b).ok
    assert signature_status(b).state == "bad"
    proc = run_kit("verify", str(b))
    assert proc.returncode == 1 and "BAD SIGNATURE" in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


@needs_ssh_keygen
def test_a_stranger_key_is_not_an_allowed_signer(tmp_path):
    b = sealed(tmp_path)
    mallory = keypair(tmp_path, "mallory")
    alice = keypair(tmp_path, "alice")
    assert run_kit("sign", str(b), "--key", str(mallory), "--identity", "alice@lab").returncode == 0
    proc = run_kit(
        "verify", str(b), "--allowed-signers", str(allowed(tmp_path, "alice@lab", alice))
    )
    assert (
        proc.returncode == 1 and "does not list" in proc.stderr and "Traceback" not in proc.stderr
    )


@needs_ssh_keygen
def test_unsigned_bundle_with_allowed_signers_fails_and_signed_report_is_refused(tmp_path):
    b = sealed(tmp_path)
    key = keypair(tmp_path, "alice")
    proc = run_kit("verify", str(b), "--allowed-signers", str(allowed(tmp_path, "a", key)))
    assert proc.returncode == 1 and "unsigned" in proc.stderr
    assert run_kit("sign", str(b), "--key", str(key)).returncode == 0
    rep = run_kit("report", str(b))
    assert rep.returncode == 2 and "void the signature" in rep.stderr
    assert rep.stderr.count("\n") == 1


@needs_ssh_keygen
@pytest.mark.parametrize(
    "case", ["edited", "no-key", "fifo-key", "bad-identity", "not-a-key", "empty-key"]
)
def test_sign_refusals_are_one_line(tmp_path, case):
    b = sealed(tmp_path)
    key = keypair(tmp_path, "alice")
    args = ["sign", str(b), "--key", str(key)]
    if case == "edited":
        (b / "hardware.json").write_text("{}")
    elif case == "no-key":
        args[-1] = str(tmp_path / "nope")
    elif case == "fifo-key":
        os.mkfifo(tmp_path / "fifo")
        args[-1] = str(tmp_path / "fifo")
    elif case == "not-a-key":
        (tmp_path / "garbage").write_text("not a key\n")
        args[-1] = str(tmp_path / "garbage")
    elif case == "empty-key":
        (tmp_path / "empty").write_text("")
        args[-1] = str(tmp_path / "empty")
    else:
        args += ["--identity", "a b\nc"]
    proc = run_kit(*args, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert not (b / SIGNATURE).exists()


def test_missing_ssh_keygen_is_one_line_naming_the_package(tmp_path):
    b = sealed(tmp_path)
    env = dict(os.environ, PATH=str(tmp_path / "empty"))
    proc = run_kit("verify", str(b), env=env)
    assert proc.returncode == 0  # unsigned: ssh-keygen is not needed
    (b / SIGNATURE).write_text("-----BEGIN SSH SIGNATURE-----\n")
    proc = run_kit("verify", str(b), env=env)
    assert proc.returncode == 1 and "openssh-client" in proc.stderr
    assert proc.stderr.count("\n") == 1


def interrupted(tmp_path: Path) -> Path:
    """A bundle as a second Ctrl-C while sealing leaves it: running, no manifest, .tmp files,
    and a finished run whose result the driver never recorded."""
    b = sealed(tmp_path)
    (b / MANIFEST).unlink()
    data = json.loads((b / "results.json").read_text())
    data["status"], data["finished_at"] = "running", None
    data["runs"] = data["runs"][:3]  # the fourth finished, but was never recorded
    (b / "results.json").write_text(json.dumps(data))
    (b / ".results.json.1a2b3c4d.tmp").write_text('{"half": ')
    (b / "runs" / "allreduce.no-p2p.r1" / "result.json.tmp").write_text("{")
    return b


def test_unsealed_bundle_is_refused_with_the_way_out(tmp_path):
    b = interrupted(tmp_path)
    proc = run_kit("report", str(b))
    assert proc.returncode == 2 and "kit seal" in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.slow
def test_kit_seal_recovers_every_finished_run(tmp_path):
    b = interrupted(tmp_path)
    proc = run_kit("seal", str(b), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (
        "4 finished runs kept (1 recovered from their workers' files), 2 temporary files"
        in proc.stderr
    )
    assert verify_manifest(b).ok
    results = json.loads((b / "results.json").read_text())
    assert results["status"] == "interrupted" and results["finished_at"]
    assert results["sealed_after"]["recovered_runs"] == ["allreduce.no-p2p.r1"]
    assert len(results["runs"]) == 4
    assert not [p for p in b.rglob("*") if p.name.endswith(".tmp")]
    again = run_kit("seal", str(b))
    assert again.returncode == 2 and "already sealed" in again.stderr
    assert run_kit("verify", str(b)).returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True, text=True)  # fmt: skip
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({proc.stderr.strip() or 'not root'})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def fill(folder: Path) -> None:
    with open(folder / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


def test_full_disk_is_one_line_and_leaves_no_tmp(small_disk):
    bundle = Bundle.create(small_disk / "b", {"kit": 1}, HEADER)
    fill(small_disk)
    bundle.results.error = "x" * 10000
    with pytest.raises(KitError, match=r"results\.json: not written: the disk is full"):
        bundle.save()
    assert not [p for p in small_disk.rglob("*") if p.name.endswith(".tmp")]
    assert json.loads((bundle.path / "results.json").read_text())["runs"] == []  # the last whole


@pytest.mark.slow
def test_kit_seal_on_a_full_disk_is_one_line_and_leaves_no_tmp(small_disk, tmp_path):
    b = interrupted(tmp_path)
    shutil.copytree(b, small_disk / "b")
    fill(small_disk)
    proc = run_kit("seal", str(small_disk / "b"), timeout=300)
    assert proc.returncode == 1 and "disk is full" in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("kit: error: ")
    assert "Traceback" not in proc.stderr
    assert not [p for p in small_disk.rglob("*") if p.name.endswith(".tmp")]


@needs_ssh_keygen
@pytest.mark.slow
def test_compare_names_who_signed_each_bundle(tmp_path):
    """A vendor's signed bundle beside an unsigned one: the comparison says which is which."""
    signed, unsigned = sealed(tmp_path, "signed"), sealed(tmp_path, "unsigned")
    key = keypair(tmp_path, "vendor")
    assert run_kit("sign", str(signed), "--key", str(key), "--identity", "vendor@x").returncode == 0
    signers = allowed(tmp_path, "vendor@x", key)
    out = tmp_path / "cmp"
    refused = run_kit("compare", str(signed), str(unsigned), "--out", str(out),
                      "--allowed-signers", str(signers))  # fmt: skip
    assert refused.returncode == 2 and "unsigned; --allowed-signers asks" in refused.stderr
    assert not out.exists()
    proc = run_kit("compare", str(signed), str(unsigned), "--out", str(out),
                   "--allowed-signers", str(signers), "--allow-unsigned")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    machines = json.loads((out / "compare.json").read_text())["machines"]
    assert machines[0]["signature"].startswith("signed by vendor@x (ED25519 SHA256:")
    assert machines[1]["signature"] == "unsigned"
    assert "signed by vendor@x" in (out / "compare.html").read_text()
