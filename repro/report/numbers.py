"""How a number is printed in a table (`repro table`, `repro show`): a missing value as –, large integers with
thousands separators, as many decimals as the paper printed."""

from __future__ import annotations

import math


def fmt(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if float(value).is_integer() and abs(value) >= 1000:
        return f"{int(value):,}"
    return f"{value:.{digits}f}"


def decimals(value: float) -> int:
    """The decimals `value` was written with (52.3 -> 1); 2 for a number in exponent form."""
    text = repr(float(value))
    return 2 if "e" in text else len(text.split(".")[1].rstrip("0"))


def column_decimals(values: list[float]) -> int:
    """Decimals to print a reported column with: the most any of its values has (52.30 beside 53.26), at most 4."""
    return min(max((decimals(v) for v in values), default=2), 4)
