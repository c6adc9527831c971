"""Released checkpoints into this project's models: one strict load and its key report.

A family's key map (`families/<name>/keymap.py`) turns an official state dict into a `Conversion`: for every
official key, the key(s) of ours it fills (with the reshape or split named), or the reason it is deliberately
dropped. `strict_load` then loads everything or nothing: an official key with no place (a renamed key), a key of
ours that nothing fills (a missing key) unless the family allows it to keep its initial value, a shape that
differs, or two different values for keys that are one tensor here (tied weights) is one `ReproError` line naming
the key, and the model is left as it was. `read_state_dict` reads the file
(a truncated or unreadable file is one line naming the file). The `KeyReport` lists placed, reshaped, missing and
unexpected (dropped) keys in one table.
"""

from __future__ import annotations

import pickle
import re
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from repro.errors import ReproError


@dataclass(frozen=True)
class Placed:
    """One tensor of ours filled from an official key; `change` names any reshape, split or resize ('' = none)."""

    target: str
    value: torch.Tensor
    change: str = ""


@dataclass
class Conversion:
    """An official state dict in our names: official key -> what it fills; official key -> why it is dropped."""

    placed: dict[str, list[Placed]] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)

    def put(self, source: str, target: str, value: torch.Tensor, change: str = "") -> None:
        self.placed.setdefault(source, []).append(Placed(target, value, change))

    def drop(self, source: str, reason: str) -> None:
        self.dropped[source] = reason

    def state(self) -> dict[str, torch.Tensor]:
        return {p.target: p.value for places in self.placed.values() for p in places}


@dataclass
class KeyReport:
    """What a load did, one row per key: placed, reshaped, missing (ours, kept as initialised), unexpected (the
    checkpoint's, dropped for the reason given)."""

    source: str
    placed: list[tuple[str, str]] = field(default_factory=list)  # (official, ours)
    reshaped: list[tuple[str, str, str]] = field(default_factory=list)  # (official, ours, what was done)
    missing: list[str] = field(default_factory=list)
    unexpected: list[tuple[str, str]] = field(default_factory=list)  # (official, why dropped)

    # the names the ALBEF loader used before the shared report
    @property
    def new(self) -> list[str]:
        return list(self.missing)

    @property
    def dropped(self) -> list[str]:
        return [key for key, _ in self.unexpected]

    def rows(self) -> list[tuple[str, str, str, str]]:
        """(status, official key, our key, note), in that order of statuses."""
        out = [("placed", src, dst, "") for src, dst in self.placed]
        out += [("reshaped", src, dst, note) for src, dst, note in self.reshaped]
        out += [("missing", "", dst, "kept as initialised") for dst in self.missing]
        out += [("unexpected", src, "", why) for src, why in self.unexpected]
        return out

    def counts(self) -> dict[str, int]:
        return {
            "placed": len(self.placed),
            "reshaped": len(self.reshaped),
            "missing": len(self.missing),
            "unexpected": len(self.unexpected),
        }

    def as_json(self) -> dict:
        return {
            "source": self.source,
            "counts": self.counts(),
            "keys": [dict(zip(("status", "official", "ours", "note"), row, strict=True)) for row in self.rows()],
        }


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def read_state_dict(path: str | Path, keys: Sequence[str] = ()) -> dict[str, torch.Tensor]:
    """The state dict in a checkpoint file: under the first of `keys` the file has (the official wrapper: "model",
    "state_dict", ...), or the file itself when it is a plain state dict. Tensors and plain containers only."""
    path = Path(path)
    if not path.is_file():
        raise ReproError(f"{path}: no such checkpoint file")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError, zipfile.BadZipFile) as exc:
        raise ReproError(f"{path}: not a readable PyTorch checkpoint ({_describe(exc)})") from None
    if not isinstance(data, dict):
        raise ReproError(f"{path}: holds a {type(data).__name__}, not a dict")
    state = next((data[k] for k in keys if k in data), data)
    if not isinstance(state, dict) or not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
        wrapped = " or ".join(repr(k) for k in keys)
        raise ReproError(f"{path}: no state dict of tensors" + (f" (expected under {wrapped})" if keys else ""))
    return state


def rename(key: str, rules: Iterable[tuple[str, str]]) -> str | None:
    """`key` through the first rule whose pattern matches it whole (`re.fullmatch`, then `expand`); None if none."""
    for pattern, replacement in rules:
        match = re.fullmatch(pattern, key)
        if match:
            return match.expand(replacement)
    return None


def convert_by_rules(official: Mapping[str, torch.Tensor], rules: Iterable[tuple[str, str]], what: str) -> Conversion:
    """A conversion that is a plain renaming: every key through `rules`; a key no rule matches is refused."""
    rules = list(rules)
    conversion = Conversion()
    for key, value in official.items():
        target = rename(key, rules)
        if target is None:
            raise ReproError(f"{what}: unexpected key {key} (no rule of the key map places it)")
        conversion.put(key, target, value)
    return conversion


def check(
    model: nn.Module,
    conversion: Conversion,
    source: str,
    may_stay_initial: Callable[[str], bool] = lambda key: False,
) -> tuple[dict[str, torch.Tensor], KeyReport]:
    """The full state dict `model` would have after the load, and the report; refuses (ReproError, one line naming
    the key) a target that is not ours, a target filled twice, a wrong shape or dtype kind, or a key of ours that
    nothing fills and that may not keep its initial value."""
    ours = model.state_dict()
    report = KeyReport(source)
    full = dict(ours)
    seen: dict[str, str] = {}
    for src, places in conversion.placed.items():
        for place in places:
            dst = place.target
            if dst not in ours:
                raise ReproError(f"{source}: unexpected key {src} (maps to {dst}, which this model does not have)")
            if dst in seen:
                raise ReproError(f"{source}: {dst} is filled by both {seen[dst]} and {src}")
            seen[dst] = src
            value = place.value
            if tuple(value.shape) != tuple(ours[dst].shape):
                raise ReproError(
                    f"{source}: {src} has shape {tuple(value.shape)}, this model's {dst} {tuple(ours[dst].shape)}"
                )
            if value.is_floating_point() != ours[dst].is_floating_point():
                raise ReproError(f"{source}: {src} is {value.dtype}, this model's {dst} {ours[dst].dtype}")
            full[dst] = value.to(ours[dst].dtype)
            if place.change:
                report.reshaped.append((src, dst, place.change))
            else:
                report.placed.append((src, dst))
    for src in conversion.dropped:
        if src in conversion.placed:
            raise ReproError(f"{source}: {src} is both placed and dropped by the key map")
    report.unexpected = sorted(conversion.dropped.items())
    _check_tied(model, full, seen, source)
    for dst in ours:
        if dst not in seen:
            if not may_stay_initial(dst):
                raise ReproError(f"{source}: missing key for {dst} (the checkpoint has nothing the key map puts there)")
            report.missing.append(dst)
    return full, report


def _check_tied(model: nn.Module, full: dict[str, torch.Tensor], seen: dict[str, str], source: str) -> None:
    """Keys of ours that are one tensor (tied weights: a decoder and its embeddings, NLVR2's shared cross-attention
    key and value) must receive equal values; otherwise the load would keep whichever came last."""
    groups: dict[int, list[str]] = {}
    for name, tensor in [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]:
        groups.setdefault(id(tensor), []).append(name)
    for names in groups.values():
        filled = [name for name in names if name in seen and name in full]
        for name in filled[1:]:
            if not torch.equal(full[name], full[filled[0]]):
                raise ReproError(
                    f"{source}: {seen[filled[0]]} and {seen[name]} differ, but this model's {filled[0]} and {name} "
                    "are one tensor (tied)"
                )


def strict_load(
    model: nn.Module,
    conversion: Conversion,
    source: str,
    may_stay_initial: Callable[[str], bool] = lambda key: False,
) -> KeyReport:
    """Load `conversion` into `model`, everything or nothing (see `check`); the model is untouched on refusal."""
    full, report = check(model, conversion, source, may_stay_initial)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    try:
        model.load_state_dict(full, strict=True)
    except (RuntimeError, ValueError) as exc:  # not reached after `check`; restore rather than leave it half loaded
        model.load_state_dict(before, strict=True)
        raise ReproError(f"{source}: {_describe(exc)}") from None
    return report


def render_report(report: KeyReport, console=None, show_placed: bool = True) -> None:
    """The key report as one rich table (and a line of counts)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title=f"key report: {report.source}")
    for column in ("status", "official key", "this project's key", "note"):
        table.add_column(column)
    for row in report.rows():
        if row[0] == "placed" and not show_placed:
            continue
        table.add_row(*row)
    console.print(table)
    console.print(", ".join(f"{n} {status}" for status, n in report.counts().items()))


@dataclass(frozen=True)
class Released:
    """One released checkpoint: the URL as the official README gives it (None where the reference notes give
    none), its size and sha256 only where published."""

    name: str
    family: str
    layout: str
    rows: str
    url: str | None
    size: str | None = None
    sha256: str | None = None
    cells: tuple[tuple[str, str], ...] = ()  # (spec id, row) it fills with `repro run ID --rows ROW --weights released`
    model: tuple[tuple[str, object], ...] = ()  # the network its layout is (a `model:` mapping), for a cited row


_ALBEF = "https://storage.googleapis.com/sfr-pcl-data-research/ALBEF/"
RELEASED: tuple[Released, ...] = (
    Released("ALBEF_4M.pth", "ace-rpe", "albef", "ALBEF rows, init: albef (4M pre-training)", _ALBEF + "ALBEF_4M.pth"),
    Released("ALBEF.pth", "ace-rpe", "albef", "ALBEF rows, init: albef (14M pre-training)", _ALBEF + "ALBEF.pth"),
    Released("flickr30k.pth", "ace-rpe", "albef", "ALBEF Flickr30K retrieval", _ALBEF + "flickr30k.pth"),
    Released("mscoco.pth", "ace-rpe", "albef", "ALBEF MSCOCO retrieval", _ALBEF + "mscoco.pth"),
    Released("vqa.pth", "ace-rpe", "albef", "ALBEF VQA", _ALBEF + "vqa.pth"),
    Released(
        "pretrain_model_nlvr.pth",
        "ace-rpe",
        "albef",
        "ALBEF NLVR2 (TA pre-training)",
        _ALBEF + "pretrain_model_nlvr.pth",
    ),
    Released(
        "mcan-small",
        "mcan-pa",
        "mcan-vqa",
        "mcan-pa Table III MCAN",
        None,
        cells=(("mcan-pa-table3-vqa2", "MCAN"),),
        model=(("arch", "mcan"),),
    ),
    Released(  # mmf's m4c.textvqa.defaults: 4 layers, Rosetta-en OCR, ResNet-101 features, no ST-VQA, greedy
        "m4c",
        "sa-m4c",
        "mmf",
        "sa-m4c Table 1 M4C",
        None,
        cells=(("sa-m4c-table1-textvqa", "4 M4C"),),
        model=(
            ("arch", "m4c"),
            ("normal_layers", 4),
            ("ocr", "rosetta-en"),
            ("det_backbone", "resnet-101"),
            ("with_stvqa", False),
            ("beam", 1),
            ("input_norm_eps", 1e-5),
        ),
    ),
    # sam-textvqa's released model: configs/train-tvqa_stvqa-eval-tvqa-c3.yml (2N->4S, TextVQA + ST-VQA, greedy)
    Released(
        "sa-m4c",
        "sa-m4c",
        "sam-textvqa",
        "sa-m4c Table 1 SA-M4C",
        None,
        cells=(("sa-m4c-table1-textvqa", "12 SA-M4C (ours)"),),
    ),
)


WEIGHTS_FOLDER = "weights"  # results/weights/<source>/<paper>/<id>/: numbers of released or given weights


def released_for(spec_id: str, row: str) -> Released | None:
    """The released checkpoint that fills (spec, row), if any."""
    return next((r for r in RELEASED if (spec_id, row) in r.cells), None)


def released_path(released: Released) -> Path:
    """Where a released checkpoint is read from: `$REPRO_DATA_DIR/released-weights/<name>`."""
    from repro.paths import data_dir

    return data_dir() / "released-weights" / released.name


@dataclass(frozen=True)
class WeightsSource:
    """Where a `repro run --weights` unit's weights come from: a released checkpoint (`released` set) or a
    user's file in an official layout; `sha256` is the file's digest, computed when the run reads it."""

    path: Path
    released: Released | None = None
    sha256: str = ""

    @property
    def name(self) -> str:
        return self.released.name if self.released is not None else self.path.name

    @property
    def label(self) -> str:
        """`released`, or the file as given: what the record's `weights` says."""
        return "released" if self.released is not None else str(self.path)

    def folder(self) -> str:
        """The results folder of these numbers under results/weights/: `released`, or `<file>@<sha256[:8]>`."""
        if self.released is not None:
            return "released"
        return re.sub(r"[^A-Za-z0-9._@+-]+", "_", f"{self.path.stem}@{self.sha256[:8]}")

    def results_root(self) -> Path:
        from repro.paths import results_dir

        return results_dir() / WEIGHTS_FOLDER / self.folder()

    def with_digest(self) -> WeightsSource:
        """The source with its file's sha256 (a missing file is one line saying where to put it); a released
        checkpoint whose digest is published must match it."""
        from repro.utils import sha256_file

        if not self.path.is_file():
            where = f" ({self.released.url})" if self.released is not None and self.released.url else ""
            raise ReproError(f"{self.path}: no such checkpoint file; put {self.name}{where} there")
        digest = sha256_file(self.path)
        if self.released is not None and self.released.sha256 and digest != self.released.sha256:
            raise ReproError(f"{self.path}: sha256 {digest} is not the published {self.released.sha256}")
        return WeightsSource(self.path, self.released, digest)

    def record(self) -> dict[str, str]:
        """What a record keeps: the source (`released` or the file), the checkpoint's name and sha256."""
        return {"weights": self.label, "checkpoint": self.name, "sha256": self.sha256}


def weights_source(option: str, spec_id: str, row: str) -> WeightsSource:
    """`--weights released` (the row's released checkpoint) or `--weights FILE`; a row with nothing released is
    one line naming what is."""
    if option == "released":
        released = released_for(spec_id, row)
        if released is None:
            cells = ", ".join(f"{s} --rows {r}" for entry in RELEASED for s, r in entry.cells)
            raise ReproError(f"{spec_id} row {row!r}: no released checkpoint fills it (those that do: {cells})")
        return WeightsSource(released_path(released), released)
    return WeightsSource(Path(option).expanduser().absolute())


def with_weights_rows(spec, rows: list[str], option: str):
    """The spec with each named row that is cited (shown, never trained here) given the network of the checkpoint
    that fills it (its released entry's `model`): `--weights` evaluates the authors' network, so such a row runs."""
    import dataclasses

    from repro.families import config_classes

    changed = []
    for row in spec.rows:
        released = released_for(spec.id, row.name) if row.name in rows or row.slug in rows else None
        if released is not None and row.cited is not None and released.model:
            model = dict(released.model)
            config = config_classes()[model["arch"]].model_validate(model)
            row = dataclasses.replace(row, cited=None, model=model, config=config)
        elif (row.name in rows or row.slug in rows) and row.cited is not None and option != "released":
            raise ReproError(
                f"row {row.name!r} of {spec.id} is cited from {row.cited}: only its released checkpoint fills it "
                "(--weights released)"
            )
        changed.append(row)
    return dataclasses.replace(spec, rows=tuple(changed))
