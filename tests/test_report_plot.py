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
