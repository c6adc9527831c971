"""`repro plot`: one figure of a table at a scale, drawn with matplotlib (the optional `plot` extra).

Three parts, top to bottom:
  reported vs reproduced   one panel per column: the paper's value and the reproduced mean with ±1 std
                           error bars over the seeds, each seed a dot (at a scale other than the
                           paper's the two axes are different tasks: read the pattern across rows)
  claims                   a forest plot: each claim's reproduced margin in the claimed direction with
                           its confidence interval (claims.CONFIDENCE), the paper's own margin as a diamond,
                           and the zero line
  training curves          loss against step from each unit's train.jsonl, one colour per row, one
                           line per seed (only units trained on this machine have a log)
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.report.claims import CONFIDENCE
from repro.report.view import TableView, caption

SUFFIXES = (".png", ".pdf", ".svg")


def require_matplotlib():
    try:
        import matplotlib
    except ImportError:
        raise ReproError("plots need matplotlib: pip install 'repro[plot]' (or pip install matplotlib)") from None
    matplotlib.use("Agg", force=True)
    return matplotlib


Curves = dict[str, dict[int, dict[str, list]]]  # {row: {seed: {stage: [(step, loss), ...]}}}


def training_logs(workdir: Path, view: TableView, variant_name: str | None = None) -> Curves:
    """{row: {seed: {stage: [(step, loss), ...]}}} from the units' train.jsonl under a run folder; the stage is ""
    for a unit that trains in one go, else the sub-folder of the stage's log (ace-rpe: pretrain, flickr30k, ...;
    psac: action, trans, ...)."""
    from repro.names import inside
    from repro.specs import row_slug

    base = inside(workdir, "variants", variant_name) if variant_name else workdir
    out: Curves = {}
    for row in view.rows:
        if not row.runnable:
            continue
        folder = inside(base, view.spec.id, view.scale, row_slug(row.name))
        for seed_dir in sorted(folder.glob("seed*")) if folder.is_dir() else []:
            tail = seed_dir.name[len("seed") :]
            if not tail.isdigit():
                continue
            for log in sorted(seed_dir.glob("**/train.jsonl")):
                points = _losses(log)
                if points:
                    stage = "" if log.parent == seed_dir else log.parent.relative_to(seed_dir).as_posix()
                    out.setdefault(row.name, {}).setdefault(int(tail), {})[stage] = points
    return out


def _losses(log: Path) -> list[tuple[int, float]]:
    """(step, loss) of each readable line of a train.jsonl; lines that are not are skipped."""
    points = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            item = json.loads(line)
            points.append((int(item["step"]), float(item["loss"])))
        except (ValueError, KeyError, TypeError):
            continue
    return points


def _per_seed(row, column: str) -> list[float]:
    if row.result is None:
        return []
    return [s[column] for s in row.result.extra.get("per_seed", []) if isinstance(s, dict) and column in s]


PANELS_PER_ROW = 5  # the metric panels wrap into rows of at most this many


def panel_grid(n: int) -> tuple[int, int]:
    """(rows, panels per row) for n metric panels: at most PANELS_PER_ROW a row, the rows as even as they can be
    (13 columns: 5, 5, 3)."""
    n = max(n, 1)
    rows = math.ceil(n / PANELS_PER_ROW)
    return rows, math.ceil(n / rows)


def draw(view: TableView, out: Path, curves: Curves | None = None) -> dict[str, Any]:
    """Write the figure to `out` (.png, .pdf or .svg); returns what it holds, for the command's message."""
    from repro.utils import atomic_open

    if out.suffix.lower() not in SUFFIXES:
        raise ReproError(f"-o {out}: a plot is written as {', '.join(SUFFIXES)}")
    fig, held = figure(view, curves)
    with atomic_open(out, "wb") as handle:
        fig.savefig(handle, format=out.suffix.lower().lstrip("."), dpi=110)
    return held


def figure(view: TableView, curves: Curves | None = None):
    """The matplotlib Figure of a table and what it holds. The metric panels wrap into a grid (`panel_grid`) and
    share their row labels; at a scale other than the paper's the paper's values get their own (top, grey) axis."""
    require_matplotlib()
    from matplotlib.figure import Figure

    columns = view.columns
    rows = [r for r in view.rows if r.runnable or any(r.cells[c].reported is not None for c in columns)]
    runnable = [r for r in rows if r.runnable]
    shown = runnable or rows
    claims = [(c, spec_claim) for c, spec_claim in zip(view.claims, view.spec.claims) if spec_claim.column in columns]
    curves = curves or {}
    grid_rows, per_row = panel_grid(len(columns))
    panel_height = max(2.4, 0.3 * len(shown) + 1.4)
    heights = [panel_height] * grid_rows
    heights += [max(1.8, 0.32 * len(claims) + 1.2)] if claims else []
    heights += [3.6] if curves else []
    label_width = 0.07 * max((len(r.name) for r in shown), default=8)
    fig = Figure(figsize=(max(3.4 * per_row + label_width, 11), sum(heights) + 1.6), layout="constrained")
    grid = fig.add_gridspec(len(heights), per_row, height_ratios=heights)
    fig.suptitle(_wrap(caption(view), 150), fontsize=10)

    names = [r.name for r in runnable] or [r.name for r in rows]
    colours = {name: _colour(i) for i, name in enumerate(names)}
    apart = view.scale != "paper"  # the paper's values are another task: their own axis
    first = None
    for j, column in enumerate(columns):
        ax = fig.add_subplot(grid[j // per_row, j % per_row], sharey=first)
        first = first or ax
        _metric_panel(ax, view, shown, column, colours, apart)
        if j % per_row:
            ax.tick_params(labelleft=False)  # one set of row labels per row of panels
    handles, labels = _panel_legend(view, apart)
    note = (
        f"the paper's values (◇, grey top axes) are on another task than scale {view.scale}'s (bottom axes): "
        "compare the pattern across rows, not the values"
        if apart
        else None
    )
    fig.legend(handles, labels, loc="outside lower center", fontsize=8, ncol=len(labels), title=note, title_fontsize=8)
    at = grid_rows
    if claims:
        _forest(fig.add_subplot(grid[at, :]), view, claims)
        at += 1
    if curves:
        _curves(fig.add_subplot(grid[at, :]), curves, colours)
    return fig, {"columns": len(columns), "claims": len(claims), "curves": sum(len(s) for s in curves.values())}


def _colour(i: int) -> str:
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
    return (palette + ["#17becf"])[i % 10]


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


PAPER = "#777777"  # the paper's values and their axis


def _panel_legend(view: TableView, apart: bool):
    """The metric panels' one legend (drawn outside every axes, at the foot of the figure)."""
    from matplotlib.lines import Line2D

    where = " (top axis)" if apart else ""
    return [
        Line2D([], [], marker="D", mfc="none", mec=PAPER, linestyle="none", markersize=7),
        Line2D([], [], marker="o", color="#1f77b4", linestyle="-", markersize=6),
        Line2D([], [], marker=".", color="#1f77b4", linestyle="none", markersize=4),
    ], [
        f"reported in the paper{where}",
        f"reproduced at scale {view.scale}: mean ± std over seeds" + (" (bottom axis)" if apart else ""),
        "each seed",
    ]


def _metric_panel(ax, view: TableView, rows, column: str, colours: dict[str, str], apart: bool = False) -> None:
    """Per row: the paper's value (hollow diamond) and the reproduced mean ± std (filled, error bar), each seed
    a small dot. Dots, not bars: the axis need not start at zero. With `apart` (a scale other than the paper's)
    the paper's values go on a twin axis at the top, in grey, so neither stretches the other's range."""
    paper_ax = ax.twiny() if apart else ax
    for i, row in enumerate(rows):
        cell = row.cells[column]
        colour = colours.get(row.name, "#1f77b4")
        if cell.reported is not None:
            paper_ax.plot(cell.reported, i, "D", mfc="none", mec=PAPER, markersize=7)
        if cell.reproduced is not None:
            ax.errorbar(cell.reproduced, i, xerr=cell.std or 0.0, fmt="o", color=colour, capsize=3, markersize=6)
        seeds = _per_seed(row, column)
        if seeds:
            ax.plot(seeds, [i + 0.22] * len(seeds), ".", color=colour, markersize=3, alpha=0.8)
    ax.set_yticks(range(len(rows)), [r.name for r in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.7)
    spec_column = view.spec.column(column)
    unit = f" [{spec_column.unit}]" if spec_column.unit else ""
    lower = " (lower is better)" if spec_column.better == "lower" else ""
    if apart:
        paper_ax.tick_params(axis="x", colors=PAPER, labelsize=7)
        paper_ax.set_xlabel(f"paper{unit}", fontsize=7, color=PAPER)
        ax.set_xlabel(f"scale {view.scale}{unit}", fontsize=7)
        for axis in (ax, paper_ax):
            if not axis.lines:  # nothing on this axis: no made-up 0..1 scale
                axis.set_xticks([])
    ax.set_title(f"{column}{unit}{lower}", fontsize=10)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(alpha=0.3)


# one colour per kind of verdict: "equivalent" (the claimed effect is absent) is never drawn like "underpowered"
VERDICT_COLOURS = {
    "holds": "#2ca02c",
    "reversed": "#d62728",
    "equivalent": "#9467bd",
    "underpowered": "#ff7f0e",
    "not testable": "#7f7f7f",
    "uninformative": "#7f7f7f",
    "not judged": "#7f7f7f",
}


def _forest(ax, view: TableView, claims) -> None:
    """Each claim: the reproduced margin with its interval, the paper's margin, the zero line."""
    by_name = {r.name: r for r in view.rows}
    for i, (judged, claim) in enumerate(claims):
        sign = -1.0 if view.spec.column(claim.column).better == "lower" else 1.0
        a, b = by_name[claim.row].cells[claim.column], by_name[claim.over].cells[claim.column]
        if a.reported is not None and b.reported is not None:
            ax.plot(
                sign * (a.reported - b.reported),
                i,
                "D",
                color="#555555",
                markersize=5,
                label="paper" if i == 0 else None,
            )
        if judged.margin is None:
            continue
        colour = VERDICT_COLOURS.get(judged.kind, VERDICT_COLOURS["not judged"])
        if judged.ci_low is not None and judged.ci_high is not None and math.isfinite(judged.ci_low):
            ax.plot([judged.ci_low, judged.ci_high], [i, i], "-", color=colour, linewidth=2)
        ax.plot(judged.margin, i, "o", color=colour, markersize=6)
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(claims)), [_wrap(f"{c.text} — {j.verdict}", 70) for j, c in claims], fontsize=8)
    ax.invert_yaxis()
    other = " (another task: compare its sign, not its size)" if view.scale != "paper" else ""
    ax.set_xlabel(
        f"margin in the claimed direction: ● scale {view.scale}, {CONFIDENCE:.0%} interval; ◆ the paper's{other}",
        fontsize=8,
    )
    ax.set_title(
        _wrap(
            "the paper's claims, judged under the spec's design with one Holm family per table (green: holds, red: "
            "reversed, purple: equivalent, orange: underpowered, grey: not judged, not testable or uninformative)",
            100,
        ),
        fontsize=10,
    )
    ax.grid(axis="x", alpha=0.3)


SMOOTHING = 0.95  # the curves' exponential moving average, TensorBoard's "smoothing" (0: none)
STYLES = ("-", "--", ":", "-.")  # one per row as well as its colour: rows stay apart where colours are close


def smoothed(values, weight: float = SMOOTHING) -> list[float]:
    """The debiased exponential moving average of a curve (TensorBoard's smoothing): point t is
    sum_k w^(t-k) (1-w) v_k / (1 - w^(t+1)), so the first points are not pulled towards zero."""
    out, level = [], 0.0
    for t, value in enumerate(values):
        level = weight * level + (1 - weight) * value
        out.append(level / (1 - weight ** (t + 1)))
    return out


def _curves(ax, curves: Curves, colours: dict[str, str]) -> None:
    """One colour per row; the line style tells the rows apart, or, for units trained in stages, the stages."""
    stages = sorted({stage for seeds in curves.values() for per_stage in seeds.values() for stage in per_stage})
    for r, (name, seeds) in enumerate(curves.items()):
        colour, labelled = colours.get(name, "#7f7f7f"), set()
        for _seed, per_stage in sorted(seeds.items()):
            for stage, points in sorted(per_stage.items()):
                steps, losses = zip(*points)
                style = STYLES[(stages.index(stage) if len(stages) > 1 else r) % len(STYLES)]
                label = f"{name} · {stage}" if stage else name
                ax.plot(steps, losses, color=colour, linewidth=0.6, alpha=0.2)
                ax.plot(
                    steps,
                    smoothed(losses),
                    color=colour,
                    linestyle=style,
                    linewidth=1.6,
                    label=None if label in labelled else label,
                )
                labelled.add(label)
    if all(loss > 0 for seeds in curves.values() for per in seeds.values() for p in per.values() for _, loss in p):
        ax.set_yscale("log")
    ax.set_xlabel("step", fontsize=8)
    ax.set_ylabel("training loss", fontsize=8)
    ax.set_title(
        _wrap(
            "training curves of the runs on this machine (each unit's train.jsonl, one line per seed and stage; faint: "
            f"each step, bold: moving average {SMOOTHING}), not the committed records above",
            100,
        ),
        fontsize=10,
    )
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(alpha=0.3)


# --- attention maps (repro attention) -------------------------------------------------------------


def pick(maps, name: str | None, layer: int, head: int | None):
    """The weights to draw: one map's [layers, heads, N] at a layer, one head or the mean of the heads."""
    import numpy as np

    names = list(maps.over_boxes)
    name = name or names[0]
    if name not in maps.over_boxes:
        raise ReproError(f"no attention map {name!r}; one of {', '.join(names)}")
    weights = np.asarray(maps.over_boxes[name])
    layers, heads = weights.shape[0], weights.shape[1]
    if not -layers <= layer < layers:
        raise ReproError(f"--layer {layer}: the {name} map has layers 0..{layers - 1} (or -1 for the last)")
    if head is not None and not 0 <= head < heads:
        raise ReproError(f"--head {head}: the {name} map has heads 0..{heads - 1} (omit it for their mean)")
    per_layer = weights[layer]
    chosen = per_layer.mean(axis=0) if head is None else per_layer[head]
    what = f"{name}, layer {layer % layers + 1} of {layers}, " + ("mean of heads" if head is None else f"head {head}")
    return name, chosen, weights, what


def draw_attention(maps, out: Path, name: str | None = None, layer: int = -1, head: int | None = None) -> str:
    """Write the attention figure (`attention_figure`) to `out`; returns the line that describes the drawn map."""
    from repro.utils import atomic_open

    if out.suffix.lower() not in SUFFIXES:
        raise ReproError(f"-o {out}: a plot is written as {', '.join(SUFFIXES)}")
    fig, what = attention_figure(maps, name, layer, head)
    with atomic_open(out, "wb") as handle:
        fig.savefig(handle, format=out.suffix.lower().lstrip("."), dpi=110)
    return what


def named_in(question: str, label: str) -> bool:
    """Whether the question names the box's object: its label past `#k` (`purple cone`) is in the question."""
    words = label.split(" ", 1)
    return len(words) == 2 and f" {words[1].lower()}" in f" {question.lower()}"


def attention_figure(maps, name: str | None = None, layer: int = -1, head: int | None = None):
    """The image's boxes, each outlined in the colour of the attention it receives and labelled with its object
    (`maps.box_labels`; the boxes the question names drawn thicker); beside it, that head (or the heads' mean) over
    every layer, the colour bar marking the uniform level 1/N. Returns the Figure and the line that describes it."""
    require_matplotlib()
    from matplotlib import colormaps
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    name, chosen, weights, what = pick(maps, name, layer, head)
    per_layer = weights.mean(axis=1) if head is None else weights[:, head]
    fig = Figure(figsize=(13, 5.6), layout="constrained")
    scene, grid = fig.subplots(1, 2, width_ratios=[1.5, 1])
    width, height = maps.image_size
    scene.add_patch(Rectangle((0, 0), width, height, facecolor="#f4f4f4", edgecolor="black"))
    norm = Normalize(0.0, float(per_layer.max()) or 1.0)  # one colour scale for both panels
    cmap = colormaps["Reds"]
    for k, (x1, y1, x2, y2) in enumerate(maps.boxes):  # outlines, not fills: overlapping boxes keep their colour
        referent = named_in(maps.question, maps.box_labels[k])
        colour = cmap(norm(float(chosen[k])))
        scene.add_patch(Rectangle((x1, y1), x2 - x1, y2 - y1, fill=False, edgecolor=colour, linewidth=5))
        scene.add_patch(
            Rectangle((x1, y1), x2 - x1, y2 - y1, fill=False, edgecolor="black", linewidth=2.2 if referent else 0.6)
        )
        scene.text(
            x1 + 3,
            y1 + 3,
            f"{maps.box_labels[k]}  {chosen[k]:.2f}",
            fontsize=8,
            va="top",
            fontweight="bold" if referent else "normal",
            bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1},
        )
    scene.set_xlim(0, width)
    scene.set_ylim(height, 0)  # image coordinates: y grows downwards
    scene.set_aspect("equal")
    gold = f" (annotators: {maps.gold})" if maps.gold else ""
    scene.set_title(_wrap(f"{maps.question} → {maps.answer}{gold}", 80), fontsize=10)
    scene.set_xlabel(
        f"{what}\neach box: its object and the attention it receives (the objects the question names in bold)",
        fontsize=8,
    )

    image = grid.imshow(per_layer, aspect="auto", cmap=cmap, norm=norm)
    grid.set_xticks(range(len(maps.box_labels)), maps.box_labels, fontsize=8, rotation=40, ha="right")
    grid.set_yticks(range(per_layer.shape[0]), [str(i + 1) for i in range(per_layer.shape[0])], fontsize=8)
    grid.set_ylabel("layer", fontsize=9)
    grid.set_title(f"{name}: " + ("mean of heads" if head is None else f"head {head}"), fontsize=10)
    bar = fig.colorbar(image, ax=grid, shrink=0.8)
    uniform = 1.0 / max(len(maps.box_labels), 1)
    bar.ax.axhline(uniform, color="black", linestyle="--", linewidth=1)
    bar.set_label(f"attention received (dashed: uniform, 1/{len(maps.box_labels)} = {uniform:.2f})", fontsize=8)
    return fig, what


def save_maps(maps, out: Path) -> None:
    """The raw maps, the boxes and the question as a .npz beside the figure."""
    import numpy as np

    from repro.utils import atomic_open

    arrays = {f"raw_{k}": np.asarray(v) for k, v in maps.raw.items()}
    arrays |= {f"over_boxes_{k.replace(' ', '_')}": np.asarray(v) for k, v in maps.over_boxes.items()}
    arrays |= {
        "boxes": np.asarray(maps.boxes),
        "image_size": np.asarray(maps.image_size),
        "box_labels": np.asarray(maps.box_labels),
        "question": np.asarray(maps.question),
        "answer": np.asarray(maps.answer),
    }
    with atomic_open(out, "wb") as handle:
        np.savez_compressed(handle, **arrays)
