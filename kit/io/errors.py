"""Errors that reach the user as one line.

Library code raises these with the evidence in the message (file, line, field, allowed values);
the CLI turns them into `kit: error: ...` and an exit code, never a traceback.
"""


class KitError(Exception):
    """A problem the user can act on. `exit_code` 2 is bad input, 1 is a failed run."""

    exit_code = 1

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class InputError(KitError):
    """Bad input: a recipe, a path or an option the user gave."""

    exit_code = 2
