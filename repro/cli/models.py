"""`repro model` and `repro attention`: what a row trains (parameters, FLOPs, without data), and where a
trained row's attention goes."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from repro import completion as complete
from repro.cli.common import (
    RICH_OR_JSON,
    command,
    console,
    escape,
    overrides_argument,
    target_and_variant,
    target_argument,
)
from repro.errors import ReproError


@command("model")
def model_command(
    ident: str = typer.Argument(
        ..., metavar="ID", autocompletion=complete.experiment_ids, help="Experiment id (`repro list` shows them)."
    ),
    row: str = typer.Option(
        ..., "--row", "-r", autocompletion=complete.rows, help="The row (a name `repro show ID` lists)."
    ),
    fmt: str = complete.choice(RICH_OR_JSON, "rich", "--format", "-f", help="Output format."),
) -> None:
    """What a row trains, without data: each model's task, parameters and FLOPs per sample at the paper's sizes.

    Example: [bold]repro model mcan-pa-table6-complexity --row 'MCAN+PA (ours)' --format json[/]
    """
    from rich.table import Table

    from repro import families
    from repro.specs import resolve

    spec = resolve(ident)
    the_row = spec.row(row)
    if the_row.cited:
        raise ReproError(f"row {the_row.name!r} of {spec.id} is cited from {the_row.cited}: no model of ours")
    if the_row.config is None:
        raise ReproError(f"row {the_row.name!r} of {spec.id} trains no model ({the_row.compute.get('task')} row)")
    family = families.require(families.by_arch(the_row.config.arch))
    if the_row.config.arch not in family.archs:
        raise ReproError(f"row {the_row.name!r} of {spec.id}: arch {the_row.config.arch!r} is not implemented yet")
    models = family.describe(the_row.config, spec)  # one per model of the row (ace-rpe: per downstream task)
    if fmt == "json":
        typer.echo(
            json.dumps(
                {
                    "spec": spec.id,
                    "row": the_row.name,
                    "family": family_paper(the_row),
                    "models": [m.to_json() for m in models],
                },
                indent=2,
            )
        )
        return
    console.print(
        f"[bold]{spec.id}[/] / {the_row.name}: {the_row.config.model_dump_json(exclude_defaults=True)}", highlight=False
    )
    for m in models:
        flops = "? " if m.flops_per_sample is None else f"{m.flops_per_sample / 1e9:.2f} G"
        table = Table(
            title=f"{m.name} ({m.task}): {m.trainable_params:,} trainable of {m.total_params:,} "
            f"parameters, {flops}FLOPs per sample"
        )
        table.add_column("module")
        table.add_column("trainable parameters", justify="right")
        for name, count in m.modules:
            table.add_row(name, f"{count:,}")
        console.print(table)


def family_paper(row) -> str:
    from repro import families

    return families.by_arch(row.config.arch).paper


@command("attention")
def attention_command(
    ident: str = target_argument(),
    overrides: list[str] | None = overrides_argument("The variant a run with these overrides trained."),
    row: str = typer.Option(
        ..., "--row", "-r", autocompletion=complete.rows, help="The row whose trained model to look into."
    ),
    question: int = typer.Option(..., "--question", "-q", help="A val question id of the generated data."),
    scale: str = complete.choice(("synthetic", "smoke"), "synthetic", "--scale", "-s", help="A generated scale."),
    seed: int = typer.Option(0, "--seed", help="Which seed's trained model."),
    map_name: str | None = typer.Option(None, "--map", help="Which map to draw (default: the family's first)."),
    layer: int = typer.Option(-1, "--layer", help="Layer (0-based; -1: the last)."),
    head: int | None = typer.Option(None, "--head", help="Head (0-based; default: the mean of the heads)."),
    output: Path = typer.Option(..., "--output", "-o", help="The figure (.png, .pdf, .svg); the maps go to .npz."),
    workdir: str | None = typer.Option(None, "--workdir", help="Checkpoints (default: $REPRO_DATA_DIR/runs)."),
    device: str | None = typer.Option(
        None, "--device", help="auto (a GPU when there is one), cpu, cuda or cuda:N: where the trained model runs."
    ),
) -> None:
    """Draw a question's image boxes weighted by the attention they receive in a trained row; save the maps.

    The row's unit must have been trained (`repro run`/`repro train`); needs matplotlib.

    Example: [bold]repro attention mcan-pa-table5-ablation --row 'MCAN+PA (ours)' --scale synthetic
    --question 6003 -o attention.png[/]
    """
    from repro.families.base import with_data
    from repro.report.plot import draw_attention, require_matplotlib, save_maps
    from repro.run import make_plan
    from repro.train.distributed import check_device, use_device
    from repro.utils import check_not_an_input

    device = check_device(device)  # the form, and that the GPU exists here
    require_matplotlib()
    spec, variant = target_and_variant(ident, overrides, None, scale, [row])
    check_not_an_input(output, {"spec file": spec.path}, "-o")
    plan = make_plan(spec, scale, [row], [seed], variant, workdir=Path(workdir) if workdir else None, device=device)
    unit = plan.units[0]
    if unit.hooks is None or unit.hooks.attention is None:
        raise ReproError(f"row {unit.row.name!r} of {spec.id}: its family draws no attention maps yet")
    ctx = unit.context(progress=False)
    for out in (output, output.with_suffix(".npz")):  # the figure and its maps, never the unit's own files
        check_not_an_input(out, {"unit's work folder": ctx.workdir}, "-o")
    with use_device(device):  # as a unit of `repro run --device` would: where the family puts the model
        maps = unit.hooks.attention(with_data(ctx) if scale != "paper" else ctx, question)
    what = draw_attention(maps, output, map_name, layer, head)
    raw = output.with_suffix(".npz")
    save_maps(maps, raw)
    console.print(
        f"wrote {escape(str(output))} ({escape(what)}) and {escape(str(raw))} (every map); "
        f"{escape(maps.question)} → {escape(maps.answer)}",
        highlight=False,
        soft_wrap=True,
    )
