"""The one exception type a user sees: a clear line, exit code 2, no traceback; and how a message quotes what
the user gave (`echoed`: at most ECHO_LIMIT characters and a count of the rest)."""

from __future__ import annotations

from typing import Any

ECHO_LIMIT = 200  # characters of a user's input quoted in a message
LINE_LIMIT = 1000  # characters of any line the command line prints about a failure


class ReproError(Exception):
    """Bad input or a state the user can fix. The message says what is wrong and where."""

    exit_code = 2


def cut(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text` as it is, or its first `limit` characters and how many more there were."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def echoed(value: Any, limit: int = ECHO_LIMIT) -> str:
    """`value` quoted for a message (its repr), cut after `limit` characters with a count of the rest; a huge
    integer by its number of digits (its repr alone could take seconds)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 600:
        return f"an integer of about {int(value.bit_length() * 0.30103):,} digits"
    if isinstance(value, str) and len(value) > limit:
        return repr(value[:limit]) + f"… ({len(value) - limit:,} more characters)"
    try:
        return cut(repr(value), limit)
    except (ValueError, RecursionError):  # an int too long for str(), a structure nested too deep
        return f"a {type(value).__name__} too large to show"


def reason(exc: BaseException) -> str:
    """What went wrong, in the exception's own words on one line (cut), never its class name."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, UnicodeError):
        return "not UTF-8 text"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    text = " ".join(str(exc).split())
    return cut(text) if text else "unreadable"
