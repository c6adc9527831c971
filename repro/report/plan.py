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
            row_hours(step) if plan.scale == "paper" else "CPU",
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


def row_hours(step) -> str:
    """A step's GPU-hours for one seed, and times its seeds where it has several: `15.0 x 3 = 45.0`."""
    from repro.run import format_hours

    one = format_hours(step.gpu_hours)
    if len(step.seeds) < 2 or step.gpu_hours is None:
        return one
    return f"{one} x {len(step.seeds)} = {format_hours(step.gpu_hours * len(step.seeds))}"


def gpu_hours(plan: Plan, seeds: int | None = None) -> float:
    """The plan's GPU-hours on the paper's schedule, every seed of every step counted (or `seeds` per step);
    steps without an estimate count nothing (`cost_lines` names them)."""
    return sum((s.gpu_hours or 0.0) * (len(s.seeds) if seeds is None else seeds) for s in plan.steps)


def cost_lines(plan: Plan) -> list[str]:
    """At paper scale: the GPU-hours of the planned seeds, and of the seeds judging the claims needs (the
    spec's paper-scale `seeds`, else 3 per row), naming the rows without an estimate."""
    from repro.run import claim_seeds

    trained = [s for s in plan.steps if s.kind == "train" and not s.unsupported]
    unknown = [s.row.name for s in trained if s.gpu_hours is None]
    planned = sorted({len(s.seeds) for s in trained}) or [0]
    per_row = "/".join(map(str, planned))
    gaps = f"; no estimate for {', '.join(unknown)}" if unknown else ""
    lines = [f"estimated GPU-hours (paper schedule): {gpu_hours(plan):.1f} for {per_row} seed(s) per row{gaps}"]
    limit, whole = plan.variant.limit, [s.row.name for s in trained if not s.limited]
    if limit is not None:  # the family's share of the questions trained on, the epochs unchanged
        lines[0] += (
            f"; --limit {limit} not counted for {', '.join(whole)}: the estimate is for the whole splits"
            if whole
            else f"; --limit {limit}: the first {limit} questions of each split, the epochs unchanged"
        )
    need = claim_seeds(plan.spec)
    if planned != [need]:
        what = "judging the claims needs" if plan.spec.claims else "a mean and spread need"
        lines.append(
            f"{what} {need} seeds per row (`--seeds {','.join(map(str, range(need)))}`): "
            f"{gpu_hours(plan, need):.1f} GPU-hours"
        )
    return lines


def precision_line(plan: Plan) -> str | None:
    """The precision the plan's training runs in: the recipe's `precision:` (what the paper's official code trains
    with), or the scale's or an override's with the recipe's beside it (`auto`, a recipe's own: fp32)."""
    from repro.families import load_recipe

    if not plan.spec.recipe or not any(s.kind == "train" for s in plan.steps):
        return None
    recipe = load_recipe(plan.spec.recipe)
    own = "fp32" if recipe.precision == "auto" else recipe.precision
    chosen = recipe.replace(**plan.settings.get("recipe", {})).precision
    precision = "fp32" if chosen == "auto" else chosen
    if precision == own:
        return (
            f"precision: {own} (recipe {recipe.name}: what the official code trains with; "
            f"`recipe.precision=tf32` or bf16 trades exactness for speed on a GPU)"
        )
    return f"precision: {precision} (an override; recipe {recipe.name} says {own}, what the official code trains with)"


def submit_hints(results: list[Result], plan: Plan, target: str | None) -> list[str]:
    """One line per test-set prediction file of `results`: the commands that submit it to `target` (the
    server of the spec's dataset), or those the family gave for it (extra["submit"]: per seed, {file:
    [command, ...]})."""
    from repro.paths import resolve, resolve_command, results_dir, shown

    root: Path = plan.results_root or results_dir(plan.scale)  # where the records, and their relative paths, are
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
