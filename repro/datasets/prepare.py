"""`repro prepare NAME`: find the downloaded files, run the right preparation, skip what is current.

Outputs under `<data_dir>/prepared/`:
- `vqa2/`, `vqa1/`, `coco-qa/`                 questions, vocabularies, targets (repro.datasets.vqa)
- `features/<source>/<split>.store/`            feature stores (repro.data.store), where <source> is
  `bottom-up-36`, `bottom-up-adaptive` (from the TSVs) or `openvqa-features` (from the npz folders)
  and <split> `trainval`/`test2015` (TSV) or `train2014`/`val2014`/`test2015` (npz)
- `features/tgif-qa/{resnet,c3d}.store`         TGIF-QA frame features from PSAC's HDF5 files
  (repro.datasets.tgif_features; `--source` or `<data_dir>/tgif-qa-features`), after checking that the
  question files are in the TGIF-QA folder (repro.datasets.tgif)
- `gqa/`                                        GQA balanced questions, vocabularies, targets (repro.datasets.gqa)
- `features/gqa-features/{objects,spatial}.store/` GQA's released object and spatial (7 x 7 grid) features
- `depth-maps/<images folder>/`                  depth PNGs estimated by GLPN-NYU (repro.datasets.depth_estimation)
- `depth`: adds DSGANet depth histograms to an existing store (`--store`, maps in `--source`)

`TARGETS` is the one table of what can be prepared: name -> preparer (a function of the `Request`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.progress import Progress

from repro.data.manifest import build_manifest, file_digest, folder_digest, is_current, read_manifest
from repro.datasets.features import store_from_npz_dir, store_from_tsv, tsv_split_name
from repro.datasets.vqa import DATASETS as VQA_DATASETS
from repro.datasets.vqa import find_file, prepare_vqa
from repro.errors import ReproError
from repro.names import inside
from repro.paths import data_dir

GLOVE_FILE = "glove.840B.300d.txt"


def prepared_dir(name: str, root: Path | None = None) -> Path:
    return (root or data_dir()) / "prepared" / name


def feature_store_dir(source: str, root: Path | None = None) -> Path:
    return inside(root or data_dir(), "prepared", "features", source, what="dataset")


def _visible(path: Path, base: Path) -> bool:
    return not any(part.startswith(".") for part in path.relative_to(base).parts)


@dataclass(frozen=True)
class Request:
    """What `repro prepare NAME` was given, as a target's preparer reads it."""

    name: str
    root: Path  # the data folder
    source: Path | None = None
    glove: Path | None = None
    store: Path | None = None
    force: bool = False
    max_boxes: int = 100
    dim: int = 2048
    progress: Progress | None = None

    @property
    def folder(self) -> Path:
        """--source, else the download's folder in the data folder."""
        return self.source or self.root / self.name


def prepare(
    name: str,
    source: Path | None = None,
    glove: Path | None = None,
    store: Path | None = None,
    force: bool = False,
    max_boxes: int = 100,
    dim: int = 2048,
    progress: Progress | None = None,
) -> list[Path]:
    if name not in TARGETS:
        raise ReproError(f"cannot prepare {name!r}; one of {', '.join(TARGETS)}")
    request = Request(name, data_dir(), source, glove, store, force, max_boxes, dim, progress)
    return TARGETS[name](request)


def _vqa(req: Request) -> list[Path]:
    glove = req.glove
    if glove is None and (req.root / "glove-840b").is_dir():
        glove = find_file(req.root / "glove-840b", GLOVE_FILE)
    vg_dir = req.root / "vg-qa" if req.name in ("vqa2", "vqa1") and (req.root / "vg-qa").is_dir() else None
    out = prepared_dir(req.name, req.root)
    return [prepare_vqa(req.name, req.folder, out, glove, vg_dir=vg_dir, force=req.force, progress=req.progress)]


def _download_folder(req: Request) -> Path:
    src = req.folder
    if not src.is_dir():
        raise ReproError(f"{src}: no such folder; run repro download {req.name} first (or pass --source)")
    return src


def _tsv_stores(req: Request) -> list[Path]:
    """Bottom-up TSVs (one per split) -> `features/<name>/<split>.store`."""
    src, outputs = _download_folder(req), []
    tsvs = [p for p in sorted(src.rglob("*.tsv")) if _visible(p, src)]
    if not tsvs:
        raise ReproError(f"{src}: no bottom-up .tsv files (is the zip extracted? run repro download {req.name})")
    for tsv in tsvs:
        out = feature_store_dir(req.name, req.root) / f"{tsv_split_name(tsv)}.store"
        manifest = build_manifest("feature-store", [file_digest(tsv)], {"max_boxes": req.max_boxes, "dim": req.dim})
        if req.force or not is_current((read_manifest(out / "meta.json") or {}).get("manifest"), manifest):
            store_from_tsv(tsv, out, req.max_boxes, req.dim, meta={"manifest": manifest}, progress=req.progress)
        outputs.append(out)
    return outputs


def _npz_stores(req: Request) -> list[Path]:
    """Folders of per-image npz files (OpenVQA's) -> `features/<name>/<folder>.store`."""
    src, outputs = _download_folder(req), []
    folders = sorted({p.parent for p in src.rglob("*.npz") if _visible(p, src)})
    if not folders:
        raise ReproError(f"{src}: no .npz feature files (are the archives extracted? run repro download {req.name})")
    for folder in folders:
        out = feature_store_dir(req.name, req.root) / f"{folder.name}.store"
        manifest = build_manifest(
            "feature-store", [folder_digest(folder, "*.npz")], {"max_boxes": req.max_boxes, "dim": req.dim}
        )
        if req.force or not is_current((read_manifest(out / "meta.json") or {}).get("manifest"), manifest):
            store_from_npz_dir(folder, out, req.max_boxes, req.dim, meta={"manifest": manifest}, progress=req.progress)
        outputs.append(out)
    return outputs


def _tgif(req: Request) -> list[Path]:
    return prepare_tgif(req.source, req.root, req.force, req.progress)


def _gqa(req: Request) -> list[Path]:
    return _prepare_gqa(req.name, req.folder, req.root, req.force)


def _depth_maps(req: Request) -> list[Path]:
    from repro.datasets.depth_estimation import depth_maps

    if req.source is None:
        raise ReproError("prepare depth-maps needs --source (a folder of images)")
    out = prepared_dir("depth-maps", req.root) / Path(req.source).name
    return [depth_maps(req.source, out, force=req.force, progress=req.progress)]


def _depth(req: Request) -> list[Path]:
    from repro.datasets.depth import add_depth_to_store

    if req.store is None or req.source is None:
        raise ReproError("prepare depth needs --store (a feature store) and --source (a folder of depth PNGs)")
    return [add_depth_to_store(req.store, req.source, req.progress)]


# What `repro prepare NAME` accepts: the one table of names, each with its preparer. Adding one is one entry.
TARGETS: dict[str, Callable[[Request], list[Path]]] = {
    **{name: _vqa for name in VQA_DATASETS},  # questions, vocabularies, targets
    "bottom-up-36": _tsv_stores,
    "bottom-up-adaptive": _tsv_stores,
    "openvqa-features": _npz_stores,
    "gqa": _gqa,
    "gqa-features": _gqa,
    "tgif-qa": _tgif,
    "depth-maps": _depth_maps,
    "depth": _depth,
}


def prepare_tgif(source: Path | None, root: Path, force: bool, progress: Progress | None) -> list[Path]:
    """Frame feature stores from PSAC's HDF5 files; then every missing question file named with its URL."""
    from repro.data.catalog import get_dataset, load_catalog
    from repro.datasets.tgif import SPLITS, TASKS, file_name, tgif_dir
    from repro.datasets.tgif_features import FEATURE_FILES, find_feature_files, store_from_frame_hdf5

    folders = [source] if source is not None else [root / "tgif-qa-features", tgif_dir()]
    outputs = []
    for kind, h5 in find_feature_files(folders).items():
        dim = FEATURE_FILES[kind][1]
        out = feature_store_dir("tgif-qa", root) / f"{kind}.store"
        manifest = build_manifest("tgif-frame-store", [file_digest(h5)], {"dim": dim})
        if force or not is_current((read_manifest(out / "meta.json") or {}).get("manifest"), manifest):
            store_from_frame_hdf5(h5, out, dim, meta={"manifest": manifest, "source": h5.name}, progress=progress)
        outputs.append(out)
    questions = tgif_dir()
    urls = {f.name: f.urls[0] for f in get_dataset("tgif-qa", load_catalog()).files if f.urls}
    missing = [
        f"{name} ({urls.get(name) or 'see the catalog'})"
        for name in (file_name(s, t) for s in SPLITS if s != "Total" for t in TASKS)
        if not (questions / name).is_file()
    ]
    if missing:
        raise ReproError(
            f"frame features prepared in {', '.join(map(str, outputs))}, but {questions} lacks "
            f"{len(missing)} question file(s): {'; '.join(missing)} (repro download tgif-qa)"
        )
    return outputs


def _prepare_gqa(name: str, src: Path, root: Path, force: bool) -> list[Path]:
    from repro.datasets import gqa

    if not src.is_dir():
        raise ReproError(f"{src}: no such folder; run repro download {name} first (or pass --source)")
    if name == "gqa":
        return [gqa.prepare_gqa(src, prepared_dir("gqa", root), force=force)]
    outputs = []
    for kind in ("objects", "spatial"):
        info = find_file(src, gqa.OBJECTS_INFO if kind == "objects" else gqa.SPATIAL_INFO)
        if info is None:
            continue
        h5s = sorted(p for p in info.parent.glob(f"gqa_{kind}_*.h5") if _visible(p, src))
        out = feature_store_dir(name, root) / f"{kind}.store"
        manifest = build_manifest("feature-store", [file_digest(p) for p in (info, *h5s)], {"kind": kind})
        if force or not is_current((read_manifest(out / "meta.json") or {}).get("manifest"), manifest):
            gqa.store_from_gqa(src, kind, out, meta={"manifest": manifest})
        outputs.append(out)
    if not outputs:
        raise ReproError(f"{src}: no {gqa.OBJECTS_INFO} or {gqa.SPATIAL_INFO} (are the zips extracted?)")
    return outputs
