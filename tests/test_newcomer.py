"""What a newcomer meets first: file modes that follow the umask, outputs that never replace a device or FIFO,
listings and checks readable at 80 columns, help text that keeps its brackets."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from repro.cli import app
from repro.errors import ReproError
from repro.utils import atomic_open, write_bytes_atomic, write_json_atomic
from tests.test_submit import home, stub  # noqa: F401 - fixtures


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_writes_follow_the_umask(tmp_path, umask_022):
    write_json_atomic(tmp_path / "a.json", {"x": 1})
    write_bytes_atomic(tmp_path / "b.bin", b"x")
    with atomic_open(tmp_path / "c.txt") as handle:
        handle.write("c")
    assert {_mode(tmp_path / n) for n in ("a.json", "b.bin", "c.txt")} == {0o644}
    os.umask(0o077)
    write_json_atomic(tmp_path / "a.json", {"x": 2})  # replacing keeps no older mode: the umask decides
    assert _mode(tmp_path / "a.json") == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.bin", "c.txt"]  # no temporary left


def test_records_checkpoints_exports_and_plots_are_0644_under_umask_022(toy_family, runner, tmp_path, umask_022):
    ran = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--seeds", "0,1"], env={"COLUMNS": "200"})
    assert ran.exit_code == 0, ran.output
    written = [p for p in (toy_family / "results").rglob("*") if p.is_file()]
    assert any(p.name.endswith(".seed0.json") for p in written) and any(p.name.endswith(".smoke.json") for p in written)
    checkpoints = [p for p in (toy_family / "data").rglob("*.pt")]
    assert checkpoints, "the run keeps checkpoints under the data folder"
    for suffix in ("md", "csv", "json", "tex", "html"):
        out = tmp_path / f"table.{suffix}"
        made = runner.invoke(app, ["table", "toy-table1", "--scale", "smoke", "-o", str(out)])
        assert made.exit_code == 0, made.output
        written.append(out)
    pytest.importorskip("matplotlib")
    figure = tmp_path / "toy.png"
    assert runner.invoke(app, ["plot", "toy-table1", "--scale", "smoke", "-o", str(figure)]).exit_code == 0
    modes = {str(p): oct(_mode(p)) for p in [*written, *checkpoints, figure]}
    assert set(modes.values()) == {"0o644"}, modes


def test_an_output_that_is_a_fifo_or_a_device_is_refused_never_replaced(tmp_path, runner):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ReproError, match="is a FIFO, not a regular file"):
        write_json_atomic(fifo, {})
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    with pytest.raises(ReproError, match="is a character device"), atomic_open(Path(os.devnull)) as handle:
        handle.write("never")
    assert stat.S_ISCHR(Path(os.devnull).stat().st_mode) and list(tmp_path.iterdir()) == [fifo]


def test_eval_per_item_refuses_a_device_before_scoring(tmp_path, runner):
    from repro.cli.evaluate import check_per_item_path

    with pytest.raises(ReproError, match=r"--per-item /dev/null is a character device"):
        check_per_item_path(Path("/dev/null"))
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    table = runner.invoke(app, ["table", "mcan-pa-table5-ablation", "-o", str(fifo)])
    assert table.exit_code == 2 and "is a FIFO" in table.output and stat.S_ISFIFO(fifo.lstat().st_mode)


def _cells(line: str) -> int:
    from rich.cells import cell_len

    return cell_len(line)


def test_list_at_80_columns_is_one_line_per_experiment_with_the_scales_it_runs_at(runner):
    from repro.specs import load_all

    out = runner.invoke(app, ["list"], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    ids = [s.id for s in load_all()]
    assert len(lines) == len(ids) + 3, out.output
    assert max(_cells(line) for line in lines) <= 80
    by_id = {line.split()[0]: line for line in lines[3:]}
    assert sorted(by_id) == sorted(ids)  # every id whole, on its own line
    assert "smoke synthetic* paper" in by_id["mcan-pa-table5-ablation"]  # committed synthetic results
    wide = runner.invoke(app, ["list"], env={"COLUMNS": "160"}).output
    assert "Ablation of the positional attention" in wide and "title" in wide.splitlines()[1]
    assert "table" in wide.splitlines()[1] and "Table V " in wide  # the table column where it fits


def test_list_json_keeps_scales_with_results_and_adds_the_runnable_scales(runner):
    import json

    entries = {e["id"]: e for e in json.loads(runner.invoke(app, ["list", "-f", "json"]).output)}
    table2 = entries["mcan-pa-table2-vqa1"]
    assert table2["runnable_scales"] == ["smoke", "paper"] and table2["scales"] == []
    assert entries["mcan-pa-table1-cocoqa"]["runnable_scales"] == ["smoke", "synthetic", "paper"]
    assert entries["mcan-pa-table5-ablation"]["scales"] == ["synthetic"]
    assert all(e["runnable_scales"] == [] for e in entries.values() if e["implemented"] == 0)


@pytest.mark.parametrize("ident", ["mcan-pa-table5-ablation", "ace-rpe-table1-pe"])
def test_show_at_80_columns_cuts_nothing_and_shows_scales_and_claims(runner, ident):
    from repro.specs import resolve

    spec = resolve(ident)
    out = runner.invoke(app, ["show", ident], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert f"file: {spec.path}" in lines  # whole, on one line, whatever its length
    assert all(_cells(line.rstrip()) <= 80 for line in lines if not line.startswith("file: ")), out.output
    for row in spec.rows:
        assert any(line.strip().startswith(row.name) for line in lines), row.name
    assert any(line.startswith("scales (") for line in lines) and "  smoke" in lines and "  paper" in lines
    assert sum(line.startswith("  • ") for line in lines) == len(spec.claims) or len(spec.claims) == 0
    if ident == "mcan-pa-table5-ablation":
        assert "52.30" in out.output and " 52.3 " not in out.output  # the digits the paper prints
        assert "  MCAN+PE         arch=mcan position_embedding=bert" in lines


def test_check_at_80_columns_prints_what_failed_and_a_summary(demo_spec, runner):
    from repro import results
    from repro.specs import resolve
    from tests.test_results_and_tables import _result

    results.write_result(_result("Ours*", Num=55.3, All=71.4), resolve("t1-demo"))  # All 0.35 off, ±0.25
    out = runner.invoke(app, ["check"], env={"COLUMNS": "80"})
    assert out.exit_code == 1
    lines = out.output.splitlines()
    assert max(_cells(line.rstrip()) for line in lines) <= 80, out.output
    assert [line.split() for line in lines if line.startswith("Ours*")] == [
        ["Ours*", "All", "71.05", "71.4", "+0.35", "±0.25", "REGRESSION"]
    ]  # the passing Num is not listed
    summary = " ".join(lines[-2:])  # the last thing printed, wrapped at 80 columns
    assert summary.startswith("1 regression(s), 0 unreadable result(s), 0 record problem(s); 1 of 2 values in 1 ")
    every = runner.invoke(app, ["check", "-v"], env={"COLUMNS": "80"}).output
    assert [line.split()[:2] for line in every.splitlines() if line.startswith("Ours*")] == [
        ["Ours*", "Num"],
        ["Ours*", "All"],
    ]


def test_submit_dry_run_at_80_columns_shows_the_whole_file_path(runner, sandbox, stub):  # noqa: F811
    from tests.test_submit import vqa_predictions, vqa_questions

    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "results" / "mcan-pa" / "table3" / "predictions" / ("MCAN+PA_ours" * 4 + ".json"))
    out = runner.invoke(app, ["submit", "vqa2-test-std", "-p", str(preds), "--dry-run"], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("file"))
    shown = "".join(
        line[len("file") :].strip()
        for line in lines[start : start + 4]
        if not line[:10].strip() or line.startswith("file")
    )
    assert str(preds.absolute()) in shown and "…" not in out.stdout
    assert max(_cells(line.rstrip()) for line in lines) <= 80


def _commands():
    import typer

    return typer.main.get_command(app).commands


def test_help_keeps_square_brackets_and_shows_real_metavars(runner):
    plot = runner.invoke(app, ["plot", "-h"], env={"COLUMNS": "80"}).output
    assert "pip install 'repro[plot]')" in plot
    run = runner.invoke(app, ["run", "-h"], env={"COLUMNS": "200"}).output
    assert "model.positional=[pwa];" in run and "Usage: repro run [OPTIONS] ID [KEY=VALUE]..." in run
    for name in _commands():
        text = runner.invoke(app, [name, "-h"], env={"COLUMNS": "200"}).output
        assert "<bool>" not in text and "<str>" not in text and "<list[str]>" not in text, name
    assert "--limit LIMIT" in plot and "[x>=1]" in plot


def _examples() -> list[tuple[str, list[str]]]:
    """The commands each `-h` shows as examples, split as a shell would."""
    import shlex

    from repro.cli.common import help_examples

    out = []
    for name, cmd in _commands().items():
        for found in help_examples(cmd.callback.__doc__):
            out.append((name, shlex.split(found)))
    assert len(out) >= 12
    return out


def test_every_example_in_the_help_parses_and_names_current_ids_and_rows():
    """Each example's arguments parse as its command's, and every id and row it names exist (an id as its
    canonical name, not an alias)."""
    from repro.specs import resolve

    commands = _commands()
    for owner, words in _examples():
        assert words[0] == "repro" and words[1] in commands, (owner, words)
        cmd = commands[words[1]]
        ctx = cmd.make_context(words[1], words[2:], resilient_parsing=False)
        params = ctx.params
        ident = params.get("ident") or (params.get("idents") or [None])[0]
        if ident is None or ident.isupper():
            continue  # a placeholder such as TARGET or NAME
        spec = resolve(ident)
        assert ident == spec.id, (owner, words)
        names = {r.name for r in spec.rows}
        for row in [params.get("row")] + (params.get("rows") or "").split(","):
            assert not row or row in names, (owner, row)


def test_the_attention_example_names_a_val_question_of_the_generated_data():
    """The generator numbers questions image by image, train images first: the val ids follow the train ones."""
    from repro.specs import resolve

    words = next(w for _, w in _examples() if w[1] == "attention")
    scale = words[words.index("--scale") + 1]
    generator = resolve(words[2]).scales[scale]["generator"]
    first_val = generator["train_images"] * generator["questions_per_image"]
    assert (
        first_val
        <= int(words[words.index("--question") + 1])
        < first_val + generator["val_images"] * generator["questions_per_image"]
    )


def test_no_sign_mark_on_one_seed_cells_but_on_several(toy_family, runner):
    from repro.specs import resolve

    names = tuple(r.name for r in resolve("toy-table1").rows)

    def cells():  # the table's row lines (the caption explains the marks whatever the cells hold)
        out = runner.invoke(app, ["table", "toy-table1", "--scale", "smoke", "-f", "text"], env={"COLUMNS": "200"})
        assert out.exit_code == 0 and "Δ = row − " in out.output, out.output
        return "\n".join(line for line in out.output.splitlines() if line.startswith(names))

    assert runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--seeds", "0"]).exit_code == 0
    one = cells()
    assert one and "✓" not in one and "✗" not in one
    assert runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--seeds", "0,1", "--force"]).exit_code == 0
    assert "✓" in cells() or "✗" in cells()


def test_markdown_tables_have_as_many_separator_cells_as_header_cells(runner):
    out = runner.invoke(app, ["table", "psac-table4-bilstm", "--scale", "synthetic", "-f", "md"])
    assert out.exit_code == 0, out.output
    blocks, block = [], []
    for line in out.output.splitlines() + [""]:
        if line.startswith("|"):
            block.append(line.replace("\\|", ""))
        elif block:
            blocks.append(block)
            block = []
    assert len(blocks) == 2 and "ratio" in blocks[1][0]  # the table, and the claims with a timing claim
    for lines in blocks:
        assert len({line.count("|") for line in lines}) == 1, lines[:2]


def test_exports_bold_a_reproduced_best_only_when_it_is_ahead_by_more_than_the_spreads(runner):
    from repro.report.export import _separated
    from repro.report.view import Cell

    close = [Cell(None, 74.23, 0.97), Cell(None, 74.22, 2.70), Cell(None, 70.0, 1.0)]
    assert _separated([True, False, False], close, "higher") == [False, False, False]
    apart = [Cell(None, 80.0, 0.5), Cell(None, 74.22, 2.70)]
    assert _separated([True, False], apart, "higher") == [True, False]
    assert _separated([True, False], [Cell(None, 80.0), Cell(None, 10.0)], "higher") == [False, False]  # one seed
    assert _separated([False, True], [Cell(None, 1.0, 0.1), Cell(None, 0.5, 0.1)], "lower") == [False, True]
    latex = runner.invoke(app, ["table", "mcan-pa-table5-ablation", "--scale", "synthetic", "-f", "latex"]).output
    assert "\\textbf{74.23" not in latex and "\\textbf{71.05}" in latex  # the paper's own best stays bold
