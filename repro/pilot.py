"""What the families' pilots share (`python -m repro.families.<family>.pilot`): a pilot trains a row's seeds on a
spec's synthetic task with extra train items held out, scores them every few epochs (never the evaluation split),
and prints one JSON line per evaluation and a summary per unit, so that a schedule is chosen before a table runs.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
from typing import Any

from repro.errors import ReproError
from repro.utils import yaml_value

SECTIONS = ("generator", "recipe", "sizes")


def apply_overrides(
    settings: dict[str, Any], overrides: list[str], sections: tuple[str, ...] = SECTIONS
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a copy of a scale's settings with each `section.key[.key]=value` set, the `model.key=value` settings where
    `sections` has "model"). Values read as YAML 1.2, as the specs are."""
    out, model_settings = copy.deepcopy(settings), {}
    for item in overrides:
        key, sep, text = item.partition("=")
        path = key.split(".")
        if not sep or path[0] not in sections or len(path) < 2:
            raise ReproError(f"pilot: {item!r} is not SECTION.KEY=VALUE with SECTION one of {', '.join(sections)}")
        value = yaml_value(text, f"pilot override {key}")
        if path[0] == "model":
            model_settings[".".join(path[1:])] = value
            continue
        node = out.setdefault(path[0], {})
        for part in path[1:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[path[-1]] = value
    return out, model_settings


def with_heldout(settings: dict[str, Any], key: str, extra: int) -> dict[str, Any]:
    """The settings with `extra` more `generator[key]` items: the generator draws the spec's own first, so the extra
    ones are items the spec's runs never see, held out for the pilot's curve."""
    generator = settings["generator"]
    return {**settings, "generator": {**generator, key: int(generator[key]) + extra}}


def heldout_data(spec, overrides: list[str], key: str, extra: int, prepare_data) -> tuple[int, dict[str, Any], Any]:
    """A pilot's data: the count of the spec's own `generator[key]` items (its synthetic settings, `overrides`
    applied), those settings with `extra` more held out (`with_heldout`), and what `prepare_data` makes of them."""
    settings, _ = apply_overrides(spec.scales["synthetic"], overrides)
    enlarged = with_heldout(settings, key, extra)
    return int(settings["generator"][key]), enlarged, prepare_data(spec, "synthetic", enlarged)


def last_quarter(epochs: list[int], values: list[float]) -> tuple[float, float]:
    """How a curve moves over the last quarter of training, from the last evaluation at or before 3/4 of the last
    epoch to the last one: (the net change, last less first; the range, largest less smallest)."""
    if not values:
        return float("nan"), float("nan")
    tail = values[max(_up_to_three_quarters(epochs) - 1, 0) :]
    return tail[-1] - tail[0], max(tail) - min(tail)


def last_quarter_gain(epochs: list[int], values: list[float]) -> float:
    """Whether a curve still improves: the best evaluation after 3/4 of the last epoch less the best one at or before
    it (negative when the last quarter stays below an earlier peak; nan without an evaluation on either side)."""
    before = _up_to_three_quarters(epochs) if values else 0
    if not 0 < before < len(values):
        return float("nan")
    return max(values[before:]) - max(values[:before])


def _up_to_three_quarters(epochs: list[int]) -> int:
    """How many of the evaluations (at `epochs`, in order) come at or before 3/4 of the last epoch."""
    return sum(1 for e in epochs if e <= 0.75 * epochs[-1])


def cpu_seconds() -> float:
    """This process's user + system CPU time."""
    times = os.times()
    return times.user + times.system


def print_line(line: dict[str, Any]) -> None:
    """One JSON line on stdout, as it is made."""
    print(json.dumps(line, sort_keys=True), flush=True)


def parser(prog: str, doc: str | None, seeds: str) -> argparse.ArgumentParser:
    """The arguments every pilot takes: the spec, --rows, --seeds, --every, --cpu-threads and SECTION.KEY=VALUE
    overrides; a family adds its own (how many items to hold out, its tasks)."""
    out = argparse.ArgumentParser(prog=prog, description=(doc or "").split("\n")[0])
    out.add_argument("spec")
    out.add_argument("--rows", default="", help="comma-separated rows (none: only generate the data)")
    out.add_argument("--seeds", default=seeds)
    out.add_argument("--every", type=int, default=1, help="epochs between held-out evaluations")
    out.add_argument("--cpu-threads", type=int, default=None)
    out.add_argument("overrides", nargs="*")
    return out


def images_main(prog: str, doc: str | None, seeds: str, run_pilot, argv: list[str] | None) -> int:
    """`main` of a pilot that holds out extra train scenes: `--heldout-images` (500), an evaluation every 2 epochs
    unless `--every` says otherwise, at least one row, one thread; then `run_pilot(spec, rows, seeds, heldout_images,
    every, overrides, emit)`."""
    out = parser(prog, doc, seeds=seeds)
    out.add_argument("--heldout-images", type=int, default=500)
    out.set_defaults(every=2)

    def run(args) -> None:
        rows = [r.strip() for r in names(args.rows) if r.strip()]
        if not rows or args.heldout_images < 1:
            raise ReproError("pilot: --rows names at least one row and --heldout-images is at least 1")
        run_pilot(args.spec, rows, seed_list(args.seeds), args.heldout_images, args.every, args.overrides, print_line)

    return run_main(out, argv, run, threads=1)


def names(text: str) -> list[str]:
    """`a,b` as ["a", "b"], empty parts left out."""
    return [part for part in text.split(",") if part]


def seed_list(text: str) -> list[int]:
    try:
        return [int(s) for s in names(text)]
    except ValueError:
        raise ReproError(f"pilot: --seeds {text!r} is not comma-separated whole numbers") from None


def run_main(parser: argparse.ArgumentParser, argv: list[str] | None, run, threads: int | None = None) -> int:
    """Parse `argv`, set torch's threads (--cpu-threads, else `threads`), call `run(args)`; a ReproError is one line
    on stderr and exit code 2."""
    import sys

    args = parser.parse_intermixed_args(argv)
    threads = args.cpu_threads or threads
    if threads:
        import torch

        torch.set_num_threads(threads)
    try:
        if args.every < 1:
            raise ReproError("pilot: --every must be at least 1")
        run(args)
    except ReproError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
