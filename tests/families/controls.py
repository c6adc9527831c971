"""What every family's positive control is (`<paper>-control-<name>`): one claim, the mechanism's row against its
ablation, the two rows differing in the given model keys alone, no paper numbers and no control of its own, judged
under a design fixed before its runs (alpha 0.05, Welch, at least four seeds a row at the synthetic scale, none at
the paper scale)."""

from __future__ import annotations

from repro.specs import Spec


def keys_that_differ(a: dict, b: dict) -> set[str]:
    return {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


def assert_a_control(spec: Spec) -> set[str]:
    """Check what every control is; the model keys its two rows differ in (the mechanism, for the caller to name)."""
    (claim,) = spec.claims
    row, over = spec.row(claim.row), spec.row(claim.over)
    assert claim.control is None and not any(r.reported for r in spec.rows)  # no paper numbers, no control of its own
    design = spec.design
    assert design is not None and design.alpha == 0.05 and design.test == "welch"
    assert len(design.seeds["synthetic"]) >= 4 and "paper" not in design.seeds
    assert spec.design_hash("synthetic")
    return keys_that_differ(row.model, over.model)
