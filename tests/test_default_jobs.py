"""`repro run` without `-j` and without a scale `jobs:` runs, at the synthetic scale, as many units at a time as its
family's measured choice (`Hooks.synthetic_jobs`: two processes of one thread, or one with both threads, whichever
`bench_synthetic --parallel-only` found faster); at the other scales one."""

import pytest

from repro import families
from repro.launch.local import default_jobs
from repro.run import make_plan
from repro.specs import resolve


@pytest.mark.parametrize("family", ["mcan-pa", "dsganet", "sa-m4c", "psac", "ace-rpe"])
def test_every_family_states_its_choice(family):
    assert families.implementation(families.by_paper(family)).synthetic_jobs in (1, 2)


def test_a_spec_without_jobs_takes_its_familys_choice_at_the_synthetic_scale_only():
    spec = resolve("psac-table4-bilstm")  # its scales name no `jobs`
    assert "jobs" not in spec.scales["synthetic"]
    psac = families.implementation(families.by_paper("psac")).synthetic_jobs
    assert default_jobs(make_plan(spec, "synthetic")) == psac
    assert default_jobs(make_plan(spec, "smoke")) == 1
