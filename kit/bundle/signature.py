"""Signed bundles: an SSH signature of the sealed manifest, made and checked by ssh-keygen.

A manifest detects accidents; anyone who edits a bundle can recompute it. A signature says who
sealed it. `kit sign` signs MANIFEST.sha256 the way git signs commits (`ssh-keygen -Y sign`,
namespace "kit-bundle@kit") and writes MANIFEST.sha256.sig beside it: the one file a manifest
does not list, since it signs the manifest, which lists every other file. Anyone can check it
with ssh-keygen alone:

    ssh-keygen -Y verify -f allowed_signers -I ID -n kit-bundle@kit \
        -s MANIFEST.sha256.sig < MANIFEST.sha256

`allowed_signers` is OpenSSH's format (ssh-keygen(1), ALLOWED SIGNERS): one line per signer,
`ID namespaces="kit-bundle@kit" ssh-ed25519 AAAA...`. No cryptography is done here.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kit.bundle import MANIFEST, SIGNATURE, require_sealed
from kit.io.errors import InputError, KitError
from kit.io.safe import read_bytes, write_bytes

NAMESPACE = "kit-bundle@kit"
TIMEOUT_S = 60
_KEY = re.compile(r"(\w+) key (SHA256:[A-Za-z0-9+/=]+)")


def ssh_keygen() -> str:
    path = shutil.which("ssh-keygen")
    if path is None:
        raise KitError(
            "ssh-keygen not found: signatures need OpenSSH's client "
            "(Debian/Ubuntu: apt-get install openssh-client; Fedora: dnf install openssh-clients)"
        )
    return path


def _run(args: list[str], data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            [ssh_keygen(), *args],
            input=data,
            capture_output=True,
            timeout=TIMEOUT_S,
            stdin=None if data is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise KitError(f"ssh-keygen {args[0]} {args[1]}: no answer in {TIMEOUT_S} s") from None


def _last_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    lines = (proc.stderr or proc.stdout).decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"exit status {proc.returncode}"


def _regular(path: Path, what: str) -> Path:
    """A user-named key or signers file: a regular file (no FIFO to hang on)."""
    if not Path(path).is_file():
        raise InputError(f"{what} {path}: not a regular file")
    return Path(path)


def check_allowed_signers(path: Path) -> Path:
    """A user's allowed-signers file: a regular file with at least one signer line."""
    _regular(path, "--allowed-signers")
    with open(path, "rb") as f:  # the user's own file (a link to it is fine)
        text = f.read(1 << 20).decode("utf-8", "replace")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise InputError(
            f"--allowed-signers {path}: no signer in it (one line per signer: "
            f'ID namespaces="{NAMESPACE}" ssh-ed25519 AAAA...; `kit sign` prints it)'
        )
    return Path(path)


def sign(root: Path, key: Path, identity: str | None = None) -> tuple[Path, str]:
    """Sign a sealed bundle's manifest with an SSH private key.

    Returns the signature's path and the allowed_signers line that trusts this key (for
    `identity`, or "ID" when none is given).
    """
    root = Path(root)
    if identity is not None and not re.fullmatch(r"[^\s\"',*?!]{1,200}", identity):
        raise InputError(f"--identity {identity!r}: one word (an e-mail address, say)")
    _regular(key, "--key")
    require_sealed(root, "sign only an untouched bundle")
    manifest = read_bytes(root / MANIFEST)
    proc = _run(["-Y", "sign", "-f", str(key), "-n", NAMESPACE], manifest)
    if proc.returncode != 0 or not proc.stdout.startswith(b"-----BEGIN SSH SIGNATURE-----"):
        # the key is the user's input: a file that is no key, a key with a passphrase and no agent
        raise InputError(f"ssh-keygen -Y sign -f {key}: {_last_line(proc)}")
    write_bytes(root / SIGNATURE, proc.stdout)
    public = _public_key(key)
    line = f'{identity or "ID"} namespaces="{NAMESPACE}" {public}' if public else ""
    return root / SIGNATURE, line


def _public_key(key: Path) -> str | None:
    """The public half of `key` (KEY.pub, or derived by ssh-keygen -y), "TYPE BASE64"."""
    pub = Path(f"{key}.pub")
    if pub.is_file():
        text = pub.read_text(errors="replace").split()
    else:
        proc = _run(["-y", "-f", str(key)])
        text = proc.stdout.decode(errors="replace").split() if proc.returncode == 0 else []
    return " ".join(text[:2]) if len(text) >= 2 else None


@dataclass
class SignatureStatus:
    """What a bundle's signature says: unsigned, signed but unchecked, verified, or bad."""

    state: str  # unsigned | unchecked | verified | bad
    key: str | None = None  # "ED25519 SHA256:..."
    signer: str | None = None  # the principal in allowed_signers (verified only)
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.state in ("unsigned", "unchecked", "verified")

    def line(self) -> str:
        if self.state == "unsigned":
            return "unsigned"
        if self.state == "unchecked":
            return f"signed with {self.key}, signer not checked (give --allowed-signers FILE)"
        if self.state == "verified":
            return f"signed by {self.signer} ({self.key})"
        return f"BAD SIGNATURE: {self.reason}"


MAX_SIGNATURE = 64 << 10  # an SSH signature of the manifest is about 300 bytes


def signature_status(root: Path, allowed_signers: Path | None = None) -> SignatureStatus:
    """Check MANIFEST.sha256.sig against the manifest; with `allowed_signers`, name the signer.

    Without an allowed signers file the signature is only checked to match the manifest
    (`ssh-keygen -Y check-novalidate`): it proves the holder of that key signed it, not who
    that is. The report can call this to say who signed a bundle.
    """
    root = Path(root)
    sig = root / SIGNATURE
    if not os.path.lexists(sig):
        return SignatureStatus("unsigned")
    if allowed_signers is not None:
        _regular(allowed_signers, "--allowed-signers")
    size = os.lstat(sig)
    if stat.S_ISREG(size.st_mode) and size.st_size > MAX_SIGNATURE:  # broken, as one that
        return SignatureStatus(  # does not verify is: no SSH signature is that long
            "bad", reason=f"{SIGNATURE}: {size.st_size} bytes, longer than any SSH signature"
        )
    read_bytes(sig, limit=MAX_SIGNATURE)  # a regular file, not a link; ssh-keygen reads it
    manifest = read_bytes(root / MANIFEST)
    check = _run(["-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(sig)], manifest)
    if check.returncode != 0:
        return SignatureStatus("bad", reason=f"{SIGNATURE}: {_last_line(check)}")
    found = _KEY.search(check.stdout.decode(errors="replace") + check.stderr.decode("replace"))
    key = f"{found[1]} {found[2]}" if found else "an SSH key"
    if allowed_signers is None:
        return SignatureStatus("unchecked", key=key)
    who = _run(["-Y", "find-principals", "-s", str(sig), "-f", str(allowed_signers)])
    principals = who.stdout.decode(errors="replace").split() if who.returncode == 0 else []
    if not principals:
        return SignatureStatus(
            "bad", key=key, reason=f"signed with {key}, which {allowed_signers} does not list"
        )
    proc = _run(
        [
            "-Y",
            "verify",
            "-f",
            str(allowed_signers),
            "-I",
            principals[0],
            "-n",
            NAMESPACE,
            "-s",
            str(sig),
        ],
        manifest,
    )
    if proc.returncode != 0:
        return SignatureStatus("bad", key=key, reason=_last_line(proc))
    return SignatureStatus("verified", key=key, signer=principals[0])
