"""Print what every committed example bundle's report and comparison say, as plain text.

Run it on two checkouts and diff the outputs: a change that should not move a figure must leave
the numbers identical (the bundles themselves are never touched; nothing is written).

    cd CHECKOUT && PYTHONPATH=$PWD .venv/bin/python scripts/example_figures.py > /tmp/after.txt
"""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

from kit.bundle import Bundle
from kit.report import compare, render

ROOT = Path.cwd()
EXAMPLES = ROOT / "reports" / "examples"


def text(page: str) -> str:
    """The page's words, one block per line: no styles, scripts, figures or tags."""
    page = re.sub(r"(?s)<(style|script|svg)\b.*?</\1>", "", page)
    page = re.sub(r"<img[^>]*>", "", page)
    page = re.sub(r"(?i)<br\s*/?>|</(p|tr|li|h\d|div|table|section)>", "\n", page)
    page = re.sub(r"<[^>]+>", " ", page)
    lines = (re.sub(r"\s+", " ", html.unescape(line)).strip() for line in page.splitlines())
    # what differs between two checkouts of the same bundles: where they are and when it ran
    lines = (re.sub(r"^Created [0-9: -]+ UTC\. ", "", ln.replace(f"{ROOT}/", "")) for ln in lines)
    return "\n".join(line for line in lines if line)


def main() -> int:
    for path in sorted(EXAMPLES.iterdir()):
        if (path / "results.json").exists():
            print(f"=== report {path.name}")
            print(text(render.render_html(Bundle(path))))
        elif (path / "compare.json").exists():
            recorded = json.loads((path / "compare.json").read_text())
            bundles = [ROOT / m["bundle"] for m in recorded["machines"]]
            labels = {i: m["user_label"] for i, m in enumerate(recorded["machines"])
                      if m["user_label"]}  # fmt: skip
            machines = compare.load_machines(bundles, labels)
            base = compare.pick_baseline(recorded["baseline"], machines)
            data = compare.comparison(machines, base, recorded.get("price_per_gpu_hour"))
            print(f"=== compare {path.name}")
            print(text(compare.render_html(data, [])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
