"""The command line checked before a command runs: no empty value, no option given twice.

click takes the last of a repeated option and an empty string as a value; `--repeats 2
--repeats 3` or `--out ''` then does something the user did not quite say. Here, against the
command's own parameters (so a value that starts with `--`, like `--sbatch-arg=--account=x`, is
never taken for an option): an option that is not repeatable given twice, an empty value, and
an empty argument are each one line, exit 2 (kit.cli.errors).
"""

from __future__ import annotations

from typing import Any

from kit.io.errors import InputError


def _subcommand(command: Any, args: list[str]) -> tuple[Any, list[str]]:
    """The command `args` name (through groups) and the arguments left for it."""
    while hasattr(command, "commands"):
        i = next((n for n, a in enumerate(args) if not a.startswith("-")), None)
        if i is None or args[i] not in command.commands:
            return command, []  # click says what is wrong (missing or unknown command)
        command, args = command.commands[args[i]], args[i + 1 :]
    return command, args


def check_argv(root: Any, argv: list[str]) -> None:
    """Refuse a repeated non-repeatable option, an empty option value or an empty argument."""
    args = argv[: argv.index("--")] if "--" in argv else argv
    command, rest = _subcommand(root, args)
    options = {}
    for param in getattr(command, "params", []):
        for name in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())):
            if name.startswith("-"):
                options[name] = param
    seen: dict[str, str] = {}
    i = 0
    while i < len(rest):
        token = rest[i]
        name, eq, value = token.partition("=") if token.startswith("--") else (token, "", "")
        param = options.get(name)
        if param is None:
            if token == "":
                raise InputError("an empty argument: name a file, a folder or a value")
            i += 1
            continue  # a positional argument, or an unknown option click will name
        takes_value = not getattr(param, "is_flag", False) and not getattr(param, "count", False)
        if takes_value and not eq:
            value = rest[i + 1] if i + 1 < len(rest) else None
            i += 1
        if takes_value and value is not None and not value.strip():
            raise InputError(f"{name}: an empty value; give a value or leave the option out")
        key = param.name
        if key in seen and not getattr(param, "multiple", False):
            raise InputError(f"{name}: given twice ({seen[key]} and {name}); give it once")
        seen[key] = name
        i += 1
