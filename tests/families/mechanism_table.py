"""The family READMEs' table of items that need the mechanism (`**Items that need the mechanism` and the table
after it: column | N | mechanism items | share | what each row can see), read back so a test can compare it with
the shares the family's generator gives."""

from __future__ import annotations

from pathlib import Path

from repro.specs import load_all

MARKER = "**Items that need the mechanism"


def share_text(n: int, needing: int) -> str:
    """A share as the tables print it: `54.2 %`."""
    return f"{100 * needing / n:.1f} %"


def readme_rows(readme: Path) -> dict[str, tuple[int, int]]:
    """{first cell: (N, mechanism items)} of the table after MARKER; each row's share must be theirs."""
    lines = Path(readme).read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(MARKER)), None)
    assert start is not None, f"{readme}: no paragraph starting {MARKER!r}"
    table = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            table.append(line)
        elif table:
            break
    assert table[0].split("|")[2:5] == [" N ", " mechanism items ", " share "], f"{readme}: header {table[0]!r}"
    rows = {}
    for line in table[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        label, n, needing = cells[0], int(cells[1].replace(",", "")), int(cells[2].replace(",", ""))
        assert cells[3] == share_text(n, needing), f"{readme}: {label}: share {cells[3]!r}"
        assert label not in rows, f"{readme}: {label} twice"
        rows[label] = (n, needing)
    return rows


def specs_with_claims(paper: str) -> set[str]:
    """The ids of a paper's specs that make claims and run at the synthetic scale."""
    return {s.id for s in load_all() if s.paper == paper and s.claims and "synthetic" in s.scales}
