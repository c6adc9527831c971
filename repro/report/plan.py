"""What `repro run` prints around the training: the plan's steps before it, and after it how to submit each
test-set prediction file the run wrote (only a server scores a test split)."""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from repro.results import Result
    from repro.run import Plan


class PlanView:
    """The plan's steps, one line each, in the block layout of `repro table`'s listings: rich boxes in a terminal,
    plain text in pipes; the row, its status and GPU-hours never cut, the model's settings (`what`) cut or left
    out at narrow widths. Notes below it: why rows do not run, how the memory is estimated."""

    def __init__(self, plan: Plan):
        self.plan = plan

    def __rich_console__(self, console, options):
        from rich.text import Text

        from repro.report.grid import listing_grid, plain_listing, rich_listing, wrap

        plan, width = self.plan, options.max_width
        label, cols, what, notes = plan_grid(plan)
        title = f"plan: {plan.spec.id} at scale {plan.scale}"
        grid = listing_grid(label, cols, width, console.is_terminal, what)
        shown = grid.groups[-1][0].cells if len(grid.groups) > len(cols) else []
        if shown != what.cells and any(c.strip() for c in what.cells):  # left out or cut
            notes.append(f"each row's model: `repro show {plan.spec.id}` (or a wider terminal)")
        if console.is_terminal:
            yield from rich_listing(grid, width, title=title, title_justify="left")
        else:
            yield Text("\n".join([title, *plain_listing(grid, width)]), no_wrap=True, overflow="ignore")
        for note in notes:
            yield Text("\n".join(wrap(note, width, "  ")), no_wrap=True, overflow="ignore")


def render_plan(plan: Plan) -> PlanView:
    """One line per step of the plan (row, kind, seeds, GPU-hours at paper scale, the estimated memory per GPU,
    whether it runs now, what it trains), each stage of a step indented below it, and notes under it."""
    return PlanView(plan)


def plan_grid(plan: Plan):
    """(row-name column, the columns never cut, `what` (cut or left out), notes) of the plan's table."""
    from repro.report.grid import Col
    from repro.run import format_hours

    paper = plan.scale == "paper"
    memory, notes = plan_memory(plan) if paper else ({}, [])
    reasons: list[str] = []
    names, kinds, seeds, hours, gib, states, styles, whats = ([] for _ in range(8))
    archs = {s.row.config.arch for s in plan.steps if s.kind == "train" and s.row.config is not None}
    for step in plan.steps:
        text = status(step, plan.scale, plan)
        if step.unsupported and step.ready:
            why = f"unsupported at scale {plan.scale}: {step.unsupported}"
            reasons += [why] if why not in reasons else []
            text = f"unsupported: note {reasons.index(why) + 1}"
        names.append(step.row.name)
        kinds.append(step.kind)
        seeds.append(",".join(map(str, step.seeds)))
        hours.append(row_hours(step) if paper else cpu_cell(step))
        gib.append(memory.get(step.row.name, ""))
        states.append(_plain(text))
        styles.append("red" if step.missing else "yellow" if step.unsupported or not step.ready else None)
        whats.append(compact_what(step, len(archs) > 1))
        for name, what, stage_hours in step.stages:  # below its row, in the row column: never cut
            for column, cell in zip(
                (names, kinds, seeds, hours, gib, states, whats),
                (f"  └ {name}", "", "", format_hours(stage_hours), "", "", what),
                strict=True,
            ):
                column.append(cell)
            styles.append(None)
    cols = [
        *([Col("step", kinds, justify="left")] if any(k != "train" for k in kinds if k) else []),
        Col("seeds", seeds, justify="left"),
        Col("GPU-hours" if paper else "CPU-min/seed", hours),
        *([Col("GiB/GPU", gib)] if paper and any(gib) else []),
        Col("status", states, styles, justify="left"),
    ]
    notes = [f"note {i}: {why}" for i, why in enumerate(reasons, 1)] + notes
    return Col("row", names, justify="left"), cols, Col("what", whats, justify="left"), notes


def _plain(markup: str) -> str:
    from rich.text import Text

    return Text.from_markup(markup).plain


def compact_what(step, arch: bool = True) -> str:
    """The model's settings that differ from its defaults, `positional=pwa,poa fusion=eq8` (`arch=` only where
    the plan's rows have several), or `defaults`; a compute step's task. The recipe is the precision line's."""
    if step.kind != "train" or step.row.config is None:
        return step.detail
    settings = step.row.config.model_dump(mode="json", exclude_defaults=True)
    words = [
        f"{k}={','.join(map(str, v)) or 'none' if isinstance(v, list) else v}"
        for k, v in settings.items()
        if arch or k != "arch"
    ]
    return " ".join(words) or "defaults"


def data_numbers(step, plan: Plan) -> list[int] | None:
    """The numbers of the plan's `data:` lines that make what `step` lacks (None: a command no line lists)."""
    from repro.run import need_commands

    numbers = []
    for command in step.missing:
        line = next((i for i, need in enumerate(plan.needs, 1) if command in need_commands(need)), None)
        if line is None:
            return None
        numbers += [line] if line not in numbers else []
    return sorted(numbers)


def number_ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 5] -> `1–3, 5`."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def status(step, scale: str, plan: Plan | None = None) -> str:
    """`ready`, or why the step would not run now: not implemented, not at this scale, or what is not on disk
    (with `plan`: the numbers of its `data:` lines, `missing: data 1–3`; without: the commands themselves)."""
    from rich.markup import escape

    if not step.ready:
        return "[yellow]not implemented yet[/]"
    if step.unsupported:
        return f"[yellow]unsupported at scale {scale}:[/] {escape(step.unsupported)}"
    if step.missing:
        numbers = data_numbers(step, plan) if plan is not None else None
        if numbers:
            return f"[red]missing:[/] data {number_ranges(numbers)}"
        return "[red]missing:[/] " + escape(", ".join(f"`{c}`" for c in step.missing))
    return "ready"


def plan_memory(plan: Plan) -> tuple[dict[str, str], list[str]]:
    """Each paper-scale training row's estimated peak memory per GPU (`repro.memory`), as text (`?` where it
    cannot be estimated), one measurement per distinct model, recipe and GPU count; and the notes that say
    what the estimate is and which rows have none, and why."""
    from repro.memory import ALLOWANCE_GIB, row_estimate

    cells: dict[str, str] = {}
    unknown: dict[str, list[str]] = {}
    measured: dict[tuple, str] = {}
    gpu_counts: set[int] = set()
    used: dict[str, object] = {}  # the recipes the estimates are at, by name
    trained = [s for s in plan.steps if s.kind == "train" and s.ready and not s.unsupported]
    recipe = plan.recipe if trained else None
    for step in trained:
        hooks = step.hooks
        if recipe is None and hooks.memory_stage is None:
            why = "the spec names no recipe of its own (its stages train with theirs)"
        elif recipe is not None and hooks.example_batch is None:
            why = f"family {step.row.family} has no example batch"
        else:
            gpus = step.units[0].resources.gpus
            gpu_counts.add(gpus)
            key = (step.row.config.model_dump_json(), gpus)
            if key not in measured:
                try:
                    if recipe is None:  # the family's stage that holds the most (ace-rpe's pre-training)
                        estimate, stage = _stage_estimate(plan, step, gpus)
                    else:
                        estimate, stage = row_estimate(hooks, step.row.config, recipe, gpus), recipe
                    used[stage.name] = stage
                    measured[key] = f"{estimate.gib:.1f}"
                except Exception as exc:  # a model that does not build or run on `meta`: the plan goes on
                    from repro.errors import reason

                    measured[key] = f"? ({reason(exc)})"
            cells[step.row.name], _, failure = measured[key].partition(" ")
            if not failure:
                continue
            why = f"its model does not run on the meta device {failure}"
        cells[step.row.name] = "?"
        unknown.setdefault(why, []).append(step.row.name)
    notes = []
    if any(c != "?" for c in cells.values()):
        over = f"{gpu_counts.pop()} GPU(s)" if len(gpu_counts) == 1 else "each row's GPUs"
        stages = list(used.values())
        batch = ", ".join(f"the global {r.batch_size}" + (f" of {r.name}" if recipe is None else "") for r in stages)
        notes.append(
            f"GiB/GPU: an estimate of training's peak memory per GPU: weights, gradients and "
            f"{recipe_states(stages[0])} at {precision_of(stages[0])}, the activations saved for backward at the "
            f"per-GPU batch ({batch} over {over}), + {ALLOWANCE_GIB} GiB for the CUDA context; the allocator's "
            f"overhead and transient buffers not counted"
        )
    for why, rows in unknown.items():
        notes.append(f"GiB/GPU ? for {', '.join(rows)}: {why}")
    return cells, notes


def _stage_estimate(plan: Plan, step, gpus: int):
    """(estimate, recipe) of a row whose spec names no recipe: its family's stage that holds the most per GPU
    (`Hooks.memory_stage`), at the plan's precision where the settings or an override set one."""
    from repro import families
    from repro.memory import row_estimate
    from repro.run import override_precision

    name, build, example = step.hooks.memory_stage(step.row.config, plan.spec)
    precision = override_precision(plan.settings)
    recipe = families.load_recipe(name).replace(**({"precision": precision} if precision else {}))
    return row_estimate(step.hooks, step.row.config, recipe, gpus, build=build, example=example), recipe


def recipe_states(recipe) -> str:
    from repro.memory import optimizer_states

    if recipe is None:
        return "the optimiser's states"
    n = optimizer_states(recipe.optimizer)
    return f"{recipe.optimizer.get('name', 'the optimiser')}'s {n} state(s) per parameter"


def precision_of(recipe) -> str:
    return "fp32" if recipe is None or recipe.precision == "auto" else recipe.precision


def row_hours(step) -> str:
    """A step's GPU-hours for one seed, and times its seeds where it has several: `15.0 x 3 = 45.0`."""
    from repro.run import format_hours

    one = format_hours(step.gpu_hours)
    if len(step.seeds) < 2 or step.gpu_hours is None:
        return one
    return f"{one} x {len(step.seeds)} = {format_hours(step.gpu_hours * len(step.seeds))}"


def seed_cpu_seconds(step) -> tuple[float, bool] | None:
    """The CPU seconds one seed of a training step takes, from the row's stored seeds of the same configuration (on
    the machine that ran them) that trained: the median of their CPU times (True: measured), or, for records that
    kept none, of their wall time times the threads each ran with, an upper bound (False); None: no such stored
    seed. A seed that read its training from the store (`training.reused`) only evaluated: it does not count."""
    import statistics

    same = _trained_seeds(step)
    if not same:
        return None
    measured = [r.cpu_time_s for r in same if r.cpu_time_s]
    if measured:
        return statistics.median(measured), True
    bounds = [r.wall_time_s * max(1, int(r.environment.get("threads") or 1)) for r in same if r.wall_time_s]
    return (statistics.median(bounds), False) if bounds else None


def _trained_seeds(step) -> list:
    """A training step's stored seeds of the same configuration that trained (not read from the store)."""
    if step.kind != "train" or not step.units:
        return []

    def trained(record) -> bool:
        return not (isinstance(record.training, dict) and record.training.get("reused"))

    return [r for r in step.stored.values() if r.config_hash == step.units[0].config_hash and trained(r)]


def processors_of(steps) -> Counter:
    """How many of the stored seeds the plan's CPU times come from ran on each processor (`hardware.cpu` of their
    environment)."""
    return Counter(
        cpu
        for step in steps
        for record in _trained_seeds(step)
        if (cpu := ((record.environment or {}).get("hardware") or {}).get("cpu"))
    )


def cpu_cell(step) -> str:
    """A generated-scale step's CPU-minutes a seed: `2.9`, `≤3.1` (from wall time), `–` (nothing stored to go by)."""
    cost = seed_cpu_seconds(step)
    if cost is None:
        return "–"
    return f"{'' if cost[1] else '≤'}{cost[0] / 60:.1f}"


def cpu_lines(plan: Plan, force: bool = False, jobs: int | None = None) -> list[str]:
    """At a generated scale: the CPU time of the seeds the run trains (those without a stored record; with `force`,
    `repro run --force`, every seed asked for) and of the design's seeds of the rows its claims compare, from each
    row's stored seeds (`seed_cpu_seconds`), and the wall time on the cores the run's processes can keep busy: `jobs`
    (`repro.launch.local.units_at_a_time`, as `execute` takes them) processes at a time, no more than there are
    seeds (or rows, their seeds trained together), each with its threads (`repro.load.threads_per_process`): one seed
    of one thread uses one core."""
    from repro import load
    from repro.launch.local import units_at_a_time
    from repro.timing import timed_claims

    cores = load.cores()
    jobs = units_at_a_time(plan, jobs)
    steps = [s for s in plan.steps if s.kind == "train" and s.ready and not s.unsupported]
    costs = {s.row.name: seed_cpu_seconds(s) for s in steps}
    bound = any(c is not None and not c[1] for c in costs.values())

    together = plan.settings.get("ensemble") is True  # a row's seeds in one process

    def total(seeds_of) -> tuple[float, int, list[str], int]:
        seconds, count, unknown, processes = 0.0, 0, [], 0
        for step in steps:
            n = seeds_of(step)
            if not n:
                continue
            if costs[step.row.name] is None:
                unknown.append(step.row.name)
                continue
            seconds, count = seconds + costs[step.row.name][0] * n, count + n
            processes += 1 if together else n
        return seconds, count, unknown, processes

    def said(seconds: float, count: int, unknown: list[str], processes: int) -> str:
        minutes = seconds / 60
        nothing = f"no stored seed of this configuration to go by for {', '.join(unknown)}"
        if not count:
            return f"unknown: {nothing}"
        processes = min(jobs, processes)
        busy = min(cores, processes * load.threads_per_process(processes))
        where = f"{cores} cores" if busy == cores else f"{busy} of {cores} cores"
        text = f"about {minutes:.0f} CPU-minutes for {count} seed(s), {minutes / busy:.0f} minutes on {where}"
        return text + (f"; {nothing}" if unknown else "")

    lines = []
    pending = total(lambda step: sum(1 for u in step.units if force or u.stored is None))
    if pending[1] or pending[2]:
        lines.append("CPU time of the seeds to train: " + said(*pending))
    design = plan.spec.design
    seeds = design.seeds.get(plan.scale) if design is not None else None
    timed = timed_claims(plan.spec)  # judged from their timing run (repro.timing), never from the rows' seeds
    compared = {name for c in plan.spec.claims if c not in timed for name in (c.row, c.over)}
    need = total(lambda step: len(seeds or []) if step.row.name in compared else 0)
    if seeds and (need[1] or need[2]):  # the plan has a row the claims compare
        lines.append(f"the design's {len(seeds)} seeds of each row the claims compare: " + said(*need))
    if lines:
        lines.append(
            "(from each row's stored seeds of this configuration, "
            + _where_they_ran(steps)
            + ("; ≤: their wall time x threads, an upper bound, where they kept no CPU time)" if bound else ")")
        )
    lines += [line for step in steps if costs[step.row.name] is None and (line := changed_line(step))]
    if timed:
        lines.append(timing_line(plan, timed))
    return lines


def timing_line(plan: Plan, timed) -> str:
    """Where the claims on a time column are judged, and how many of their timing records this design has."""
    from repro.timing import read_timing

    digest = plan.spec.design_hash(plan.scale)
    records = [read_timing(plan.spec, claim, plan.scale) for claim in timed]
    current = sum(1 for r in records if r is not None and r.get("design_hash") == digest)
    return (
        f"{len(timed)} claim(s) on a time column are judged from `repro run {plan.spec.id} --scale {plan.scale} "
        f"--timing` (both rows' steps interleaved in one process), not from these seeds; {current} of their "
        f"{len(timed)} timing record(s) were measured under this design"
    )


def changed_line(step) -> str | None:
    """For a row with no stored seed of its configuration but some of another (the spec's settings changed since they
    ran; of several, the one that ran last): what a seed of those took and what differs, a guide the plan does not
    add up: `without QA-Co: 10 stored seed(s) of another configuration took about 3.4 CPU-minutes a seed; this one
    differs in settings.task_recipe.transition.epochs (100 → 200)`."""
    import statistics

    from repro.run import hashed_config

    if not step.units:
        return None
    now = step.units[0].config_hash
    others = [r for r in step.stored.values() if r.config_hash != now and r.cpu_time_s and isinstance(r.config, dict)]
    if not others:
        return None
    latest = max(others, key=lambda r: r.finished or "")  # the configuration that ran last, its seeds alone
    others = [r for r in others if r.config_hash == latest.config_hash]
    minutes = statistics.median(r.cpu_time_s for r in others) / 60
    before = dict(_flat(hashed_config(latest.config)))
    after = dict(_flat(hashed_config(step.units[0].config)))
    keys = sorted(k for k in before.keys() | after.keys() if before.get(k, "unset") != after.get(k, "unset"))
    shown = ", ".join(f"{k} ({before.get(k, 'unset')} → {after.get(k, 'unset')})" for k in keys[:3])
    more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
    return (
        f"{step.row.name}: {len(others)} stored seed(s) of another configuration took about {minutes:.1f} CPU-minutes "
        f"a seed; this one differs in {shown or 'nothing the record kept'}{more}"
    )


def _flat(value, prefix: str = ""):
    """(dotted key, value) for every leaf of nested dicts; lists are leaves."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _flat(item, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), value


def _where_they_ran(steps) -> str:
    """`on the machine that ran them`, naming the processors where any stored seed ran on another than this one (a
    seed's CPU time there can differ several-fold here): `on the machines that ran them: 41 seed(s) on Intel(R)
    Xeon(R) Processor, 1 seed(s) on this machine's AMD EPYC`."""
    from repro.results import cpu_model

    counts, here = processors_of(steps), cpu_model()
    if set(counts) <= {here}:
        return "on the machine that ran them"
    parts = [f"{n} seed(s) on {cpu}" for cpu, n in counts.most_common() if cpu != here]
    if here in counts:
        parts.append(f"{counts[here]} seed(s) on this machine's {here}")
    else:
        parts[-1] += f", not this machine's {here}"
    return f"on the machine{'s' if len(counts) > 1 else ''} that ran them: " + ", ".join(parts)


def gpu_hours(plan: Plan, seeds: int | None = None) -> float:
    """The plan's GPU-hours on the paper's schedule, every seed of every step counted (or `seeds` per step);
    steps without an estimate count nothing (`cost_lines` names them)."""
    return sum((s.gpu_hours or 0.0) * (len(s.seeds) if seeds is None else seeds) for s in plan.steps)


def cost_lines(plan: Plan) -> list[str]:
    """At paper scale: the GPU-hours of the planned seeds, and of the seeds judging the claims needs (the
    spec's paper-scale `seeds`, else 3 per row), naming the rows without an estimate."""
    from repro.run import claim_seeds
    from repro.train import cost

    trained = [s for s in plan.steps if s.kind == "train" and not s.unsupported]
    unknown = [s.row.name for s in trained if s.gpu_hours is None]
    planned = sorted({len(s.seeds) for s in trained}) or [0]
    per_row = "/".join(map(str, planned))
    assumption = cost.assumption(plan_precision(plan)) + "; the paper's measured time where it states one"
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
    return [*lines, assumption]


def plan_recipe(plan: Plan):
    """The recipe the plan's precision is read from, as its file says: the spec's, else (a spec whose stages train
    with their own recipes) the stage of its first trained row that the family names (`Hooks.memory_stage`); None:
    neither, or nothing trains."""
    from repro import families

    trained = [s for s in plan.steps if s.kind == "train" and s.hooks is not None]
    if not trained:
        return None
    if plan.written_recipe is not None:
        return plan.written_recipe
    step = trained[0]
    if step.hooks.memory_stage is None:
        return None
    return families.load_recipe(step.hooks.memory_stage(step.row.config, plan.spec)[0])


def plan_precision(plan: Plan) -> str | None:
    """The precision the plan's training runs in: its recipe's with the scale's settings and overrides (None: no
    recipe to read it from)."""
    recipe = plan_recipe(plan)
    if recipe is None:
        return None
    chosen = plan.recipe if plan.recipe is not None else recipe.replace(**plan.settings.get("recipe", {}))
    return "fp32" if chosen.precision == "auto" else chosen.precision


def precision_line(plan: Plan) -> str | None:
    """The precision the plan's training runs in: the recipe's `precision:` (what the paper's official code trains
    with), or the scale's or an override's with the recipe's beside it (`auto`, a recipe's own: fp32)."""
    recipe = plan_recipe(plan)
    if recipe is None:
        return None
    own = "fp32" if recipe.precision == "auto" else recipe.precision
    precision = plan_precision(plan)
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
    lines = []
    for result in results:
        commands = {}
        for per_seed in result.extra.get("submit", []):
            commands.update(per_seed if isinstance(per_seed, dict) else {})
        files = result.extra.get("predictions", [])
        for path in files:  # as the record stores them (repro.paths): shown as this checkout's files
            submit = [resolve_command(c, files, root) for c in commands.get(path, [])]
            submit = submit or [f"repro submit {target or 'TARGET'} --predictions {shown(resolve(path, root))}"]
            # the file's split from its name (`RunContext.predictions_file`), not the spec's (sa-m4c reports val)
            split = re.search(r"\.seed[0-9]+\.([^.]+)(\.partial)?\.json$", str(path))
            split_name = split.group(1) if split else plan.spec.split
            what = f"only the server scores {split_name}" if plan.scale == "paper" else "a test file for the server"
            lines.append(f"{result.row}: {what}; submit with " + " or ".join(f"`{c}`" for c in submit))
    return lines
