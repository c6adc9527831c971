"""What `repro run` prints around the training: the plan's steps before it, and after it how to submit each
test-set prediction file the run wrote (only a server scores a test split)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from rich.table import Table

    from repro.results import Result
    from repro.run import Plan


def render_plan(plan: Plan) -> Table:
    """One line per step of the plan (row, kind, seeds, what it trains, GPU-hours at paper scale, whether
    its family implements it), each stage of a step indented below it."""
    from rich.table import Table

    from repro.run import format_hours

    steps = Table(title=f"plan: {plan.spec.id} at scale {plan.scale}")
    for name in ("row", "step", "seeds", "what", "GPU-hours", "status"):
        steps.add_column(name, overflow="fold")
    for step in plan.steps:
        steps.add_row(
            step.row.name,
            step.kind,
            ",".join(map(str, step.seeds)),
            step.detail,
            format_hours(step.gpu_hours) if plan.scale == "paper" else "CPU",
            status(step, plan.scale),
        )
        for name, what, hours in step.stages:
            steps.add_row("", f"└ {name}", "", what, format_hours(hours), "")
    return steps


def status(step, scale: str) -> str:
    """`ready`, or why the step would not run now: not implemented, not at this scale, or what is not on disk."""
    from rich.markup import escape

    if not step.ready:
        return "[yellow]not implemented yet[/]"
    if step.unsupported:
        return f"[yellow]unsupported at scale {scale}:[/] {escape(step.unsupported)}"
    if step.missing:
        return "[red]missing:[/] " + escape(", ".join(f"`{c}`" for c in step.missing))
    return "ready"


def gpu_hours(plan: Plan) -> float:
    """The plan's GPU-hours on the paper's schedule, every seed of every step counted."""
    return sum(s.gpu_hours or 0.0 for s in plan.steps for _ in s.seeds)


def submit_hints(results: list[Result], plan: Plan, target: str | None) -> list[str]:
    """One line per test-set prediction file of `results`: the commands that submit it to `target` (the
    server of the spec's dataset), or those the family gave for it (extra["submit"]: per seed, {file:
    [command, ...]})."""
    from repro.paths import resolve, resolve_command, shown

    root: Path | None = plan.results_root
    what = f"only the server scores {plan.spec.split}" if plan.scale == "paper" else "a test file for the server"
    lines = []
    for result in results:
        commands = {}
        for per_seed in result.extra.get("submit", []):
            commands.update(per_seed if isinstance(per_seed, dict) else {})
        files = result.extra.get("predictions", [])
        for path in files:  # as the record stores them (repro.paths): shown as this checkout's files
            submit = [resolve_command(c, files, root) for c in commands.get(path, [])]
            submit = submit or [f"repro submit {target or 'TARGET'} --predictions {shown(resolve(path, root))}"]
            what = (
                f"only the server scores {plan.spec.split}" if plan.scale == "paper" else "a test file for the server"
            )
            lines.append(f"{result.row}: {what}; submit with " + " or ".join(f"`{c}`" for c in submit))
    return lines
