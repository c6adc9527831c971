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

import dataclasses
import pickle
import re
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from repro.errors import ReproError
from repro.train.checkpoint import unusable_values


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
            problem = unusable_values(src, value, ours[dst].dtype)
            if problem:
                raise ReproError(f"{source}: {problem}; refused (a model holding it scores nothing meaningful)")
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


# --- released checkpoints ------------------------------------------------------------------------

CHECKPOINT_SUFFIXES = (".ckpt", ".pth", ".pt")  # mmf's zoo loader: the one file of these an archive unpacks


@dataclass(frozen=True)
class Released:
    """One released checkpoint. Where it comes from is the catalog's (`repro/catalog/datasets.yaml`, the same
    download rules as the datasets): `dataset` is the entry it downloads with, `file` that entry's file (default:
    `name`); a checkpoint released as an archive is the one file of `CHECKPOINT_SUFFIXES` the archive unpacks.
    `cells`: (spec id, row, part) it fills with `repro run ID --rows ROW --weights released`, where part is the
    data set of the columns it fills ('' = the whole row); `model`: the network its layout is (a `model:`
    mapping), for a cited row."""

    name: str
    family: str
    layout: str
    rows: str
    dataset: str
    file: str = ""
    cells: tuple[tuple[str, str, str], ...] = ()
    model: tuple[tuple[str, object], ...] = ()
    note: str = ""

    @property
    def file_name(self) -> str:
        return self.file or self.name

    def catalog(self, catalog: dict | None = None):
        """(the catalog's dataset entry, its file entry) this checkpoint downloads with (`catalog`: one already
        loaded, for many look-ups)."""
        from repro.data.catalog import get_dataset, load_catalog

        entry = get_dataset(self.dataset, load_catalog() if catalog is None else catalog)
        for f in entry.files:
            if f.name == self.file_name:
                return entry, f
        raise ReproError(f"catalog entry {self.dataset} has no file {self.file_name} (released checkpoint {self.name})")

    @property
    def url(self) -> str | None:
        urls = self.catalog()[1].urls
        return urls[0] if urls else None


_ALBEF_14M = (("arch", "albef"), ("position_embedding", "none"), ("init", "albef"), ("pretrain", "14m"))
_FINE_TUNED = (
    "ALBEF's README does not say which pre-training its fine-tuned files start from; they fill the 14M row, the "
    "setting of ALBEF's best reported numbers"
)


def _albef(name: str, rows: str, cell: tuple[str, str, str] | None = None) -> Released:
    """One of ALBEF's seven released files (catalog entry albef-checkpoints); a fine-tuned one fills `cell` of the
    ALBEF (14M) row."""
    if cell is None:
        return Released(name, "ace-rpe", "albef", rows, "albef-checkpoints")
    return Released(
        name, "ace-rpe", "albef", rows, "albef-checkpoints", cells=(cell,), model=_ALBEF_14M, note=_FINE_TUNED
    )


RELEASED: tuple[Released, ...] = (
    _albef("ALBEF_4M.pth", "ALBEF rows, init: albef (4M pre-training)"),
    _albef("ALBEF.pth", "ALBEF rows, init: albef (14M pre-training)"),
    _albef(
        "flickr30k.pth",
        "ace-rpe Table 3 ALBEF (14M), Flickr30K columns",
        ("ace-rpe-table3-sota", "ALBEF (14M)", "flickr30k"),
    ),
    _albef(
        "mscoco.pth",
        "ace-rpe Table 3 ALBEF (14M), MS-COCO columns",
        ("ace-rpe-table3-sota", "ALBEF (14M)", "coco-retrieval"),
    ),
    _albef(
        "vqa.pth",
        "ace-rpe Table 4 ALBEF (14M), VQA columns (no SNLI-VE or NLVR2 fine-tuned checkpoint is released)",
        ("ace-rpe-table4-sota", "ALBEF (14M)", "vqa2"),
    ),
    _albef("refcoco.pth", "ALBEF RefCOCO+ grounding"),
    _albef("pretrain_model_nlvr.pth", "ALBEF NLVR2 (TA pre-training, before NLVR2 fine-tuning)"),
    Released(  # mcan-vqa's README: ckpts/ckpt_small/epoch13.pkl behind interactive share links
        "mcan-small",
        "mcan-pa",
        "mcan-vqa",
        "mcan-pa Table III MCAN",
        "mcan-small",
        file="epoch13.pkl",
        cells=(("mcan-pa-table3-vqa2", "MCAN", ""),),
        model=(("arch", "mcan"),),
    ),
    Released(  # mmf's zoo m4c.textvqa.alone: 4 layers, Rosetta-en OCR, ResNet-101 features, no ST-VQA, greedy
        "m4c",
        "sa-m4c",
        "mmf",
        "sa-m4c Table 1 M4C",
        "m4c-textvqa-alone",
        file="m4c.textvqa.alone.tar.gz",
        cells=(("sa-m4c-table1-textvqa", "4 M4C", ""),),
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
    # VL-BERT's pre-training (cfgs/pretrain/*_prec_*.yaml): the start of its VQA fine-tuning, no VQA classifier
    Released(
        "vl-bert-base-prec.model",
        "mcan-pa",
        "vl-bert",
        "mcan-pa Table IV VL-BERT_BASE, init: vl-bert-base (VL-BERT's pre-training; fine-tuned, not evaluated)",
        "vl-bert-base-prec",
    ),
    Released(
        "vl-bert-large-prec.model",
        "mcan-pa",
        "vl-bert",
        "VL-BERT_LARGE rows, init: vl-bert-large (VL-BERT's pre-training; fine-tuned, not evaluated)",
        "vl-bert-large-prec",
    ),
    # sam-textvqa's released model: configs/train-tvqa_stvqa-eval-tvqa-c3.yml (2N->4S, TextVQA + ST-VQA, greedy)
    Released(
        "sa-m4c",
        "sa-m4c",
        "sam-textvqa",
        "sa-m4c Table 1 SA-M4C",
        "sam-textvqa-model",
        file="best_model.tar",
        cells=(("sa-m4c-table1-textvqa", "12 SA-M4C (ours)", ""),),
    ),
)


def released_named(name: str) -> Released:
    """The released checkpoint called `name` (`repro weights ls`), or one line naming those there are."""
    for released in RELEASED:
        if released.name == name:
            return released
    raise ReproError(f"no released checkpoint {name!r}; one of {', '.join(r.name for r in RELEASED)}")


def released_cells(spec_id: str, row: str) -> list[tuple[Released, str]]:
    """The released checkpoints that fill (spec, row), each with the part it fills ('' = the whole row)."""
    return [(r, part) for r in RELEASED for s, name, part in r.cells if (s, name) == (spec_id, row)]


def released_for(spec_id: str, row: str) -> Released | None:
    """The (first) released checkpoint that fills (spec, row), if any."""
    cells = released_cells(spec_id, row)
    return cells[0][0] if cells else None


def released_path(released: Released, catalog: dict | None = None) -> Path:
    """Where a released checkpoint is read from: its catalog file under `$REPRO_DATA_DIR/<dataset>/`, or for an
    archive the one checkpoint it unpacked there (a folder named after the archive while it is not unpacked)."""
    from repro.paths import data_dir

    _, entry = released.catalog(catalog)
    folder = data_dir() / released.dataset
    if not entry.extract:
        return folder / entry.name
    found = (
        sorted(p for p in folder.rglob("*") if p.suffix in CHECKPOINT_SUFFIXES and p.is_file())
        if folder.is_dir()
        else []
    )
    if len(found) > 1:
        names = ", ".join(str(p.relative_to(folder)) for p in found)
        raise ReproError(
            f"{folder}: {entry.name} unpacked several checkpoints ({names}); keep the one of {released.name}"
        )
    return found[0] if found else folder / re.sub(r"(\.tar\.gz|\.tgz|\.tar|\.zip)$", "", entry.name)


def released_state(released: Released, catalog: dict | None = None) -> str:
    """What is on disk of a released checkpoint: verified (against the sha256 the catalog publishes), recorded (no
    sha256 is published: the download recorded the one it found, nothing was checked), present, partial (a download
    under way) or missing."""
    from repro.data.download import dataset_status
    from repro.paths import data_dir

    entry, f = released.catalog(catalog)
    status = dataset_status(dataclasses.replace(entry, files=(f,)), data_dir())[0].state
    if f.extract and status in ("verified", "present") and not released_path(released, catalog).is_file():
        return "downloaded, not unpacked"
    return "recorded" if status == "verified" and not f.sha256 else status


def download_released(released: Released, verify: bool = False, **fetch) -> str:
    """Fetch and verify a released checkpoint (and unpack an archive) with the datasets' downloader
    (`repro.data.download`: resume, retries, deadline, the catalog's sha256 or size); its sha256."""
    from repro.data.download import download_dataset
    from repro.paths import data_dir

    entry, f = released.catalog()
    return download_dataset(dataclasses.replace(entry, files=(f,)), data_dir(), verify=verify, **fetch)[f.name]


# --- the weights of one `repro run --weights` row ----------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a row: a released one (`released` set) or a user's file in an official layout; `part`
    the data set of the columns it fills ('' = the whole row); `sha256` computed when the run reads it."""

    path: Path
    released: Released | None = None
    part: str = ""
    sha256: str = ""

    @property
    def name(self) -> str:
        return self.released.name if self.released is not None else self.path.name

    def with_digest(self) -> Checkpoint:
        """The checkpoint with its file's sha256 (a missing file is one line saying how to get it); a released
        checkpoint whose digest the catalog gives must match it."""
        from repro.utils import sha256_file

        if not self.path.is_file():
            if self.released is not None:
                raise ReproError(
                    f"{self.path}: no such checkpoint file; get it with `repro weights download {self.name}`"
                )
            raise ReproError(f"{self.path}: no such checkpoint file")
        digest = sha256_file(self.path)
        if self.released is not None:
            _, entry = self.released.catalog()
            if entry.sha256 and not entry.extract and not entry.digest_matches(digest):
                raise ReproError(f"{self.path}: sha256 {digest} is not the catalog's {entry.sha256}")
        return dataclasses.replace(self, sha256=digest)

    def record(self) -> dict[str, str]:
        out = {"checkpoint": self.name, "sha256": self.sha256}
        return {"columns": self.part, **out} if self.part else out


@dataclass(frozen=True)
class WeightsSource:
    """Where a `repro run --weights` row's weights come from: one checkpoint for the whole row, or one per part
    (the data set of a group of its columns: ace-rpe Table 3's Flickr30K and MS-COCO); `empty` the parts that no
    checkpoint covers (their columns stay empty)."""

    checkpoints: tuple[Checkpoint, ...]
    empty: tuple[str, ...] = ()

    @property
    def whole(self) -> Checkpoint:
        """The one checkpoint of a row that has one (mcan-pa, sa-m4c); refused for a row of several."""
        if len(self.checkpoints) != 1 or self.checkpoints[0].part:
            raise ReproError(f"{self.label}: a checkpoint per column group, not one for the row")
        return self.checkpoints[0]

    @property
    def path(self) -> Path:
        return self.whole.path

    @property
    def released(self) -> Released | None:
        return self.whole.released

    @property
    def sha256(self) -> str:
        return self.whole.sha256

    @property
    def name(self) -> str:
        return ", ".join(c.name for c in self.checkpoints)

    @property
    def is_released(self) -> bool:
        return all(c.released is not None for c in self.checkpoints)

    @property
    def label(self) -> str:
        """`released`, or the file(s) as given: what the record's `weights` says."""
        if self.is_released:
            return "released"
        return ", ".join(f"{c.part}={c.path}" if c.part else str(c.path) for c in self.checkpoints)

    def for_part(self, part: str) -> Checkpoint | None:
        """The checkpoint that fills the columns of `part` (the row's one checkpoint if it has one), or None."""
        return next((c for c in self.checkpoints if c.part in (part, "")), None)

    def folder(self) -> str:
        """The results folder of these numbers under results/weights/: `released`, or `<file>@<sha256[:8]>`
        (joined by `+` for several files)."""
        if self.is_released:
            return "released"
        names = "+".join(f"{c.path.stem}@{c.sha256[:8]}" for c in self.checkpoints)
        return re.sub(r"[^A-Za-z0-9._@+-]+", "_", names)

    def results_root(self, scale: str | None = None) -> Path:
        """`<results>/weights/<source>/`, in the folder of `scale`'s records (smoke: the scratch folder)."""
        from repro.paths import WEIGHTS_FOLDER, results_dir

        return results_dir(scale) / WEIGHTS_FOLDER / self.folder()

    def with_digest(self) -> WeightsSource:
        return WeightsSource(tuple(c.with_digest() for c in self.checkpoints), self.empty)

    def record(self) -> dict:
        """What a record keeps: the source (`released` or the file(s)); one checkpoint's name and sha256, or per
        part its columns, name and sha256, with the parts left empty."""
        if len(self.checkpoints) == 1 and not self.checkpoints[0].part and not self.empty:
            return {"weights": self.label, **self.checkpoints[0].record()}
        return {"weights": self.label, "checkpoints": [c.record() for c in self.checkpoints], "empty": list(self.empty)}


def row_parts(spec) -> tuple[str, ...]:
    """The parts of a spec's rows that separate checkpoints may fill: the data sets of its columns when there are
    several (ace-rpe Table 3: flickr30k, coco-retrieval); ('',), the whole row, otherwise."""
    parts = tuple(dict.fromkeys(c.dataset for c in spec.columns if c.dataset))
    return parts if len(parts) > 1 else ("",)


def _part_named(word: str, parts: tuple[str, ...]) -> str | None:
    """The part `word` names (exactly, or as the start of one name only: `coco` for coco-retrieval), or None."""
    if word in parts:
        return word
    matches = [p for p in parts if p and p.startswith(word)]
    return matches[0] if len(matches) == 1 else None


def weights_source(options: str | tuple[str, ...] | list[str], spec, row: str) -> WeightsSource:
    """`--weights released` (the row's released checkpoint(s)), `--weights FILE` (a row of one part) or
    `--weights PART=FILE`, repeated (one file per column group: `--weights flickr30k=A.pth --weights coco=B.pth`);
    the parts not given stay empty. Bad input is one line naming what there is."""
    options = (options,) if isinstance(options, str) else tuple(options)
    parts = row_parts(spec)
    named = ", ".join(p for p in parts if p)
    if "released" in options:
        if len(options) > 1:
            raise ReproError("--weights released names every checkpoint of the row: give it alone")
        cells = released_cells(spec.id, row)
        if not cells:
            known = ", ".join(f"{s} --rows {r!r}" for entry in RELEASED for s, r, _ in entry.cells)
            raise ReproError(f"{spec.id} row {row!r}: no released checkpoint fills it (those that do: {known})")
        checkpoints = tuple(Checkpoint(released_path(r), r, part) for r, part in cells)
    else:
        given: dict[str, Path] = {}
        for option in options:
            word, _, rest = option.partition("=")
            part = _part_named(word, parts) if rest and parts != ("",) else None
            if part is None:
                if parts != ("",):
                    raise ReproError(
                        f"--weights {option}: {spec.id} has columns of several data sets ({named}); give a file per "
                        f"data set with --weights NAME=FILE (e.g. --weights {parts[0]}={option})"
                    )
                part, rest = "", option
            if part in given:
                raise ReproError(f"--weights: {part or 'the row'} given twice")
            given[part] = Path(rest).expanduser().absolute()
        checkpoints = tuple(Checkpoint(path, None, part) for part, path in given.items())
    covered = {c.part for c in checkpoints}
    empty = () if "" in covered else tuple(p for p in parts if p not in covered)
    return WeightsSource(checkpoints, empty)


def with_weights_rows(spec, rows: list[str], options: str | tuple[str, ...] | list[str]):
    """The spec with each named row that is cited (shown, never trained here) given the network of the checkpoint
    that fills it (its released entry's `model`): `--weights` evaluates the authors' network, so such a row runs."""
    from repro.families import config_classes

    options = (options,) if isinstance(options, str) else tuple(options)
    changed = []
    for row in spec.rows:
        named = row.name in rows or row.slug in rows
        released = released_for(spec.id, row.name) if named else None
        if released is not None and row.cited is not None and released.model:
            model = dict(released.model)
            config = config_classes()[model["arch"]].model_validate(model)
            row = dataclasses.replace(row, cited=None, model=model, config=config)
        elif named and row.cited is not None and options != ("released",):
            raise ReproError(
                f"row {row.name!r} of {spec.id} is cited from {row.cited}: only its released checkpoint fills it "
                "(--weights released)"
            )
        changed.append(row)
    return dataclasses.replace(spec, rows=tuple(changed))


# --- the plan of a `repro run --weights` ---------------------------------------------------------


def _where(checkpoint: Checkpoint) -> str:
    """Where a checkpoint is, or the download step that puts it there (with the catalog's size)."""
    if checkpoint.path.is_file():
        return f"{checkpoint.path} (present)"
    released = checkpoint.released
    if released is None:
        return f"{checkpoint.path} (missing: put it there)"
    entry, f = released.catalog()
    size = f.expected_bytes
    size_words = f"{size / 1e9:.2f} GB" if size else "size not published"
    if f.manual:
        return (
            f"missing: put {f.name} in {checkpoint.path.parent} by hand ({(entry.manual or '').strip()}), then "
            f"`repro weights download {released.name}` verifies it"
        )
    return f"download: `repro weights download {released.name}` ({f.urls[0]}, {size_words}) to {checkpoint.path}"


def plan_lines(plan, sources: dict[str, WeightsSource]) -> list[str]:
    """The plan of `repro run --weights`, one line each: every checkpoint and where it is (or its download), the
    columns no checkpoint fills, each row's GPU-hours of evaluation, the total, and the submit step."""
    from repro.run import format_hours
    from repro.submit.check import target_for

    lines, total = [], 0.0
    for step in plan.steps:
        source, hooks = sources[step.row.name], step.hooks
        if hooks is None or not hooks.supports_weights:
            raise ReproError(f"{plan.spec.id} row {step.row.name!r}: its family evaluates no given weights (--weights)")
        refusal = hooks.weights_refusal(step.row.config)
        if refusal:
            raise ReproError(f"{plan.spec.id} row {step.row.name!r}: {refusal}")
        for checkpoint in source.checkpoints:
            columns = f" for the {checkpoint.part} columns" if checkpoint.part else ""
            what = "released" if checkpoint.released is not None else "file"
            lines.append(f"{step.row.name}: weights {what} {checkpoint.name}{columns}: {_where(checkpoint)}")
        for part in source.empty:
            lines.append(f"{step.row.name}: no checkpoint for the {part} columns: they stay empty")
        hours = hooks.evaluation_hours(step.row.config, plan.spec) if hooks.evaluation_hours else None
        total += hours or 0.0
        scale = "" if plan.scale == "paper" else " (at paper scale)"
        lines.append(f"{step.row.name}: no training; evaluation ~{format_hours(hours)} GPU-hours{scale}")
    folder = "released" if all(s.is_released for s in sources.values()) else "<file>@<sha256>"
    lines.append(
        f"total: ~{total:.1f} GPU-hours of evaluation, no training; records go to results/weights/{folder}/ (never "
        "mixed with numbers trained here)"
    )
    target = target_for(plan.spec.datasets)
    if target is not None:
        lines.append(f"then: `repro submit` of each test-set file it writes to {target} (the run prints each command)")
    else:
        lines.append(f"then: nothing to submit: the {plan.spec.split} split is scored here")
    return lines
