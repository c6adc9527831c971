"""Find and open WordNet 3.0 for WUPS, without the network.

Search order (first hit wins):

1. `$REPRO_DATA_DIR/wordnet` — a WordNet 3.0 `dict/` folder (what `stage_debian` writes there), or
   its `wordnet/` subfolder (what `repro download wordnet` unpacks from NLTK's wordnet.zip);
2. NLTK's data path (`nltk.download("wordnet")` puts WordNet 3.0 there);
3. `/usr/share/wordnet` — Debian's `wordnet-base` package. It lacks the small `lexnames` file that
   NLTK's reader opens, so its files are copied into `$REPRO_DATA_DIR/wordnet` with `lexnames`
   written from the WordNet 3.0 documentation (lexnames(5WN)), once, atomically.

Nothing found: a ReproError that says how to get it (`repro download wordnet`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from repro.errors import ReproError
from repro.paths import data_dir

DEBIAN_DIR = Path("/usr/share/wordnet")
NEEDED = (
    "data.noun",
    "index.noun",
    "noun.exc",
    "data.verb",
    "index.verb",
    "verb.exc",
    "data.adj",
    "index.adj",
    "adj.exc",
    "data.adv",
    "index.adv",
    "adv.exc",
)
OPTIONAL = ("cntlist.rev", "index.sense")

# lexnames(5WN): file number, lexicographer file name, syntactic category (1 noun, 2 verb, 3 adj, 4 adv)
LEXNAMES = (
    "adj.all 3",
    "adj.pert 3",
    "adv.all 4",
    "noun.Tops 1",
    "noun.act 1",
    "noun.animal 1",
    "noun.artifact 1",
    "noun.attribute 1",
    "noun.body 1",
    "noun.cognition 1",
    "noun.communication 1",
    "noun.event 1",
    "noun.feeling 1",
    "noun.food 1",
    "noun.group 1",
    "noun.location 1",
    "noun.motive 1",
    "noun.object 1",
    "noun.person 1",
    "noun.phenomenon 1",
    "noun.plant 1",
    "noun.possession 1",
    "noun.process 1",
    "noun.quantity 1",
    "noun.relation 1",
    "noun.shape 1",
    "noun.state 1",
    "noun.substance 1",
    "noun.time 1",
    "verb.body 2",
    "verb.change 2",
    "verb.cognition 2",
    "verb.communication 2",
    "verb.competition 2",
    "verb.consumption 2",
    "verb.contact 2",
    "verb.creation 2",
    "verb.emotion 2",
    "verb.motion 2",
    "verb.perception 2",
    "verb.possession 2",
    "verb.social 2",
    "verb.stative 2",
    "verb.weather 2",
    "adj.ppl 3",
)

HOW_TO_GET = (
    "WordNet 3.0 not found in $REPRO_DATA_DIR/wordnet, the NLTK data path or /usr/share/wordnet; "
    "get it with `repro download wordnet` (or `apt-get install wordnet-base`, or "
    "`python -m nltk.downloader wordnet`)"
)


def is_dict_dir(path: Path) -> bool:
    return all((path / name).is_file() for name in NEEDED + ("lexnames",))


def stage_debian(source: Path = DEBIAN_DIR, dest: Path | None = None) -> Path:
    """Copy Debian's WordNet files into `dest` (default `$REPRO_DATA_DIR/wordnet`) with `lexnames`.

    Written into a temporary sibling folder and renamed, so a half-copied folder never looks complete.
    A `dest` that already holds something else (an interrupted download, the user's own files) is
    never deleted: the error says so and names it.
    """
    dest = dest or data_dir() / "wordnet"
    if is_dict_dir(dest):
        return dest
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ReproError(
            f"{dest}: exists but is not a complete WordNet 3.0 dict folder; nothing was changed. "
            "Move it away, then run again (or `repro download wordnet`)"
        )
    missing = [name for name in NEEDED if not (source / name).is_file()]
    if missing:
        raise ReproError(f"{source}: not a WordNet dict folder (missing {', '.join(missing)})")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".wordnet.", dir=dest.parent))
    try:
        for name in NEEDED + OPTIONAL:
            if (source / name).is_file():
                shutil.copyfile(source / name, tmp / name)
        lines = [f"{i:02d}\t{entry.split()[0]}\t{entry.split()[1]}\n" for i, entry in enumerate(LEXNAMES)]
        (tmp / "lexnames").write_text("".join(lines), encoding="utf-8")
        if dest.exists():
            dest.rmdir()  # empty (checked above); rmdir refuses anything that appeared since
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def locate() -> Path | None:
    """The first WordNet dict folder found, staging Debian's copy when that is the only one."""
    own = data_dir() / "wordnet"
    for candidate in (own, own / "wordnet"):  # staged here, or unpacked by `repro download wordnet`
        if is_dict_dir(candidate):
            return candidate
    import nltk

    for root in nltk.data.path:
        candidate = Path(root) / "corpora" / "wordnet"
        if is_dict_dir(candidate):
            return candidate
    if all((DEBIAN_DIR / name).is_file() for name in NEEDED):
        return stage_debian()
    return None


@lru_cache(maxsize=4)
def _open(root: str):
    import warnings

    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class WordNet30Reader(WordNetCorpusReader):
        def map_wn(self, version="wordnet"):
            # NLTK maps a WordNet found outside its own corpus onto its "wordnet" corpus for the
            # multilingual (OMW) data, which WUPS does not use; this folder *is* WordNet 3.0
            return None

    if root not in nltk.data.path:
        nltk.data.path.append(root)  # NLTK reads only inside its data path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions not available": not needed here
        reader = WordNet30Reader(root, None)
    version = reader.get_version()
    if version != "3.0":
        raise ReproError(f"{root}: WordNet {version}, WUPS needs WordNet 3.0")
    return reader


def load():
    """An NLTK WordNet reader over WordNet 3.0, or a ReproError saying how to get it."""
    root = locate()
    if root is None:
        raise ReproError(HOW_TO_GET)
    return _open(str(root))
