"""Grids of text: columns (`Col`) in groups beside a label column, packed into blocks that fit the terminal's width,
drawn as plain lines or rich tables. `repro table` (repro.report.layout), `repro list`, `repro weights ls` and the
run plan draw with these."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field, replace

from rich.cells import cell_len
from rich.markup import escape
from rich.table import Table
from rich.text import Text

GAP = 2  # spaces between plain-text columns


@dataclass
class Col:
    header: str
    cells: list[str]
    styles: list[str | None] = field(default_factory=list)
    group: str = ""
    justify: str = "right"
    lead: bool = False  # the first column of its group: rich writes the group's name over it

    @property
    def width(self) -> int:
        return max([cell_len(self.header)] + [cell_len(c) for c in self.cells])


@dataclass
class Grid:
    label: Col  # the row-name column, repeated in every block
    groups: list[list[Col]]
    row_styles: list[str | None] = field(default_factory=list)


def rich_width(cols: list[Col]) -> int:
    """Width of a rich table with the default box and padding: │ cell │ cell │."""
    return 1 + sum(rich_col_width(c) + 3 for c in cols)


def rich_col_width(col: Col) -> int:
    """A group's name sits over its first column in rich, wrapped at spaces to that column's width."""
    if not col.lead:
        return col.width
    return max([col.width] + [cell_len(word) for word in col.group.split()])


def plain_width(cols: list[Col]) -> int:
    return sum(c.width for c in cols) + GAP * (len(cols) - 1)


def blocks(grid: Grid, width: int, measure) -> list[list[list[Col]]]:
    """Groups packed into blocks that fit `width` (with the row-name column); a group that does not fit
    on its own is split into its columns. A column that does not fit even alone gets a block of its own."""
    units: list[list[Col]] = []
    for group in grid.groups:
        if measure([grid.label] + group) <= width:
            units.append(group)
        else:
            units += [[replace(c, lead=True)] for c in group]
    out: list[list[list[Col]]] = []
    for unit in units:
        if out and measure([grid.label] + [c for g in out[-1] for c in g] + unit) <= width:
            out[-1].append(unit)
        else:
            out.append([unit])
    return out or [[]]


# --- plain text -----------------------------------------------------------------------------------


def pad(text: str, width: int, justify: str) -> str:
    space = " " * max(width - cell_len(text), 0)
    return text + space if justify == "left" else space + text


def plain_block(grid: Grid, block: list[list[Col]]) -> list[str]:
    cols = [grid.label] + [c for g in block for c in g]
    widths = [c.width for c in cols]
    # a group's name is written over its columns, followed by a rule; widen its last column if needed
    k = 1
    for group in block:
        span = sum(widths[k : k + len(group)]) + GAP * (len(group) - 1)
        name = group[0].group
        if name and cell_len(name) > span:
            widths[k + len(group) - 1] += cell_len(name) - span
        k += len(group)
    group_line, k = [" " * widths[0]], 1
    for group in block:
        span = sum(widths[k : k + len(group)]) + GAP * (len(group) - 1)
        name = group[0].group
        group_line.append(
            (name + " " + "─" * (span - cell_len(name) - 1)) if cell_len(name) < span else pad(name, span, "left")
        )
        k += len(group)
    lines = []
    if any(g[0].group for g in block):
        lines.append((" " * GAP).join(group_line).rstrip())
    pairs = list(zip(cols, widths, strict=True))
    lines.append((" " * GAP).join(pad(c.header, w, c.justify) for c, w in pairs).rstrip())
    lines.append((" " * GAP).join("─" * w for w in widths))
    for i in range(len(grid.label.cells)):
        lines.append((" " * GAP).join(pad(c.cells[i], w, c.justify) for c, w in pairs).rstrip())
    return lines


def wrap(text: str, width: int, indent: str = "") -> list[str]:
    """Wrap prose at spaces (never inside a word or number)."""
    return textwrap.wrap(
        text, width=max(width, 20), subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    ) or [""]


def rich_table(grid: Grid, block: list[list[Col]], **kwargs) -> Table:
    table = Table(**kwargs)
    table.add_column(
        escape(grid.label.header),
        style="bold",
        justify=grid.label.justify,
        no_wrap=True,
        min_width=grid.label.width,
        overflow="fold",
    )
    depth = max((len(group_lines(g[0])) for g in block), default=0)
    for group in block:
        for col in group:
            above = group_lines(col) if col.lead else []
            header = "\n".join([""] * (depth - len(above)) + above + [col.header])
            table.add_column(
                escape(header), justify=col.justify, no_wrap=True, min_width=rich_col_width(col), overflow="fold"
            )
    for r in range(len(grid.label.cells)):
        row: list[Text] = [Text(grid.label.cells[r])]
        for group in block:
            for col in group:
                style = col.styles[r] if r < len(col.styles) else None
                row.append(Text(col.cells[r], style=style or ""))
        table.add_row(*row, style=grid.row_styles[r] if r < len(grid.row_styles) else None)
    return table


def group_lines(col: Col) -> list[str]:
    if not col.group or not col.lead:
        return []
    return textwrap.wrap(col.group, width=rich_col_width(col), break_long_words=False, break_on_hyphens=False)


def cut(text: str, width: int) -> str:
    """`text` in at most `width` cells, ending in … when cut."""
    if cell_len(text) <= width:
        return text
    out = Text(text)
    out.truncate(max(width, 1), overflow="ellipsis")
    return out.plain


def listing_grid(label: Col, cols: list[Col], width: int, rich: bool, flexible: Col | None = None, least: int = 16):
    """A grid of one line per entry: `label` (an id) and `cols` are never cut; `flexible` (a title) goes
    last, cut with an ellipsis to the width left (in rich's boxes or plain text), or left out when fewer
    than `least` cells are left."""
    measure = rich_width if rich else plain_width
    groups = [[c] for c in cols]
    if flexible is not None:
        left = width - measure([label, *cols, Col("", [""] * len(flexible.cells))])
        if left >= least:
            cells = [cut(c, left) for c in flexible.cells]
            groups.append([replace(flexible, header=cut(flexible.header, left), cells=cells, justify="left")])
    return Grid(label, groups)


def plain_listing(grid: Grid, width: int) -> list[str]:
    """A listing grid as plain lines, split into blocks of columns only when it cannot fit otherwise."""
    lines: list[str] = []
    for i, block in enumerate(blocks(grid, width, plain_width)):
        lines += ([""] if i else []) + plain_block(grid, block)
    return lines


def rich_listing(grid: Grid, width: int, **kwargs) -> list[Table]:
    """A listing grid as rich tables (the first one with kwargs such as title), split like `plain_listing`."""
    parts = blocks(grid, width, rich_width)
    return [rich_table(grid, block, **(kwargs if i == 0 else {})) for i, block in enumerate(parts)]
