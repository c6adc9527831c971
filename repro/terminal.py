"""Text from outside (a server's error, a job's stderr) made safe to print on a terminal.

A server or a failed job can put escape sequences in its text: clear the screen, set the window title,
move the cursor, or hide what follows. `printable` removes every ANSI escape sequence (CSI, OSC, DCS and
the two-character ones) and every other control character (C0 and C1, DEL), and turns line breaks and
tabs into spaces, so the text is shown as one plain line.
"""

from __future__ import annotations

import re

_ESCAPES = re.compile(
    r"""
    \x1b\[[0-?]*[ -/]*[@-~]?            # CSI: ESC [ params intermediates final
    | \x9b[0-?]*[ -/]*[@-~]?            # 8-bit CSI
    | (?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]) .*? (?:\x07|\x1b\\|\x9c|$)  # OSC, DCS, SOS, PM, APC .. ST/BEL
    | \x1b[ -/]*[0-~]?                  # other ESC sequences (ESC c: reset, ESC 7, ESC ( B ...)
    """,
    re.VERBOSE | re.DOTALL,
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SPACES = re.compile(r"[\t\n\r]+")


def printable(text: object, one_line: bool = True) -> str:
    """`text` without escape sequences or control characters (line breaks kept only if not `one_line`)."""
    out = _ESCAPES.sub("", str(text))
    if one_line:
        out = _SPACES.sub(" ", out)
    else:
        out = out.replace("\r\n", "\n").replace("\r", "\n")
        out = re.sub(r"[\t]", " ", out)
    keep = "" if one_line else "\n"
    return _CONTROLS.sub(lambda m: m.group(0) if m.group(0) in keep else "", out)
