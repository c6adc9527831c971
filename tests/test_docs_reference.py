"""Every file path and every `repro` option the README and the docs/ pages name exists: a path in backticks or a
link is looked up in the checkout (a repro/ module path such as `launch/units.py` under repro/), and each option of a
`repro <command> ...` line (in a code block or in backticks) must be one of that command's options in the Typer app.
Paths of what runs write (`results/...` records, `~/.cache/...`, `<data dir>/...`) are not files of the checkout and
are left out: a span with a placeholder (`<`, `*`, `…`, `$`) or under results/."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# paths the pages name that are not in the checkout on purpose: (path, why)
NOT_IN_CHECKOUT = (("repro/experiments", "where an installed package carries experiments/ (the wheel's copy)"),)
FENCE = re.compile(r"^```.*?^```[^\n]*$", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(r"\.?[\w][\w.\-]*(/[\w.\-]+)*/?")
PLACEHOLDER = re.compile(r"[<>*…${}~\[\]]|\.\.\.")
OPTION = re.compile(r"^(--?[A-Za-z][\w-]*)")


@dataclass(frozen=True)
class Problem:
    page: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.what}"


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _prose(text: str) -> str:
    """The page with its fenced blocks blanked (their lines kept, so offsets still give line numbers)."""
    return FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _block_commands(text: str) -> list[tuple[int, str]]:
    """(line, command) of each `repro …` line of the fenced blocks: continuations joined, comments cut, `a / b` split"""
    out, inside, pending = [], False, None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside:
            continue
        if pending is not None:
            start, so_far = pending
            line, number = so_far + " " + line.strip(), start
        if line.rstrip().endswith("\\"):
            pending = (number, line.rstrip()[:-1])
            continue
        pending = None
        line = re.split(r"\s{2,}#|^\s*#", line)[0].strip()
        for part in line.split(" / "):
            if part.startswith("repro "):
                out.append((number, part))
    return out


def _checkout_path(span: str) -> Path | None:
    """The checkout file a span names (None: not a path of the checkout, so not checked)."""
    if " " in span or PLACEHOLDER.search(span) or not PATH.fullmatch(span) or "/" not in span:
        return None
    span = span.removeprefix("./")
    first = span.split("/")[0]
    for base in (ROOT, ROOT / "repro"):  # a path of the checkout, or of a module under repro/ (`launch/units.py`)
        if first and not first.startswith(".") and (base / first).exists():
            return base / span
    return None


def _names_a_function(target: Path) -> bool:
    """`launch/units.run_units`: a module's function, named in its module (`launch/units.py`)."""
    stem, _, name = target.name.rpartition(".")
    module = target.with_name(stem + ".py")
    return bool(
        stem and name.isidentifier() and module.is_file() and re.search(rf"^def {name}\b", module.read_text(), re.M)
    )


def path_problems(page: str, text: str) -> list[Problem]:
    """Backticked paths and link targets that name no file or folder of the checkout."""
    prose, found = _prose(text), []
    skipped = {path for path, _ in NOT_IN_CHECKOUT}
    for match in SPAN.finditer(prose):
        span = match.group(1).strip().rstrip(",.;:")
        target = _checkout_path(span)
        if target is None or span in skipped or target.exists() or span.startswith("results/"):
            continue  # results/: what runs write (records, submissions), committed or not
        if _names_a_function(target):
            continue
        found.append(Problem(page, _line_of(prose, match.start()), f"`{span}` is not in the checkout"))
    base = (ROOT / page).parent
    for match in LINK.finditer(prose):
        link = match.group(1).split("#")[0]
        if not link or re.match(r"[a-z]+:", link):  # an anchor in the page, http(s):, mailto:
            continue
        if not (base / link).exists():
            found.append(Problem(page, _line_of(prose, match.start()), f"link to {link}, which does not exist"))
    return found


def _app_commands():
    """The Typer app as its command tree (typer carries its own click: commands are read by their attributes)."""
    from repro.cli import app

    return typer.main.get_command(app)


def _is_group(command) -> bool:
    return hasattr(command, "commands")


def _options(command) -> dict:
    options = {}
    for param in command.params:
        if param.param_type_name == "option":
            for name in (*param.opts, *param.secondary_opts):
                options[name] = param
    return options


def _takes_value(option) -> bool:
    return not option.is_flag and not option.count


def command_problems(page: str, line: int, command_line: str, root) -> list[Problem]:
    """Each option of `repro [root options] <command> [<subcommand>] ...` must be one of that command's."""
    words = [w.strip("[]") for w in command_line.split()[1:]]
    command = root
    found = []
    i = 0
    while i < len(words) and _is_group(command):
        word = words[i]
        if word.startswith("-"):
            name = word.split("=")[0]
            option = _options(command).get(name)
            if option is None and name not in ("-h", "--help"):
                found.append(Problem(page, line, f"`{command_line}`: repro has no root option {name}"))
            i += 2 if option is not None and _takes_value(option) and "=" not in word else 1
            continue
        if word not in command.commands:
            if word.islower():  # `repro COMMAND -h`, `repro …`: a placeholder, not a command
                found.append(Problem(page, line, f"`{command_line}`: repro has no command {word!r}"))
            return found
        command = command.commands[word]
        i += 1
    if _is_group(command):
        return found
    known = _options(command)
    for word in words[i:]:
        match = OPTION.match(word)
        if match and match.group(1) not in known and match.group(1) not in ("-h", "--help"):
            found.append(Problem(page, line, f"`{command_line}`: {command.name} has no option {match.group(1)}"))
    return found


def option_problems(page: str, text: str, root) -> list[Problem]:
    prose = _prose(text)
    commands = _block_commands(text)
    commands += [
        (_line_of(prose, m.start()), m.group(1)) for m in SPAN.finditer(prose) if m.group(1).startswith("repro ")
    ]
    return [problem for line, command in commands for problem in command_problems(page, line, command, root)]


def _all_problems() -> list[Problem]:
    root = _app_commands()
    found = []
    for page in PAGES:
        name, text = str(page.relative_to(ROOT)), page.read_text(encoding="utf-8")
        found += path_problems(name, text) + option_problems(name, text, root)
    return found


def test_the_pages_exist():
    names = {p.name for p in PAGES}
    assert {"README.md", "index.md", "usage.md", "cluster.md", "architecture.md", "benchmarks.md"} <= names
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 220


def test_no_page_names_a_missing_file_or_option():
    problems = _all_problems()
    assert not problems, "\n".join(map(str, problems))
    # not vacuous: the pages' paths and commands are found
    texts = [page.read_text(encoding="utf-8") for page in PAGES]
    paths = [s for text in texts for s in SPAN.findall(_prose(text)) if _checkout_path(s.rstrip(",.;:"))]
    commands = [c for text in texts for _, c in _block_commands(text)]
    assert len(paths) >= 50 and len(commands) >= 40, (len(paths), len(commands))


def test_the_checks_see_what_they_check():
    """The checks find a planted missing path, a broken link and a wrong option, and pass the real ones."""
    root = _app_commands()
    page = "docs/planted.md"
    text = (
        "See `repro/families/nope/README.md`, `launch/nowhere.py`, `launch/units.no_such` and [a page](missing.md).\n"
        "Real: `repro/families/psac/README.md`, `launch/units.py`, `launch/units.run_units`, [usage](usage.md), "
        "`results/<paper>/<id>/`.\n"
        "```\n"
        "repro run mcan-pa-table5-ablation --scale synthetic --no-such-option   # a comment --not-checked\n"
        "repro --no-such-root run ID\n"
        "repro weights download NAME --bogus\n"
        "repro runn ID\n"
        "repro -v run ID --rows MCAN --seeds 0,1 --resume / repro -q table ID -o t.tex\n"
        "```\n"
        "Inline: `repro table ID --scale smoke --nope`.\n"
    )
    paths = [str(p) for p in path_problems(page, text)]
    assert paths == [
        "docs/planted.md:1: `repro/families/nope/README.md` is not in the checkout",
        "docs/planted.md:1: `launch/nowhere.py` is not in the checkout",
        "docs/planted.md:1: `launch/units.no_such` is not in the checkout",
        "docs/planted.md:1: link to missing.md, which does not exist",
    ]
    options = [str(p) for p in option_problems(page, text, root)]
    assert options == [
        "docs/planted.md:4: `repro run mcan-pa-table5-ablation --scale synthetic --no-such-option`: "
        "run has no option --no-such-option",
        "docs/planted.md:5: `repro --no-such-root run ID`: repro has no root option --no-such-root",
        "docs/planted.md:6: `repro weights download NAME --bogus`: download has no option --bogus",
        "docs/planted.md:7: `repro runn ID`: repro has no command 'runn'",
        "docs/planted.md:10: `repro table ID --scale smoke --nope`: table has no option --nope",
    ]


@pytest.mark.parametrize("path, why", NOT_IN_CHECKOUT)
def test_what_is_left_out_is_still_named(path, why):
    """An exception the pages no longer name goes (so the list does not hide a new mistake)."""
    assert any(f"`{path}`" in page.read_text(encoding="utf-8") for page in PAGES), why
