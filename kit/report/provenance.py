"""When and by which kit a report was rendered, and whether that was after the fact.

A sealed bundle's report can be rendered again (`kit report BUNDLE`) by a later kit, which
reads the same results differently than the kit that measured them did. The report must say
so itself: every colophon names the rendering day, kit version and commit (as results.json
records `kit_commit`), and a report rendered after the bundle was sealed, or by another commit
than the one that measured it, carries one sentence on page 1 and in the colophon saying so.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from kit import __version__
from kit.bundle import MANIFEST, kit_commit, read_manifest
from kit.io.errors import InputError
from kit.model import Results
from kit.shared import files

SHORT = 12  # hex digits of a commit in the page-1 sentence (the colophon prints all of them)


@dataclass(frozen=True)
class Rendering:
    """What the report says about its own rendering."""

    colophon: str  # "Rendered on DAY by kit V (commit C), Python P"
    after_the_fact: str | None  # the re-render sentence, None for a bundle's first report


def short(commit: str | None, missing: str = "commit not recorded") -> str:
    """ "commit 0167f20e4b1a" ("-dirty" kept): what a reader compares at a glance."""
    if not commit:
        return missing
    sha, dirty, _ = commit.partition("-dirty")
    return f"commit {sha[:SHORT]}" + ("-dirty" if dirty else "")


def day(iso: str | None) -> str:
    """The UTC day of an ISO time ("2026-11-21"), or "an unrecorded day"."""
    if not iso:
        return "an unrecorded day"
    try:
        return datetime.fromisoformat(iso).astimezone(timezone.utc).date().isoformat()
    except ValueError:
        return str(iso)[:10]


def sealed_with_report(root: Path) -> bool:
    """Whether the bundle was sealed with a report before this rendering (a re-render)."""
    if not os.path.lexists(Path(root) / MANIFEST):
        return False
    try:
        return files.REPORT_HTML in read_manifest(root)
    except InputError:
        return False


def rendering(
    results: Results,
    root: Path,
    commit: str | None = None,
    now: datetime | None = None,
) -> Rendering:
    """The colophon line and, after the fact, the sentence page 1 prints.

    After the fact: the bundle was already sealed (its manifest exists) or the rendering kit's
    commit is not the one that measured it. `commit` and `now` default to this kit and the clock.
    """
    commit = kit_commit() if commit is None else commit
    today = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).date().isoformat()
    colophon = (
        f"Rendered on {today} by kit {__version__} ("
        + (f"commit {commit}" if commit else "commit not known: not a git checkout")
        + f"), Python {platform.python_version()}"
    )
    sealed = os.path.lexists(Path(root) / MANIFEST)
    if not sealed and (commit or None) == (results.kit_commit or None):
        return Rendering(colophon, None)
    verb = "re-rendered" if sealed_with_report(root) else "rendered after the run"
    recorded = results.finished_at or results.created_at
    note = (
        f"Report {verb} on {today} by kit {__version__} ({short(commit, 'commit not known')}) from the results "
        f"recorded on {day(recorded)} by kit {results.kit_version} ({short(results.kit_commit)}); "
        "no measurement was changed."
    )
    return Rendering(colophon, note)
