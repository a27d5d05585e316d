"""software.json: what the image the runs ran in holds, and what each run loaded.

software.json is the image's inventory (kit.shared.imagescan read inside it, cached by image id:
kit.runtime.images.software): Python distributions with a sha256 over their RECORD, Debian
packages with a sha256 over their md5sums and their shared libraries by real path, the CUDA,
cuDNN, NCCL and driver libraries by path and sha256, the version variables. A run's `loaded`
(kit.worker.loaded) is what rank 0 had mapped and imported. kit.env.content compares both.
"""

from __future__ import annotations

from pydantic import Field

from kit.model.base import Closed, Open

SHA256 = r"^[0-9a-f]{64}$"


class Distribution(Closed):
    name: str
    version: str
    sha256: str | None = Field(default=None, pattern=SHA256)
    top: list[str] = Field(default_factory=list)  # the import names it provides


class DebianPackage(Closed):
    name: str
    version: str
    arch: str = ""
    sha256: str | None = Field(default=None, pattern=SHA256)
    libs: list[str] = Field(default_factory=list)  # its shared libraries, by real path


class Library(Closed):
    path: str
    size: int = Field(ge=0)
    sha256: str = Field(pattern=SHA256)


class Software(Open):
    """software.json. Open: a later scan may add lists an older reader keeps as written."""

    image_id: str | None = None
    image_tag: str | None = None
    scan_version: int | None = None
    python: str | None = None
    python_executable: str | None = None
    os: str | None = None
    distributions: list[Distribution] = Field(default_factory=list)
    debian: list[DebianPackage] = Field(default_factory=list)
    dpkg_status: bool | None = None  # the image had /var/lib/dpkg/status; None: a scan before v2
    libraries: list[Library] = Field(default_factory=list)
    variables: dict[str, str] = Field(default_factory=dict)
    truncated: list[str] = Field(default_factory=list)
    seconds: float | None = None  # how long the scan took when it was made (not when cached)

    def summary(self) -> str:
        """ "312 Python distributions, 410 Debian packages, 35 CUDA/NCCL/driver libraries"; "no
        Debian package database" for an image without one (its OS may still be Ubuntu's)."""
        if self.debian:
            debian = f"{len(self.debian)} Debian packages"
        elif self.dpkg_status is False:
            debian = "no Debian package database (no /var/lib/dpkg/status)"
        else:  # a scan before v2 did not say which: "0" read as an OS without packages
            debian = "no Debian packages on record (/var/lib/dpkg/status absent or empty)"
        return (
            f"{len(self.distributions)} Python distributions, {debian}, "
            f"{len(self.libraries)} CUDA/cuDNN/NCCL/driver libraries, "
            f"{len(self.variables)} version variables"
        )


class Loaded(Closed):
    """A run's record of what rank 0 loaded, after its timed windows (kit.worker.loaded)."""

    libraries: dict[str, str] = Field(default_factory=dict)  # real path -> sha256
    modules: dict[str, str] = Field(default_factory=dict)  # top-level name -> digest
    seconds: float | None = Field(default=None, ge=0)
    read_bytes: int | None = Field(default=None, ge=0)


class ChangeRecord(Closed):
    """One difference inside two environments (kit.env.content.Change), as results.json keeps it."""

    kind: str
    name: str
    old: str | None = None
    new: str | None = None
    loaded: bool


class EnvironmentCheck(Closed):
    """A rerun's verdict on its environment against the bundle's (kit.env.check), in results.json:
    the sentence its report's page 1 shows, and every difference sorted by loaded or not."""

    matches: bool
    sentence: str
    same_image: bool = False
    loaded: list[ChangeRecord] = Field(default_factory=list)
    unloaded: list[ChangeRecord] = Field(default_factory=list)
