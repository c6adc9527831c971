"""Hostile specs and records: YAML bombs and tags, bad bytes, one broken spec among good ones, a corrupt
record that a run would otherwise rebuild over."""

from __future__ import annotations

import json

from repro.cli import app
from tests.conftest import SPEC_TEXT, write_spec

BOMB = """\
id: t1-demo
a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
"""


def _one_line_exit_2(out, *texts):
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    for text in texts:
        assert text in out.output, out.output


def test_an_alias_bomb_is_refused_at_once_and_named(sandbox, runner):
    write_spec(sandbox, BOMB)
    out = runner.invoke(app, ["list"])
    _one_line_exit_2(out, "t1-demo.yaml:2:", "anchors and aliases")


def test_tags_in_a_spec_are_refused(sandbox, runner):
    write_spec(sandbox, SPEC_TEXT.replace("title: A demo table", "title: !!python/name:os.system ''"))
    _one_line_exit_2(runner.invoke(app, ["list"]), "t1-demo.yaml:4:", "tag")


def test_a_spec_that_is_not_utf8_is_named(sandbox, runner):
    path = write_spec(sandbox, SPEC_TEXT)
    path.write_bytes(path.read_bytes().replace(b"A demo table", b"A demo \xff table"))
    _one_line_exit_2(runner.invoke(app, ["list"]), "t1-demo.yaml", "not UTF-8")


def test_one_broken_spec_does_not_block_the_others(sandbox, runner):
    write_spec(sandbox, SPEC_TEXT)
    write_spec(sandbox, BOMB.replace("t1-demo", "t2-broken"), ident="t2-broken")
    out = runner.invoke(app, ["list", "--format", "json"])
    assert out.exit_code == 2 and "t2-broken.yaml" in out.output
    assert runner.invoke(app, ["show", "t1-demo"], env={"COLUMNS": "200"}).exit_code == 0
    _one_line_exit_2(runner.invoke(app, ["show", "t2-broken"]), "t2-broken.yaml:2:")
    assert runner.invoke(app, ["check"]).exit_code == 1  # CI does not pass around a broken spec


def test_a_corrupt_record_is_never_rebuilt_over(toy_family, runner):
    record = toy_family / "results" / "toy" / "toy-table1" / "Sighted.smoke.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"spec": "toy-table1", "row": "Sighted", "scale": "smoke", "metrics": {"Acc": NaN')
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted"])
    _one_line_exit_2(out, "Sighted.smoke.json", "unreadable")
    assert record.read_text().endswith("NaN")
    assert runner.invoke(app, ["check"]).exit_code == 1


def test_a_spec_with_toy_rows_still_loads_after_a_broken_neighbour(toy_family, runner):
    write_spec(toy_family, BOMB.replace("t1-demo", "t9-bad"), ident="t9-bad")
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert json.loads((toy_family / "results" / "toy" / "toy-table1" / "Blind.smoke.json").read_text())["seeds"] == [0]
