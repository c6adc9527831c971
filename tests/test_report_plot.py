"""`repro plot`: reported vs reproduced, the claims, training curves, in one figure (matplotlib)."""

from __future__ import annotations

import pytest

from repro.cli import app

pytest.importorskip("matplotlib")


def test_a_plot_of_a_run_table_holds_its_columns_claims_and_curves(toy_family, runner, tmp_path):
    ran = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--seeds", "0,1"])
    assert ran.exit_code == 0, ran.output
    out = tmp_path / "toy.png"
    made = runner.invoke(app, ["plot", "toy-table1", "--scale", "smoke", "-o", str(out)])
    assert made.exit_code == 0, made.output
    assert "1 column(s), 1 claim(s), training curves of 4 unit(s)" in made.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000

    pdf = tmp_path / "toy.pdf"
    assert runner.invoke(app, ["plot", "toy-table1", "--scale", "smoke", "-o", str(pdf)]).exit_code == 0
    assert pdf.read_bytes()[:5] == b"%PDF-"


def test_a_plot_needs_a_figure_suffix_and_says_when_matplotlib_is_missing(toy_family, runner, tmp_path, monkeypatch):
    bad = runner.invoke(app, ["plot", "toy-table1", "-o", str(tmp_path / "x.jpg2")])
    assert bad.exit_code == 2 and ".png, .pdf, .svg" in bad.output and not (tmp_path / "x.jpg2").exists()

    import builtins

    real = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    missing = runner.invoke(app, ["plot", "toy-table1", "-o", str(tmp_path / "x.png")])
    assert missing.exit_code == 2 and "pip install 'repro[plot]'" in missing.output


def _axes_data_boxes(fig):
    """Each axes' data area in display pixels (the patch, not its tick labels), after laying the figure out."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    return [ax.get_window_extent(renderer) for ax in fig.axes if ax.get_label() != "<colorbar>"], renderer


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.fixture(scope="module")
def ace_figure():
    """ace-rpe Table 1 at the synthetic scale (13 columns, committed results): its view and figure."""
    from repro.report import build_view
    from repro.report.plot import figure
    from repro.specs import resolve

    view = build_view(resolve("ace-rpe-table1-pe"), "synthetic")
    return view, figure(view)


def test_a_wide_table_wraps_into_a_grid_of_panels_with_one_set_of_row_labels(ace_figure):
    from repro.report.plot import PANELS_PER_ROW, panel_grid

    assert panel_grid(13) == (3, 5) and panel_grid(4) == (1, 4) and panel_grid(7) == (2, 4) and panel_grid(0) == (1, 1)
    view, (fig, held) = ace_figure
    assert len(view.columns) == 13
    width, height = fig.get_size_inches()
    assert width <= 22 and height <= 24 and width / height < 2.5  # was 54.6 x 11.1 inches: a strip
    panels = [ax for ax in fig.axes if ax.get_title() in {f"{c}{u}" for c in view.columns for u in ("", " [%]")}]
    panels += [ax for ax in fig.axes if ax.get_title().startswith("FLOPs")]
    assert len(panels) == 13 and held["columns"] == 13
    rows = {}
    for ax in panels:
        spec = ax.get_subplotspec()
        rows.setdefault(spec.rowspan.start, []).append(spec.colspan.start)
    assert sorted(len(v) for v in rows.values()) == [3, 5, 5] and max(map(len, rows.values())) <= PANELS_PER_ROW
    labelled = [ax for ax in panels if ax.yaxis.get_tick_params()["labelleft"]]
    assert len(labelled) == 3  # the first panel of each row carries the row names
    assert [t.get_text() for t in labelled[0].get_yticklabels()][0] == view.rows[0].name


def test_at_a_generated_scale_the_paper_values_have_their_own_axis_and_the_figure_says_so():
    from repro.report import build_view
    from repro.report.plot import figure
    from repro.specs import resolve

    spec = resolve("mcan-pa-table5-ablation")
    fig, _ = figure(build_view(spec, "synthetic"))
    paper_axes = [ax for ax in fig.axes if ax.get_xlabel() == "paper [%]"]
    assert len(paper_axes) == 4  # one twin (top) axis per column, holding the paper's diamonds
    y_n = spec.rows[0].reported["Y/N"]
    assert any(y_n in line.get_xdata() for ax in paper_axes for line in ax.lines)
    assert all(
        y_n not in line.get_xdata() for ax in fig.axes if ax.get_xlabel() == "scale synthetic [%]" for line in ax.lines
    )
    (legend,) = fig.legends
    assert "another task" in legend.get_title().get_text()
    assert any("reported in the paper (top axis)" == t.get_text() for t in legend.get_texts())

    same, _ = figure(build_view(spec, "paper"))  # at paper scale the two are one task: one axis
    assert not [ax for ax in same.axes if ax.get_xlabel().startswith("paper")]
    assert "another task" not in same.legends[0].get_title().get_text()


def test_legends_lie_outside_every_axes(ace_figure):
    from repro.report import build_view
    from repro.report.plot import figure
    from repro.specs import resolve

    curves = {
        "MCAN": {0: {"": [(s, 10.0 / (s + 1)) for s in range(50)]}},
        "MCAN+PA (ours)": {0: {"": [(s, 9.0 / (s + 1)) for s in range(50)]}},
    }
    with_curves = figure(build_view(resolve("mcan-pa-table5-ablation"), "synthetic"), curves)[0]
    for fig, count in ((with_curves, 2), (ace_figure[1][0], 1)):
        boxes, renderer = _axes_data_boxes(fig)
        legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
        assert len(legends) == count  # the panels' legend, and the curves' legend beside their axes
        for legend in legends:
            where = legend.get_window_extent(renderer)
            assert not any(_overlaps(where, box) for box in boxes), legend


def test_curves_are_smoothed_without_bias_at_the_start():
    from repro.report.plot import smoothed

    assert smoothed([4.0, 4.0, 4.0]) == pytest.approx([4.0, 4.0, 4.0])  # debiased: no pull towards zero
    assert smoothed([0.0, 10.0], weight=0.5) == pytest.approx([0.0, 10.0 * 0.5 / 0.75])


def test_a_unit_trained_in_stages_gives_a_curve_per_stage_named_by_it(tmp_path):
    import json

    from repro.report import build_view
    from repro.report.plot import figure, training_logs
    from repro.specs import resolve

    view = build_view(resolve("ace-rpe-table1-pe"), "synthetic")
    for stage, start in (("pretrain", 9.0), ("flickr30k", 4.0)):
        log = tmp_path / "ace-rpe-table1-pe" / "synthetic" / "ACE-RPE" / "seed0" / stage / "train.jsonl"
        log.parent.mkdir(parents=True)
        log.write_text("".join(json.dumps({"step": s, "loss": start / s}) + "\n" for s in range(1, 30)) + "not json\n")
    curves = training_logs(tmp_path, view)
    assert set(curves) == {"ACE-RPE"} and set(curves["ACE-RPE"][0]) == {"pretrain", "flickr30k"}
    assert curves["ACE-RPE"][0]["pretrain"][0] == (1, 9.0) and len(curves["ACE-RPE"][0]["flickr30k"]) == 29
    fig, held = figure(view, curves)
    assert held["curves"] == 1
    labels = {t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()}
    assert labels == {"ACE-RPE · pretrain", "ACE-RPE · flickr30k"}
