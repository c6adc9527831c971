"""`repro run --launcher slurm` and `repro run --status`: the plan's units submitted as Slurm jobs (with
`--dry-run`, the resources each would ask for), followed with `--wait`, and their states shown."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer

from repro.cli.common import console, escape, quoted
from repro.errors import ReproError

if TYPE_CHECKING:
    from repro.cli.request import RunRequest
    from repro.run import Plan


def slurm_run(plan: Plan, request: RunRequest) -> None:
    """`repro run --launcher slurm`: submit the plan's units as a job array; with --wait, follow them."""
    from repro.launch import slurm

    words = f" --scale {plan.scale}"
    if request.dry_run:
        from dataclasses import replace

        from repro.launch.units import groups

        first = {}  # each row's first job: its units and what they ask for
        for group in groups(plan, list(plan.units)):
            first.setdefault(group[0].row.name, group)
        plan_rows = {s.row.name for s in plan.steps}
        for step in plan.steps:
            if step.hooks is not None:
                group = first[step.row.name]
                res = slurm.group_resources(group, request.slurm)
                what = f"one job for its {len(group)} seeds trained together" if len(group) > 1 else "one job per seed"
                parts = slurm.unit_parts(plan.spec, group) if len(group) == 1 else {}
                if parts:  # psac's tasks at paper scale: a job each, then one that scores the row from them
                    what = "per seed, " + ", ".join(f"{p}: {r.describe()}" for p, r in parts.items())
                    what += ", then one job that scores the row from them"
                    res = replace(res, hours=1.0)
                after = [r for r in step.hooks.after(plan.spec, step.row) if r in plan_rows]
                if after:
                    what += f", after {', '.join(after)}'s job of its seed (afterok)"
                console.print(
                    f"slurm: {escape(step.row.name)}: {what}, {res.describe()}", highlight=False, soft_wrap=True
                )
        return
    submitted = slurm.submit(
        plan, request.slurm, resume=request.resume, force=request.force, rebaseline=request.rebaseline
    )
    if not submitted:
        console.print("nothing to submit: every seed has a stored result", highlight=False)
    from repro.launch.unit import label

    for unit in submitted:
        part = f", {unit.part}" if unit.part else ""
        console.print(
            f"submitted {escape(label(unit.row, unit.seeds) + part)}: job {unit.job_id} ({unit.resources.describe()}); "
            f"log {escape(unit.stdout)}",
            highlight=False,
            soft_wrap=True,
        )
    if not request.wait:
        if submitted:
            console.print(
                f"follow them with `repro run {escape(quoted(plan.spec.id))}{escape(words)} --status`; each job "
                f"writes its record as it finishes, `repro table {escape(quoted(plan.spec.id))} --scale {plan.scale}` "
                f"shows them",
                highlight=False,
                soft_wrap=True,
            )
        return
    slurm_follow(plan, sorted({seed for u in submitted for seed in u.seeds}))


def slurm_follow(plan: Plan, seeds: list[int] | None = None, earlier: bool = False) -> None:
    """`repro run ID --wait`: follow the plan's submitted units (now or by an earlier run) until none is pending
    or running, then print their states and the table; UnitsFailed (exit 1) when one did not finish. `earlier`:
    the units of an earlier run, refused when there are none."""
    from repro.launch import slurm

    if earlier and not slurm.unit_states(plan, seeds):
        raise ReproError(
            f"no unit of {plan.spec.id} at scale {plan.scale} was submitted to Slurm from {plan.workdir}: nothing to "
            f"wait for (submit with `--launcher slurm`)"
        )
    states = slurm.wait(
        plan,
        seeds,
        on_change=lambda u: console.print(f"{escape(u.row)} seed {u.seed}: job {u.job_id} {u.state}", highlight=False),
    )
    slurm_status(plan, states)
    from repro.report import build_view, render_rich

    console.print(render_rich(build_view(plan.spec, plan.scale, results_root=plan.results_root)))
    failed = [u for u in states if u.state != "done"]
    if failed:
        names = ", ".join(f"{u.row} seed {u.seed}" for u in failed)
        raise slurm.UnitsFailed(f"{len(failed)} unit(s) did not finish: {names}; `--status` shows their logs")


def slurm_status(plan: Plan, states=None, seeds: list[int] | None = None, fmt: str = "rich") -> None:
    """`repro run ID --status`: each submitted unit pending, running, done or failed, with its logs."""
    from rich.table import Table

    from repro.launch import slurm

    states = slurm.unit_states(plan, seeds) if states is None else states
    if fmt == "json":
        out = {
            "spec": plan.spec.id,
            "scale": plan.scale,
            "variant": None if plan.variant.empty else plan.variant.name,
            "units": [u.to_json() for u in states],
        }
        typer.echo(json.dumps(out, indent=2))
        return
    if not states:
        console.print(f"no unit of {plan.spec.id} at scale {plan.scale} was submitted to Slurm from {plan.workdir}")
        return
    colours = {"done": "green", "failed": "red", "running": "cyan", "pending": "yellow"}
    table = Table(title=f"{plan.spec.id} at scale {plan.scale}: Slurm jobs")
    for name in ("row", "seed", "job", "state", "logs / record"):
        table.add_column(name, overflow="fold")
    for u in states:
        state = f"[{colours.get(u.state, 'white')}]{u.state}[/] ({u.slurm_state})"
        where = "\n".join(escape(p) for p in (u.stdout, u.stderr, u.record, u.error) if p)
        table.add_row(escape(u.row), str(u.seed), u.job_id, state, where)
    console.print(table)
    counts = {}
    for u in states:
        counts[u.state] = counts.get(u.state, 0) + 1
    console.print(", ".join(f"{n} {state}" for state, n in sorted(counts.items())), highlight=False)
