"""The family table: a new family is one folder plus one line, and the generic layers run it unchanged."""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from pathlib import Path

from repro.cli import app
from repro.paths import REPO_DIR
from tests.conftest import TOY_SPEC, write_spec


def test_a_toy_family_runs_through_run_and_table_without_touching_the_toolkit(toy_family, runner):
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    table = json.loads(runner.invoke(app, ["table", "toy-table1", "--scale", "smoke", "--format", "json"]).output)
    reproduced = {row["name"]: row["reproduced"]["Acc"] for row in table["rows"]}
    assert reproduced["Sighted"] > 90.0 and 20.0 < reproduced["Blind"] < 80.0
    model = json.loads(runner.invoke(app, ["model", "toy-table1", "--row", "Sighted", "--format", "json"]).output)
    assert model["models"][0]["trainable_params"] == 2 * 16 + 16 + 16 * 2 + 2


def test_a_typo_in_a_toy_row_is_refused_with_its_line(toy_family, runner):
    write_spec(
        toy_family, TOY_SPEC.replace("use_position: false", "use_postion: false"), paper="toy", ident="toy-table1"
    )
    out = runner.invoke(app, ["list"])
    assert out.exit_code == 2
    assert "toy-table1.yaml:12:" in out.output and "use_postion" in out.output and "use_position" in out.output


# The generic layers: they run any family and name none. The CLI is `repro/cli.py` or the `repro/cli/` package.
GENERIC = [
    "repro/cli.py",
    "repro/cli",
    "repro/run.py",
    "repro/specs.py",
    "repro/results.py",
    "repro/paths.py",
    "repro/variants.py",
    "repro/monitor.py",
    "repro/launch",
    "repro/train",
    "repro/report",
]
PAPER_NAMES = re.compile(r"mcan|vqa|m4c|psac|albef|dsganet|ace[-_]?rpe", re.IGNORECASE)
# Names that are a thing's origin, not a reference to a family: the learning-rate schedules of MCAN and M4C
# (as torchtune names `llama3_1` position embeddings). Each is allowed in the one file that defines it.
ORIGIN_NAMES = {
    "repro/train/schedule.py": re.compile(r'"mcan"|"m4c"|\bmcan_lr\b|\bm4c_lr\b'),
}


def code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of a module's code: comments and docstrings left out."""
    source = path.read_text(encoding="utf-8")
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                docstrings |= set(range(body[0].lineno, body[0].end_lineno + 1))
    comments = {
        tok.start: tok.end[1]
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    out = []
    for number, text in enumerate(source.splitlines(), 1):
        if number in docstrings:
            continue
        cut = next((col for (line, col), _ in comments.items() if line == number), None)
        out.append((number, text if cut is None else text[:cut]))
    return out


def paper_names(paths: list[str]) -> list[str]:
    """`file:line: code` for each line of code in `paths` (files or folders) that names a paper, its model
    or its dataset, beyond the allowed names of a thing's origin."""
    found = []
    for name in paths:
        for path in sorted([REPO_DIR / name] if name.endswith(".py") else (REPO_DIR / name).rglob("*.py")):
            rel = str(path.relative_to(REPO_DIR))
            allowed = ORIGIN_NAMES.get(rel)
            for number, text in code_lines(path):
                if PAPER_NAMES.search(allowed.sub("", text) if allowed else text):
                    found.append(f"{rel}:{number}: {text.strip()}")
    return found


def test_generic_layers_name_no_paper_model_or_dataset():
    present = [p for p in GENERIC if (REPO_DIR / p).exists()]
    assert any(p in present for p in ("repro/cli.py", "repro/cli")), "neither repro/cli.py nor repro/cli/ exists"
    code = paper_names(present)
    assert code == [], "\n".join(code)


def test_the_layering_rule_catches_a_paper_named_in_code_but_not_in_docs_or_origins(tmp_path, monkeypatch):
    import tests.families.test_family_table as table

    old = tmp_path / "repro" / "specs.py"
    old.parent.mkdir()
    old.write_text(
        '"""Aliases: `table5-ablation` for `mcan-pa-table5-ablation`."""\n'
        "def aliases(spec):\n"
        "    # mcan-pa ids had no prefix\n"
        '    if spec.paper == "mcan-pa":\n'
        "        return [spec.id]\n"
    )
    schedule = tmp_path / "repro" / "train" / "schedule.py"
    schedule.parent.mkdir()
    schedule.write_text('SCHEDULES = {"mcan": mcan_lr, "m4c": m4c_lr}\nFOR = {"psac": 1}\n')
    monkeypatch.setattr(table, "REPO_DIR", tmp_path)
    assert table.paper_names(["repro/specs.py", "repro/train"]) == [
        'repro/specs.py:4: if spec.paper == "mcan-pa":',
        'repro/train/schedule.py:2: FOR = {"psac": 1}',
    ]


def test_a_run_prepares_its_data_once_and_every_unit_reads_it(toy_family, runner, monkeypatch):
    """The launcher calls a family's prepare_data once per run (not once per unit, not again in run_row)."""
    import dataclasses

    from tests.toy_family import family

    calls = []

    def counted(spec, scale, settings):
        calls.append(scale)
        return family.prepare_data(spec, scale, settings)

    monkeypatch.setattr(family, "HOOKS", dataclasses.replace(family.HOOKS, prepare_data=counted))
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--seeds", "0,1"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert calls == ["smoke"]


def test_a_new_family_gets_seeds_trained_together_from_the_shared_part(toy_family, runner):
    """The toy family writes no training loop: `train_units` trains its seeds alone or together."""
    out = runner.invoke(
        app, ["run", "toy-table1", "--scale", "smoke", "--seeds", "0,1", "--ensemble"], env={"COLUMNS": "200"}
    )
    assert out.exit_code == 0, out.output
    table = json.loads(runner.invoke(app, ["table", "toy-table1", "--scale", "smoke", "--format", "json"]).output)
    sighted = next(row for row in table["rows"] if row["name"] == "Sighted")
    assert sighted["reproduced"]["Acc"] > 90.0 and sighted["n"] == 2


def test_implemented_answers_as_the_hooks_do_without_importing_them():
    """`repro list` counts the rows that run with `families.implemented` (a family.py is found, not imported): for
    every row of every spec it answers as `for_row(row) is not None`, the hooks being asked."""
    from repro import families
    from repro.specs import load_all

    rows = [row for spec in load_all() for row in spec.runnable_rows]
    assert rows and all(
        families.implemented(row) == (row.config is None or families.for_row(row) is not None) for row in rows
    )


def test_not_at_scale_answers_as_the_hooks_do_without_importing_them():
    """A table finds the rows of the paper scale only with `families.not_at_scale` (the family's config.py): for
    every row of every spec, at every scale, it answers as the family's hooks do."""
    from repro import families
    from repro.specs import SCALES, load_all

    rows = [row for spec in load_all() for row in spec.runnable_rows if row.config is not None]
    for row in rows:
        hooks = families.for_row(row)
        for scale in SCALES:
            expected = hooks.not_at_scale(row.config, scale) if hooks is not None else None
            assert families.not_at_scale(row, scale) == expected, (row.name, scale)
    assert any(families.not_at_scale(row, "synthetic") for row in rows)  # VL-BERT from its released pre-training
