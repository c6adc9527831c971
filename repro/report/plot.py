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


def training_logs(workdir: Path, view: TableView, variant_name: str | None = None) -> dict[str, dict[int, list]]:
    """{row: {seed: [(step, loss), ...]}} from the units' train.jsonl under a run folder."""
    from repro.specs import row_slug

    base = workdir / "variants" / variant_name if variant_name else workdir
    out: dict[str, dict[int, list]] = {}
    for row in view.rows:
        if not row.runnable:
            continue
        folder = base / view.spec.id / view.scale / row_slug(row.name)
        for seed_dir in sorted(folder.glob("seed*")) if folder.is_dir() else []:
            tail = seed_dir.name[len("seed") :]
            logs = sorted(seed_dir.glob("**/train.jsonl"))
            if not tail.isdigit() or not logs:
                continue
            points = []
            for line in logs[0].read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    item = json.loads(line)
                    points.append((int(item["step"]), float(item["loss"])))
                except (ValueError, KeyError, TypeError):
                    continue
            if points:
                out.setdefault(row.name, {})[int(tail)] = points
    return out


def _per_seed(row, column: str) -> list[float]:
    if row.result is None:
        return []
    return [s[column] for s in row.result.extra.get("per_seed", []) if isinstance(s, dict) and column in s]


def draw(view: TableView, out: Path, curves: dict[str, dict[int, list]] | None = None) -> dict[str, Any]:
    """Write the figure to `out` (.png, .pdf or .svg); returns what it holds, for the command's message."""
    require_matplotlib()
    from matplotlib.figure import Figure

    from repro.utils import atomic_open

    if out.suffix.lower() not in SUFFIXES:
        raise ReproError(f"-o {out}: a plot is written as {', '.join(SUFFIXES)}")
    columns = view.columns
    rows = [r for r in view.rows if r.runnable or any(r.cells[c].reported is not None for c in columns)]
    runnable = [r for r in rows if r.runnable]
    claims = [(c, spec_claim) for c, spec_claim in zip(view.claims, view.spec.claims) if spec_claim.column in columns]
    curves = curves or {}
    parts = 1 + bool(claims) + bool(curves)
    ncols = max(len(columns), 1)
    fig = Figure(figsize=(max(4.2 * ncols, 11), 4.6 + 4.0 * (parts - 1) + 0.25 * len(claims)), layout="constrained")
    heights = [1.0] + ([max(0.8, 0.12 * len(claims))] if claims else []) + ([1.0] if curves else [])
    grid = fig.add_gridspec(parts, ncols, height_ratios=heights)
    fig.suptitle(_wrap(caption(view), 150), fontsize=10)

    names = [r.name for r in runnable] or [r.name for r in rows]
    colours = {name: _colour(i) for i, name in enumerate(names)}
    for j, column in enumerate(columns):
        ax = fig.add_subplot(grid[0, j])
        _metric_panel(ax, view, runnable or rows, column, colours)
        if j == 0:  # one legend for the panels, outside the data
            handles, labels = ax.get_legend_handles_labels()
            fig.legend(handles, labels, loc="outside lower center", fontsize=8, ncol=len(labels) or 1)
    at = 1
    if claims:
        _forest(fig.add_subplot(grid[at, :]), view, claims)
        at += 1
    if curves:
        _curves(fig.add_subplot(grid[at, :]), curves, colours)
    with atomic_open(out, "wb") as handle:
        fig.savefig(handle, format=out.suffix.lower().lstrip("."), dpi=110)
    return {"columns": len(columns), "claims": len(claims), "curves": sum(len(s) for s in curves.values())}


def _colour(i: int) -> str:
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
    return (palette + ["#17becf"])[i % 10]


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def _metric_panel(ax, view: TableView, rows, column: str, colours: dict[str, str]) -> None:
    """Per row: the paper's value (hollow diamond) and the reproduced mean ± std (filled, error bar), each seed
    a small dot. Dots, not bars: the axis need not start at zero, and at other scales the two are not one task."""
    for i, row in enumerate(rows):
        cell = row.cells[column]
        colour = colours.get(row.name, "#1f77b4")
        if cell.reported is not None:
            ax.plot(
                cell.reported,
                i,
                "D",
                mfc="none",
                mec="#444444",
                markersize=7,
                label="reported (paper)" if i == 0 else None,
            )
        if cell.reproduced is not None:
            ax.errorbar(
                cell.reproduced,
                i,
                xerr=cell.std or 0.0,
                fmt="o",
                color=colour,
                capsize=3,
                markersize=6,
                label=f"reproduced ({view.scale}, mean ± std)" if i == 0 else None,
            )
        seeds = _per_seed(row, column)
        ax.plot(seeds, [i + 0.22] * len(seeds), ".", color=colour, markersize=3, alpha=0.8)
    ax.set_yticks(range(len(rows)), [r.name for r in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.7)
    unit = view.spec.column(column).unit
    ax.set_title(f"{column}" + (f" [{unit}]" if unit else ""), fontsize=10)
    ax.grid(alpha=0.3)


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
        colour = {"holds": "#2ca02c", "reversed": "#d62728"}.get(judged.verdict, "#1f77b4")
        if judged.ci_low is not None and judged.ci_high is not None and math.isfinite(judged.ci_low):
            ax.plot([judged.ci_low, judged.ci_high], [i, i], "-", color=colour, linewidth=2)
        ax.plot(judged.margin, i, "o", color=colour, markersize=6)
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(claims)), [f"{c.text} — {j.verdict}" for j, c in claims], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(
        f"margin in the claimed direction (points): ● {view.scale}, {CONFIDENCE:.0%} interval; ◆ paper", fontsize=8
    )
    ax.set_title(
        "the paper's claims, judged at the Holm-adjusted level within the table "
        "(green: holds, red: reversed, blue: equivalent, underpowered or not judged)",
        fontsize=10,
    )
    ax.grid(axis="x", alpha=0.3)


def _curves(ax, curves: dict[str, dict[int, list]], colours: dict[str, str]) -> None:
    for name, seeds in curves.items():
        for k, (_seed, points) in enumerate(sorted(seeds.items())):
            steps, losses = zip(*points)
            ax.plot(
                steps,
                losses,
                color=colours.get(name, "#7f7f7f"),
                linewidth=1,
                alpha=0.8,
                label=name if k == 0 else None,
            )
    if all(loss > 0 for seeds in curves.values() for points in seeds.values() for _, loss in points):
        ax.set_yscale("log")
    ax.set_xlabel("step", fontsize=8)
    ax.set_ylabel("training loss", fontsize=8)
    ax.set_title(
        "training curves of the runs on this machine (each unit's train.jsonl, one line per seed), "
        "not the committed records above",
        fontsize=10,
    )
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
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
    """The image's boxes, each filled in proportion to the attention it receives; beside it, that head (or the
    heads' mean) over every layer. Returns the line that describes the drawn map."""
    require_matplotlib()
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    from repro.utils import atomic_open

    if out.suffix.lower() not in SUFFIXES:
        raise ReproError(f"-o {out}: a plot is written as {', '.join(SUFFIXES)}")
    name, chosen, weights, what = pick(maps, name, layer, head)
    fig = Figure(figsize=(12, 5.2), layout="constrained")
    scene, grid = fig.subplots(1, 2, width_ratios=[1.5, 1])
    width, height = maps.image_size
    scene.add_patch(Rectangle((0, 0), width, height, facecolor="#f4f4f4", edgecolor="black"))
    from matplotlib import colormaps

    top = float(chosen.max()) or 1.0
    for k, (x1, y1, x2, y2) in enumerate(maps.boxes):  # the same colour scale as the grid: 0 to the largest
        colour = colormaps["Reds"](float(chosen[k]) / top)
        scene.add_patch(Rectangle((x1, y1), x2 - x1, y2 - y1, facecolor=colour, alpha=0.75, edgecolor="black"))
        scene.text(x1 + 3, y1 + 3, f"{maps.box_labels[k]} {chosen[k]:.2f}", fontsize=8, va="top")
    scene.set_xlim(0, width)
    scene.set_ylim(height, 0)  # image coordinates: y grows downwards
    scene.set_aspect("equal")
    gold = f" (annotators: {maps.gold})" if maps.gold else ""
    scene.set_title(_wrap(f"{maps.question} → {maps.answer}{gold}", 80), fontsize=10)
    scene.set_xlabel(what, fontsize=9)

    per_layer = weights.mean(axis=1) if head is None else weights[:, head]
    image = grid.imshow(per_layer, aspect="auto", cmap="Reds", vmin=0, vmax=float(per_layer.max()) or 1.0)
    grid.set_xticks(range(len(maps.box_labels)), maps.box_labels, fontsize=8)
    grid.set_yticks(range(per_layer.shape[0]), [str(i + 1) for i in range(per_layer.shape[0])], fontsize=8)
    grid.set_ylabel("layer", fontsize=9)
    grid.set_title(f"{name}: " + ("mean of heads" if head is None else f"head {head}"), fontsize=10)
    fig.colorbar(image, ax=grid, shrink=0.8)
    with atomic_open(out, "wb") as handle:
        fig.savefig(handle, format=out.suffix.lower().lstrip("."), dpi=110)
    return what


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
