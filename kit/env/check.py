"""Two environments, one verdict: the versions the runs read (kit.env.diff) and what differs inside
the images, loaded by the runs or not (kit.env.content), said in one sentence.

Why one place: a rerun prints it, stores it in its results.json and its report's page 1 shows it;
a comparison's page 1, its environment section and compare.json show it. Each reads `check`,
so no two of them can disagree about whether two environments match.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kit.env.content import Change, ContentDiff, Side, content_diff
from kit.env.diff import PINNED_KEYS, Difference, environment_diff
from kit.model import Hardware
from kit.model.software import ChangeRecord, EnvironmentCheck

SHOWN = 4
"""Differences named in the sentence; the full list is in the section and the JSON."""


@dataclass
class Check:
    """The versions that differ (`versions`: can change a number; `notes`: cannot, such as image
    ids) and what differs inside the environments (`content`)."""

    versions: list[Difference]
    notes: list[Difference]
    content: ContentDiff

    @property
    def matches(self) -> bool:
        """No version differs and, where the contents were compared, nothing the runs loaded."""
        return not self.versions and (self.content.matches or not self.content.compared)

    def sentence(self) -> str:
        """Page 1's sentence, the rerun's last line: "The environment matches: nothing the runs
        loaded differs (3 differences present but not loaded)."."""
        c = self.content
        image = f"Same image ({_short_id(c.image_id)})" if c.same_image else ""
        unloaded = len(c.unloaded)
        beside = f" ({_count(unloaded)} present but not loaded)" if unloaded else ""
        if self.matches:
            if not c.compared:
                return (
                    "The environment matches in every version known on both sides (what the "
                    "images hold was not listed on both sides)."
                )
            if c.same_image:
                return f"{image}: the environment matches{beside}."
            layers = any(d.field == "base_image_content" for d in self.notes) and not c.changes
            outside = (
                "; the base images' layers differ only in files outside every package, library "
                "and variable listed"
                if layers
                else ""
            )
            return f"The environment matches: nothing the runs loaded differs{beside}{outside}."
        made = [d for d in self.versions if d.field in PINNED_KEYS]
        read = [d for d in self.versions if d.field not in PINNED_KEYS]
        named = [diff_words(d.field, d.new, d.old) for d in build_last(read)]
        named += [_made_words(d) for d in made]
        named += [_change_words(ch) for ch in c.loaded]
        shown = "; ".join(named[:SHOWN]) + (
            f"; and {len(named) - SHOWN} more" if len(named) > SHOWN else ""
        )
        what = (
            "in what the runs loaded"
            if c.loaded
            else "in the versions the runs read"
            if not made
            else "in how the image was made"
            if not read
            else "in the versions the runs read and how the image was made"
        )
        lead = (
            f"{image}, but the environment differs" if c.same_image else "The environment differs"
        )
        return f"{lead} {what}: {shown}{beside}."

    def lines(self, old_label: str = "bundle", new_label: str = "here") -> list[tuple[str, str]]:
        """Every difference as (level, line): "differs" (a version, or loaded by the runs),
        "unloaded" (present but not loaded), "note" (cannot change a number)."""
        out = [("note", d.line(old_label, new_label)) for d in self.notes]
        out += [("differs", d.line(old_label, new_label)) for d in self.versions]
        out += [
            ("differs", f"{ch.words(old_label, new_label)} (loaded by the runs)")
            for ch in self.content.loaded
        ]
        out += [
            ("unloaded", f"{ch.words(old_label, new_label)} (not loaded)")
            for ch in self.content.unloaded
        ]
        return out

    def record(self) -> EnvironmentCheck:
        """What results.json keeps (kit.model.software.EnvironmentCheck)."""
        return EnvironmentCheck(
            matches=self.matches,
            sentence=self.sentence(),
            same_image=self.content.same_image,
            loaded=[ChangeRecord.model_validate(c.to_dict()) for c in self.content.loaded],
            unloaded=[ChangeRecord.model_validate(c.to_dict()) for c in self.content.unloaded],
        )

    def to_dict(self) -> dict[str, object]:
        """compare.json's record: the verdict, the sentence and every difference."""
        return {
            "matches": self.matches,
            "sentence": self.sentence(),
            "versions": [d.to_dict() for d in self.versions],
            "notes": [d.to_dict() for d in self.notes],
            **self.content.to_dict(),
        }


def _release(version: object) -> str:
    """A version without its local build tag: "0.26.0+cu130" -> "0.26.0"."""
    return str(version).partition("+")[0]


def build_last(diffs: list[Any]) -> list[Any]:
    """Differences in release first, those only in a build tag (+cu130) last: a box that leads
    with "0.26.0+cu130 vs 0.26.0" hides what really differs behind what hardly does."""
    return sorted(diffs, key=lambda d: _release(d.new) == _release(d.old))


def diff_words(field: str, new: object, old: object) -> str:
    """ "torch 2.14.1 vs 2.11.0" (the new side first), or "torchvision 0.26.0 on both, build
    +cu130 vs none"."""
    if new is not None and old is not None and _release(new) == _release(old):
        tag_new = str(new).partition("+")[2] or "none"
        tag_old = str(old).partition("+")[2] or "none"
        return f"{field} {_release(new)} on both, build {tag_new} vs {tag_old}"
    return f"{field} {new} vs {old}"


MADE_WORDS = {
    "content_hash": "image content hash {new} vs {old} (its Dockerfile, lock, build arguments and "
    "the kit's own files)",
    "base_image_digest": "base image digest {new} vs {old}",
    "base_image_content": "base image layers {new} vs {old}",
    "dockerfile_sha256": "Dockerfile {new} vs {old}",
    "lock_sha256": "lock file {new} vs {old}",
}
"""How a difference in the making of the image (each of kit.env.diff.PINNED_KEYS) reads: not a
version the runs read, and named as what it covers (a content hash alone says nothing to a reader who has not read the kit)."""


def _made_words(d: Difference) -> str:
    """ "image content hash caad12756183 vs b077638c900d (its Dockerfile, ...)": 12 hex digits,
    as the image tag shows them."""

    def short(value: object) -> str:
        text = str(value)
        return text.removeprefix("sha256:")[:12]

    return MADE_WORDS[d.field].format(new=short(d.new), old=short(d.old))


def _short_id(image_id: str | None) -> str:
    return (image_id or "?")[:19]


def _count(n: int) -> str:
    return f"{n} difference{'s' if n != 1 else ''}"


def _change_words(ch: Change) -> str:
    """A change in the sentence, the new side first as a version's ("python torch 2.12.0 vs
    2.11.0"); added or removed as against the old side (the bundle, the baseline)."""
    if ch.old is None:
        return f"{ch.kind} {ch.name} {ch.new} added"
    if ch.new is None:
        return f"{ch.kind} {ch.name} {ch.old} removed"
    return f"{ch.kind} {ch.name} {ch.new} vs {ch.old}"


def check(
    old: Side, new: Side, old_hardware: Hardware | None = None, new_hardware: Hardware | None = None
) -> Check:
    """The verdict on `new` against `old` (the bundle, or the comparison's baseline)."""
    content = content_diff(old, new)
    diffs = environment_diff(
        old.environment,
        new.environment,
        old_hardware,
        new_hardware,
        informational=True,
        by_content=content.inventories or content.same_image,
    )
    return Check([d for d in diffs if d.matters], [d for d in diffs if not d.matters], content)
