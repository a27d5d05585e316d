"""The CLI starts without the libraries a command does not use: `kit --version` must not pay for
scipy, plotting, PDF rendering, the engines' SDKs or torch (issue: a test loop in minutes).

Each check is a fresh interpreter, as the `kit` command starts; what it loaded is read from
sys.modules, not timed (the time is a benchmark's business, measured on a quiet machine)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

HEAVY = ("scipy", "numpy", "matplotlib", "weasyprint", "jinja2", "docker", "torch",
         "kubernetes", "pydantic", "rich")  # fmt: skip
"""What no command's start-up needs: each is imported where it is used."""


def loaded_after(code: str) -> set[str]:
    """The top-level packages among HEAVY that a fresh `python -c CODE` has imported."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)  # fmt: skip
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_importing_the_cli_loads_no_heavy_library() -> None:
    assert loaded_after("import kit.cli") == set()


def test_the_version_loads_no_heavy_library() -> None:
    code = (
        "import sys\nsys.argv = ['kit', '--version']\nfrom kit.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    assert loaded_after(code) == set()


@pytest.mark.parametrize("recipe", ["fsdp_llama", "allreduce", "llm_decode"])
def test_validating_a_recipe_loads_only_the_recipe_model(recipe: str) -> None:
    code = (
        f"import sys\nsys.argv = ['kit', 'recipes', 'validate', 'recipes/{recipe}.yaml']\n"
        "from kit.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
    )
    # pydantic is the recipe's model; nothing else a validation does not use
    assert loaded_after(code) <= {"pydantic"}


def test_the_version_answers_before_the_cli_is_built() -> None:
    """`kit --version` (the console script is kit.__main__:main) prints the same line as the
    CLI's option and imports neither the CLI nor typer nor rich: building the CLI was most of
    its start-up."""
    probe = (
        "import sys\nsys.argv = ['kit', '--version']\nfrom kit.__main__ import main\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert exit.code == 0\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'typer', 'rich', 'click'}),"
        " 'kit.cli' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)  # fmt: skip
    from kit import __version__

    assert out.stdout.splitlines() == [f"kit {__version__}", "[] False"]
    # the CLI's own option (after another option, the CLI answers) says the same
    cli = subprocess.run([sys.executable, "-m", "kit", "--version", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert cli.stdout.splitlines()[0] == f"kit {__version__}"


def test_the_version_on_a_full_disk_is_one_line_and_exit_2() -> None:
    """Answered before the CLI, the version still fails as the CLI fails: one line, exit 2."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "kit", "--version"], cwd=ROOT, stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)  # fmt: skip
    assert (proc.returncode, proc.stderr) == (2, "kit: error: No space left on device\n")
