"""The catalog's YAML reader (`repro.data.catalog`): PyYAML's safe loader, refusing tags, more than a few aliases,
recursive aliases and a key given twice, with the line of every key; the values as YAML 1.2 reads them. Imported only
when a catalog file is parsed (not when its parse is kept on disk by content hash)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from repro.errors import ReproError

MAX_ALIASES = 8  # YAML aliases allowed in one catalog file


class _Refused(yaml.MarkedYAMLError):
    """YAML the catalog reader will not load: a tag, too many or recursive aliases, a key given twice."""


class _CatalogLoader(yaml.SafeLoader):
    """A safe loader that also refuses every explicit tag and all but a handful of aliases.

    Aliases are what a "billion laughs" document is made of: a few lines whose expansion does not fit
    in memory. A catalog needs none, so a few (`<<: *defaults`) are allowed and nothing recursive.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.open_anchors: set[str] = set()

    def compose_node(self, parent, index):  # noqa: ANN001, ANN201 - PyYAML's signature
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise _Refused(
                    None, None, f"more than {MAX_ALIASES} aliases (*name); write the values out", event.start_mark
                )
            if event.anchor in self.open_anchors:
                raise _Refused(None, None, f"recursive alias *{event.anchor}", event.start_mark)
            return super().compose_node(parent, index)
        tag = getattr(event, "tag", None)
        if tag is not None:
            raise _Refused(None, None, f"YAML tags such as {tag!r} are not allowed in a catalog", event.start_mark)
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self.open_anchors.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self.open_anchors.discard(anchor)


def parse(path: Path, text: str) -> tuple[Any, dict[tuple, int]]:
    loader = None
    try:
        loader = _CatalogLoader(text)
        node = loader.get_single_node()
        lines: dict[tuple, int] = {}
        if node is not None:
            _index_lines(path, node, (), lines)
        data = _values_yaml12(path, text) if node is not None else None
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        raise ReproError(
            f"catalog {path}:{line}: not valid YAML (character {exc.character:#06x} is not allowed)"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())  # one line
        what = "refused" if isinstance(exc, _Refused) else "not valid YAML"
        raise ReproError(f"catalog {where}: {what} ({problem})") from None
    except RecursionError:
        raise ReproError(f"catalog {path}: refused (nested too deeply)") from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, lines


def _values_yaml12(path: Path, text: str) -> Any:
    """The document's values as YAML 1.2 reads them (`repro.utils`, as specs and recipes are read): `1:30` and
    `yes` are text, a date or a number in octal or hex is refused; the structure was checked by the loader above."""
    from repro.utils import Located, compose_yaml

    try:
        return Located(path, max_aliases=MAX_ALIASES).to_python(compose_yaml(text, str(path)))
    except ReproError as exc:
        raise ReproError(f"catalog {exc}") from None


def _index_lines(path: Path, node: yaml.Node, at: tuple, lines: dict[tuple, int]) -> None:
    if len(at) > 6:  # deeper than any key the catalog has
        return
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            if at + (key.value,) in lines:
                raise _Refused(None, None, f"key {key.value!r} given twice in one mapping", key.start_mark)
            lines[at + (key.value,)] = key.start_mark.line + 1
            _index_lines(path, value, at + (key.value,), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[at + (i,)] = item.start_mark.line + 1
            _index_lines(path, item, at + (i,), lines)
