"""`repro run`, `repro train` and `repro cp`: a RunRequest built once from the options, then the plan, the
training (here, or as Slurm jobs) and the table; `--status` follows the Slurm jobs."""

from __future__ import annotations

from pathlib import Path

import typer

from repro import completion as complete
from repro.cli.common import (
    LAUNCHERS,
    OVERRIDES_HELP,
    RICH_OR_JSON,
    SCALES,
    command,
    console,
    escape,
    logger_option,
    overrides_argument,
    quoted,
    target_and_variant,
    target_argument,
)
from repro.cli.request import RunRequest, check_seeds, parse_seeds
from repro.cli.slurm import slurm_follow, slurm_run, slurm_status
from repro.errors import ReproError


@command("run")
def run_command(
    ident: str = target_argument(),
    overrides: list[str] | None = overrides_argument(OVERRIDES_HELP),
    rows: str | None = typer.Option(
        None,
        "--rows",
        autocompletion=complete.rows,
        help="Comma-separated row names (default: every runnable row).",
    ),
    scale: str = complete.choice(
        SCALES, "paper", "--scale", "-s", help="paper: the real data; the others generate it."
    ),
    seeds: str | None = typer.Option(None, "--seeds", help="Comma-separated seeds (default: the spec's)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan (rows, data, steps, GPU-hours) and stop."),
    resume: bool = typer.Option(
        False, "--resume", help="Keep stored seeds, run the missing ones, continue each from its checkpoint."
    ),
    workdir: str | None = typer.Option(None, "--workdir", help="Checkpoints and logs (default: $REPRO_DATA_DIR/runs)."),
    rebaseline: bool = typer.Option(
        False, "--rebaseline", help="Make these results the new reference for `repro check`."
    ),
    force: bool = typer.Option(
        False, "--force", help="Replace stored results of these seeds and start over their checkpoints."
    ),
    jobs: int | None = typer.Option(
        None,
        "--jobs",
        "-j",
        min=1,
        help="Runs at a time, each in its own process with its share of the cores as threads, or OMP_NUM_THREADS "
        "(default: the spec's scale setting, else at the synthetic scale its family's measured choice, else 1).",
    ),
    ensemble: bool | None = typer.Option(
        None,
        "--ensemble/--no-ensemble",
        help="Train a row's seeds together in one process, each recorded as its own run (default: the scale's "
        "`ensemble` setting; generated scales; docs/specs.md).",
        show_default=False,
    ),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Paper scale: only the first N questions of each split (a partial run, a variant)."
    ),
    launcher: str = complete.choice(
        LAUNCHERS,
        "local",
        "--launcher",
        help="local: here, --jobs at a time; slurm: a job per (row, seed), or per row with `ensemble: true`, on a "
        "Slurm cluster (docs/cluster.md).",
        what="launcher",
    ),
    partition: str | None = typer.Option(None, "--partition", help="Slurm partition of the jobs."),
    account: str | None = typer.Option(None, "--account", help="Slurm account the jobs are charged to."),
    qos: str | None = typer.Option(None, "--qos", help="Slurm quality of service of the jobs."),
    slurm_opt: list[str] | None = typer.Option(
        None,
        "--slurm-opt",
        metavar="KEY=VALUE",
        help="Another sbatch option, e.g. constraint=a100 or time=2-00:00:00 (repeat it for several).",
    ),
    status: bool = typer.Option(
        False, "--status", help="Show each submitted Slurm unit: pending, running, done or failed, with its logs."
    ),
    fmt: str = complete.choice(
        RICH_OR_JSON, "rich", "--format", "-f", help="With --status: the output format (json: one object per unit)."
    ),
    wait: bool = typer.Option(
        False,
        "--wait",
        help="Wait for the Slurm jobs (those submitted now with --launcher slurm, else those submitted earlier), "
        "then print their states and the table.",
    ),
    device: str | None = typer.Option(
        None, "--device", help="auto (a GPU when there is one), cpu, cuda or cuda:N: where units train and evaluate."
    ),
    logger: list[str] | None = logger_option(),
    weights: list[str] | None = typer.Option(
        None,
        "--weights",
        metavar="released|FILE|PART=FILE",
        help="No training: evaluate the row's released checkpoint(s) (`repro weights ls`) or FILE in an official "
        "layout. A table whose columns come from several data sets takes a file per data set, the option "
        "repeated: --weights flickr30k=A.pth --weights coco=B.pth (columns without one stay empty). Records go "
        "to results/weights/, shown apart by `repro table`.",
    ),
    timing: bool = typer.Option(
        False,
        "--timing",
        help="No training: time the two rows of each claim on a time column against each other, their steps "
        "interleaved in one process (the scale's `timing` settings); the claims are judged from these ratios.",
    ),
) -> None:
    """Train and evaluate every runnable row of a table, write results, print the table.

    Paper and synthetic records go to the checkout's results/ (installed: ./results); smoke and variant
    records to the scratch folder, ~/.cache/repro/results (REPRO_SCRATCH), never into results/. With
    REPRO_RESULTS (or --results) set, every record goes there. The run's last lines say where.

    Example: [bold]repro run mcan-pa-table5-ablation --scale smoke --rows MCAN --seeds 0 recipe.epochs=2[/]

    On a Slurm cluster: [bold]repro run mcan-pa-table5-ablation --launcher slurm --partition gpu[/], then
    [bold]repro run mcan-pa-table5-ablation --status[/].
    """
    if timing:
        run_timing_command(ident, scale, overrides, limit, device)
        return
    slurm_words = [w for w, v in (("--partition", partition), ("--account", account), ("--qos", qos)) if v]
    slurm_words += ["--slurm-opt"] * bool(slurm_opt)
    if launcher != "slurm" and slurm_words:
        raise ReproError(f"{', '.join(slurm_words)}: only with --launcher slurm")
    if fmt != "rich" and not status:
        raise ReproError(f"--format {fmt}: only with --status (a run prints its table)")
    if launcher == "slurm" and jobs is not None:
        raise ReproError("--jobs is for --launcher local; on Slurm every (row, seed), or ensemble, is a job of its own")
    options = None
    if launcher == "slurm":
        from repro.launch.slurm import SlurmOptions

        options = SlurmOptions.parse(partition, account, qos, slurm_opt)
    request = RunRequest(
        ident=ident,
        scale=scale,
        overrides=tuple(overrides or ()),
        rows=tuple(rows.split(",")) if rows else None,
        seeds=tuple(parse_seeds(seeds)) if seeds else None,
        limit=limit,
        workdir=Path(workdir) if workdir else None,
        dry_run=dry_run,
        resume=resume,
        force=force,
        rebaseline=rebaseline,
        jobs=jobs,
        ensemble=ensemble,
        launcher=launcher,
        slurm=options,
        status=status,
        wait=wait,
        fmt=fmt,
        device=device,
        weights=tuple(weights) if weights else None,
        loggers=tuple(logger or ()),
    )
    run_request(request)


def run_timing_command(ident: str, scale: str, overrides, limit: int | None, device: str | None) -> None:
    """`repro run ID --timing`: the interleaved timing records of the table's time claims (repro.timing)."""
    from repro.specs import scale_settings
    from repro.timing import run_timing

    spec, variant = target_and_variant(ident, overrides, limit)
    if not variant.empty:
        raise ReproError("--timing times the committed spec at a scale: no overrides, --limit or spec file")
    run_timing(spec, scale, scale_settings(spec, scale), device, echo=lambda text: console.print(text, highlight=False))


@command("train")
def train_command(
    ident: str = target_argument(),
    overrides: list[str] | None = overrides_argument(OVERRIDES_HELP),
    row: str = typer.Option(
        ..., "--row", "-r", autocompletion=complete.rows, help="The row to train (a name `repro show ID` lists)."
    ),
    scale: str = complete.choice(
        SCALES, "paper", "--scale", "-s", help="paper: the real data; the others generate it."
    ),
    seed: int | None = typer.Option(None, "--seed", help="One seed (default: the spec's seeds)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the last checkpoint."),
    workdir: str | None = typer.Option(None, "--workdir", help="Checkpoints and logs (default: $REPRO_DATA_DIR/runs)."),
    force: bool = typer.Option(
        False, "--force", help="Replace a stored result of this seed and start over its checkpoint."
    ),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Paper scale: only the first N questions of each split (a partial run, a variant)."
    ),
    device: str | None = typer.Option(
        None, "--device", help="auto (a GPU when there is one), cpu, cuda or cuda:N: where units train and evaluate."
    ),
    logger: list[str] | None = logger_option(),
) -> None:
    """Train and evaluate one row of a table.

    Example: [bold]repro train mcan-pa-table5-ablation --row MCAN --scale smoke --resume[/]
    """
    seeds = None if seed is None else (check_seeds([seed], "--seed", str(seed))[0],)
    run_request(
        RunRequest(
            ident=ident,
            scale=scale,
            overrides=tuple(overrides or ()),
            rows=(row,),
            seeds=seeds,
            limit=limit,
            workdir=Path(workdir) if workdir else None,
            resume=resume,
            force=force,
            device=device,
            loggers=tuple(logger or ()),
        )
    )


@command("cp")
def cp_command(
    ident: str = typer.Argument(
        ...,
        metavar="ID",
        autocompletion=complete.experiment_ids,
        help="Experiment id to copy (`repro list` shows them).",
    ),
    dest: Path = typer.Argument(..., metavar="FILE", help="Where to write the copy (.yaml)."),
    force: bool = typer.Option(False, "--force", help="Replace FILE if it exists."),
) -> None:
    """Copy a spec to edit it; `repro run FILE` runs the copy, its results kept apart as a variant.

    Example: [bold]repro cp mcan-pa-table5-ablation ./my.yaml[/]
    """
    from repro.paths import experiments_dir
    from repro.specs import resolve
    from repro.utils import atomic_open, check_not_an_input

    spec = resolve(ident)
    if dest.suffix not in (".yaml", ".yml"):
        raise ReproError(f"{dest}: a spec file ends in .yaml")
    check_not_an_input(dest, {"spec": spec.path, "experiments folder": experiments_dir()}, "the copy")
    if dest.exists() and not force:
        raise ReproError(f"{dest} exists; pass --force to replace it")
    with atomic_open(dest) as handle:
        handle.write(spec.path.read_text(encoding="utf-8"))
    console.print(
        f"wrote {escape(str(dest))} (a copy of {spec.id}); edit it, then `repro run {escape(str(dest))} --scale ...`: "
        f"its results go to variants/ in the scratch folder, never over {spec.id}'s",
        highlight=False,
        soft_wrap=True,
    )


def run_request(request: RunRequest) -> None:
    """Plan the request, print the plan, then run it here or submit it to Slurm (or only show its Slurm units).
    Under torchrun every rank runs it and rank 0 alone prints (errors excepted); the process group the trainer
    joined is left at the end."""
    import os

    from repro.train.distributed import shutdown

    quiet = console.quiet
    console.quiet = quiet or os.environ.get("RANK", "0") != "0"
    try:
        _run_request(request)
    finally:
        console.quiet = quiet
        shutdown()


def _run_request(request: RunRequest) -> None:
    from repro.report.plan import cost_lines, cpu_lines, precision_line, render_plan
    from repro.run import make_plan
    from repro.train.distributed import check_device, parse_device

    # the loggers checked before anything runs (--logger, else REPRO_LOGGERS); every process the run starts reads
    # REPRO_LOGGERS
    from repro.train.loggers import LOGGERS_ENV, parse_loggers, selected
    from repro.variants import load, resolve

    if request.loggers:
        import os

        os.environ[LOGGERS_ENV] = ",".join(parse_loggers(request.loggers))
    else:
        selected()
    # the form always; that the GPU exists only where the units run here (a Slurm job's node has its own)
    device = (parse_device if request.launcher == "slurm" or request.status else check_device)(request.device)
    spec, variant = load(request.ident, request.overrides, request.limit)
    rows = None if request.rows is None else list(request.rows)
    if request.weights is not None and request.rows:  # a cited row runs the checkpoint's network
        from repro.weights import with_weights_rows

        spec = with_weights_rows(spec, rows, request.weights)
    spec = resolve(spec, request.scale, rows, variant)  # the overrides, applied once
    seeds = None if request.seeds is None else list(request.seeds)
    plan = make_plan(
        spec, request.scale, rows, seeds, variant, workdir=request.workdir, ensemble=request.ensemble, device=device
    )
    if request.weights is not None:
        _run_weights(plan, request)
        return
    if request.status:
        slurm_status(plan, seeds=seeds, fmt=request.fmt)
        return
    if request.wait and request.launcher != "slurm":  # follow the units an earlier `--launcher slurm` submitted
        slurm_follow(plan, seeds, earlier=True)
        return
    if not variant.empty:
        console.print(
            f"[bold]variant[/] {escape(variant.describe())}: not the spec as written; records go to "
            f"{escape(str(plan.results_root))}",
            highlight=False,
            soft_wrap=True,
        )
    console.print(render_plan(plan))
    for item in plan.data:
        console.print(f"data: {item}", highlight=False, soft_wrap=True)  # a command never split
    precision = precision_line(plan)
    if precision:
        console.print(precision, highlight=False, soft_wrap=True)
    for line in cost_lines(plan) if plan.scale == "paper" else cpu_lines(plan, force=request.force, jobs=request.jobs):
        console.print(line, highlight=False, soft_wrap=True)
    if request.launcher == "slurm":
        slurm_run(plan, request)
    elif not request.dry_run:
        _run_here(plan, request)


def records_line(plan) -> str:
    """Where the run's records went; smoke and variant runs say they are scratch, kept out of results/."""
    import os

    from repro.names import inside
    from repro.paths import SCRATCH_SCALES, results_dir, shown

    folder = inside(plan.results_root or results_dir(plan.scale), plan.spec.paper, plan.spec.id)
    line = f"records: {escape(shown(folder))}/"
    if not os.environ.get("REPRO_RESULTS") and (plan.scale in SCRATCH_SCALES or not plan.variant.empty):
        line += " (smoke and variant runs are scratch: kept out of results/; REPRO_SCRATCH or REPRO_RESULTS moves them)"
    return line


def _run_here(plan, request: RunRequest) -> None:
    """Train the plan's units in this machine's processes, then print the table, the claims and what to submit."""
    from repro.launch.local import execute
    from repro.monitor import RunMonitor
    from repro.report import build_view, render_claims_rich, render_rich
    from repro.report.plan import submit_hints
    from repro.submit.check import target_for

    results = execute(
        plan,
        resume=request.resume,
        force=request.force,
        rebaseline=request.rebaseline,
        jobs=request.jobs,
        monitor=lambda units: RunMonitor(console, units),
    )
    view = build_view(plan.spec, plan.scale, results_root=plan.results_root)
    console.print(render_rich(view))
    claims = render_claims_rich(view)
    if claims is not None:
        console.print(claims)
    for line in submit_hints(results, plan, target_for(plan.spec.datasets) if results else None):
        console.print(line, highlight=False, soft_wrap=True)
    console.print(records_line(plan), highlight=False, soft_wrap=True)
    if not plan.variant.empty:
        words = " ".join(quoted(w) for w in [request.ident, *request.overrides])
        console.print(
            f"the variant's table again: `repro table {escape(words)} --scale {plan.scale}"
            + (f" --limit {request.limit}" if request.limit else "")
            + "`",
            highlight=False,
            soft_wrap=True,
        )


def _run_weights(plan, request: RunRequest) -> None:
    """`--weights released|FILE`: the plan (each row's checkpoint, where it comes from, the GPU-hours of evaluation),
    then each row evaluated from it, its record under results/weights/, the table and the submit commands."""
    from types import SimpleNamespace

    from repro.launch.units import execute_weights
    from repro.report import build_view, render_rich
    from repro.report.plan import submit_hints
    from repro.submit.check import target_for
    from repro.weights import plan_lines, weights_source

    options = {
        "--seeds": request.seeds,
        "--resume": request.resume,
        "--limit": request.limit,
        "--rebaseline": request.rebaseline,
        "--status": request.status,
        "--wait": request.wait,
        "--ensemble": request.ensemble is not None,
        "--launcher slurm": request.launcher == "slurm",
        "KEY=VALUE": request.overrides,
    }
    refused = [word for word, given in options.items() if given]
    if refused:
        raise ReproError(f"--weights evaluates the spec as written, here, once: not with {', '.join(refused)}")
    if request.rows is None:
        raise ReproError("--weights: name the rows it fills with --rows (`repro weights ls` lists them)")
    sources = {step.row.name: weights_source(request.weights, plan.spec, step.row.name) for step in plan.steps}
    for line in plan_lines(plan, sources):
        console.print(line, highlight=False, soft_wrap=True)
    for item in plan.data:
        console.print(f"data: {item}", highlight=False, soft_wrap=True)  # a command never split
    if request.dry_run:
        return
    done = execute_weights(plan, sources, force=request.force)
    console.print(render_rich(build_view(plan.spec, plan.scale)))
    target = target_for(plan.spec.datasets)
    for result, results_root in done:
        where = SimpleNamespace(results_root=results_root, spec=plan.spec, scale=plan.scale)
        for line in submit_hints([result], where, target):
            console.print(line, highlight=False, soft_wrap=True)
