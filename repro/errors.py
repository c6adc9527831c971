"""The one exception type a user sees: a clear line, exit code 2, no traceback."""


class ReproError(Exception):
    """Bad input or a state the user can fix. The message says what is wrong and where."""

    exit_code = 2
