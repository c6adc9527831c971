"""CI regression of the committed synthetic results: they agree with their spec, every row's training
fingerprint reproduces on this CPU, and the fingerprint catches real changes."""

from __future__ import annotations

import dataclasses

import pytest

from repro import fingerprint
from repro.cli import app
from repro.paths import REPO_DIR
from repro.report import check_spec
from repro.results import read_results
from repro.specs import load_all, resolve

EXPERIMENTS = REPO_DIR / "experiments"
RESULTS = REPO_DIR / "results"


def test_committed_results_pass_check(runner, monkeypatch):
    monkeypatch.setenv("REPRO_RESULTS", str(RESULTS))
    monkeypatch.setenv("REPRO_EXPERIMENTS", str(EXPERIMENTS))
    checks = [c for spec in load_all(EXPERIMENTS) for c in check_spec(spec, RESULTS)]
    assert checks, "no committed results to check"
    out = runner.invoke(app, ["check"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output


def test_committed_synthetic_table5_has_every_row_and_a_prefix_of_the_designs_seeds():
    spec = resolve("table5-ablation", EXPERIMENTS)
    stored = read_results(spec, scale="synthetic", root=RESULTS)
    assert {name for (name, _) in stored} == {r.name for r in spec.rows}
    design = list(spec.design.seeds["synthetic"])
    compared = {name for claim in spec.claims for name in (claim.row, claim.over)}
    for (name, _), result in stored.items():
        assert result.seeds == design[: len(result.seeds)], name  # seeds are run in the design's order
        # a claim row reached the design's first look; a row no claim compares has four seeds (the two-mode rule)
        assert len(result.seeds) >= (spec.design.looks["synthetic"].at[0] if name in compared else 4), name
        assert len(result.extra["per_seed"]) == len(result.seeds) and set(result.std) == set(result.metrics)


@pytest.fixture(scope="module")
def synthetic_data(tmp_path_factory):
    """One data folder for the module: the synthetic data is generated once for the three reruns."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REPRO_DATA_DIR", str(tmp_path_factory.mktemp("data")))
        yield


def _only(spec, row: str):
    """The spec with its synthetic fingerprint restricted to one row."""
    scales = {
        **spec.scales,
        "synthetic": {
            **spec.scales["synthetic"],
            "fingerprint": {**spec.scales["synthetic"]["fingerprint"], "rows": [row]},
        },
    }
    return dataclasses.replace(spec, scales=scales)


@pytest.mark.slow
def test_every_table5_row_reproduces_its_stored_fingerprint(synthetic_data):
    """The CI check that holds on any CPU: each row's first 40 training losses, trained from scratch in a fresh
    data folder, equal the committed ones within the spec's tolerance (see repro/fingerprint.py)."""
    spec = resolve("table5-ablation", EXPERIMENTS)
    checks = fingerprint.check(spec, "synthetic", root=RESULTS)
    assert {c.row for c in checks} == {r.name for r in spec.runnable_rows}
    assert all(c.ok for c in checks), [(c.row, c.worst) for c in checks if not c.ok]


@pytest.mark.slow
def test_the_fingerprint_catches_pma_switched_off(synthetic_data, monkeypatch):
    from repro.families.mcan_pa import build

    real = build.build_model

    def without_pma(config, *args, **kwargs):
        return real(
            config.model_copy(update={"positional": tuple(p for p in config.positional if p != "pma")}), *args, **kwargs
        )

    monkeypatch.setattr(build, "build_model", without_pma)  # what the family calls, at call time
    spec = _only(resolve("table5-ablation", EXPERIMENTS), "MCAN+PA (ours)")
    [check] = fingerprint.check(spec, "synthetic", root=RESULTS)
    assert not check.ok and check.worst > 10 * check.tolerance


@pytest.mark.slow
def test_the_fingerprint_catches_a_wrong_learning_rate_schedule(synthetic_data, monkeypatch):
    from repro.train import trainer

    real = trainer.learning_rate
    monkeypatch.setattr(trainer, "learning_rate", lambda *args, **kwargs: 1.5 * real(*args, **kwargs))
    spec = _only(resolve("table5-ablation", EXPERIMENTS), "MCAN")
    [check] = fingerprint.check(spec, "synthetic", root=RESULTS)
    assert not check.ok and check.worst > 10 * check.tolerance


# --- sa-m4c: Tables 1 and 2 at the synthetic scale ------------------------------------------------

SA_M4C_SYNTHETIC = {  # spec -> the rows run at the synthetic scale (Table 1: its SA-M4C vs M4C pairs, greedy and beam)
    "sa-m4c-table2-ablations": None,
    "sa-m4c-table1-textvqa": {"8 M4C†", "11 SA-M4C (ours)", "10 M4C††", "13 SA-M4C (ours)"},
}


def test_committed_sa_m4c_synthetic_tables_have_their_rows_and_the_specs_seeds():
    for ident, rows in SA_M4C_SYNTHETIC.items():
        spec = resolve(ident, EXPERIMENTS)
        stored = read_results(spec, scale="synthetic", root=RESULTS)
        assert {name for (name, _) in stored} == (rows or {r.name for r in spec.runnable_rows})
        for result in stored.values():
            assert result.seeds == spec.scales["synthetic"]["seeds"]
            assert len(result.extra["per_seed"]) == len(result.seeds)
            assert {"spatial", "control"} <= set(result.extra["per_question_kind"][0])


@pytest.mark.slow
def test_sa_m4c_reproduces_its_stored_fingerprint_and_it_catches_a_random_graph(synthetic_data):
    """SA-M4C's row (M4C's is checked by `repro check --rerun` alike); then SA-M4C fed M4C-Random's graph in
    place of the spatial one: the same steps, other losses."""
    spec = _only(resolve("sa-m4c-table2-ablations", EXPERIMENTS), "7 SA-M4C (ours)")
    predictions = RESULTS / spec.paper / spec.id / "predictions" / "7_SA-M4C_ours.synthetic.seed0.test.json"
    stored = predictions.read_bytes()
    [check] = fingerprint.check(spec, "synthetic", root=RESULTS)
    assert check.ok, check.worst
    assert predictions.read_bytes() == stored  # the short rerun leaves the committed test predictions alone
    row = spec.row("7 SA-M4C (ours)")
    random_graph = dataclasses.replace(row, config=row.config.model_copy(update={"graph": "random"}))
    spec = dataclasses.replace(spec, rows=tuple(random_graph if r.name == row.name else r for r in spec.rows))
    [check] = fingerprint.check(spec, "synthetic", root=RESULTS)
    assert not check.ok and check.worst > 3 * check.tolerance


# --- ace-rpe: Table 1 at the synthetic scale --------------------------------------------------------


@pytest.mark.slow
def test_ace_rpe_reproduces_its_pretraining_fingerprints_and_they_catch_ace_rpe_off_the_values(synthetic_data):
    """The pre-training losses of Table 1's None and ACE-RPE+Lace rows (`stage: pretrain`); then ACE-RPE+Lace
    with E_ace added to queries and keys only (Eq. 12 off): the same steps, other losses."""
    spec = resolve("ace-rpe-table1-pe", EXPERIMENTS)
    checks = fingerprint.check(spec, "synthetic", root=RESULTS)
    assert {c.row for c in checks} == {"None", "ACE-RPE+Lace"} and all(c.ok for c in checks), checks
    spec = _only(spec, "ACE-RPE+Lace")
    row = spec.row("ACE-RPE+Lace")
    no_values = dataclasses.replace(row, config=row.config.model_copy(update={"apply_to": ("query", "key")}))
    spec = dataclasses.replace(spec, rows=tuple(no_values if r.name == row.name else r for r in spec.rows))
    [check] = fingerprint.check(spec, "synthetic", root=RESULTS)
    assert not check.ok and check.worst > 3 * check.tolerance, check.worst


# --- psac Table 6 and dsganet Table VIII at the synthetic scale -----------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "ident, row, other",
    [("psac-table6-coatt", "with QA-Co", "without QA-Co"), ("dsganet-table8-gqa-ablation", "3", "1")],
)
def test_fingerprints_reproduce_and_catch_the_module_a_claim_is_about(synthetic_data, ident, row, other):
    """Both fingerprinted rows reproduce; then the claim's row built with the compared row's model (its
    module switched off: PSAC's QA co-attention, DSGANet's DAA and SGA) fails its own fingerprint."""
    spec = resolve(ident, EXPERIMENTS)
    checks = fingerprint.check(spec, "synthetic", root=RESULTS)
    assert {c.row for c in checks} == {row, other} and all(c.ok for c in checks), checks
    spec = _only(spec, row)
    switched = dataclasses.replace(spec.row(row), config=spec.row(other).config)
    spec = dataclasses.replace(spec, rows=tuple(switched if r.name == row else r for r in spec.rows))
    [check] = fingerprint.check(spec, "synthetic", root=RESULTS)
    assert not check.ok and check.worst > 3 * check.tolerance, check.worst
