"""Runs that are not the committed spec as written: `key=value` overrides, `--limit`, a spec file by path.

The rule. Results of a spec exactly as it is committed live in `results/<paper>/<id>/` (smoke-scale
ones in the scratch folder, `repro.paths`), and only there do `repro table ID`, `repro list` and `repro
check` look. A run that changes anything — a `key=value` override, `--limit N`, or a spec given as a
file outside the experiments folder (`repro cp` makes one) — is a *variant*: its records go to
`variants/<name>/<paper>/<id>/` in the scratch folder (`~/.cache/repro/results`, or `REPRO_RESULTS`
when that is set; never the checkout's `results/`), where the name says what changed (`recipe.epochs=2`,
`limit=500`, `my@1a2b3c4d`), and they carry that change (`variant`) and a configuration hash that
covers it. So an overridden run never overwrites or mixes into the committed results; `repro table ID
key=value …` (the same words as the run) shows the variant's table, and its caption says what changed.

Override keys (validated before anything runs, one line naming the key when one is wrong):
  recipe.<field>            a training recipe field: epochs, batch_size, grad_clip, precision, ...
  recipe.schedule.<key>     recipe.optimizer.<key>: a key of the recipe's schedule / optimiser; `name` switches
                            to another one (`recipe.optimizer.name=sgd`), keeping the keys it shares
  sizes.<key>               a model size (d_model, layers, heads, ...): the family builds the model to check it
  generator.<key>           a synthetic generator setting (not at paper scale)
  model.<field>             a field of each selected row's typed model config (positional, fusion, ...)
Values are YAML scalars or lists: `2`, `0.5`, `true`, `null`, `[pwa,poa]`, `bf16`.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.errors import ReproError, echoed, reason
from repro.names import inside
from repro.paths import experiments_dir, scratch_dir
from repro.specs import Row, Spec, scale_settings, select_rows
from repro.utils import kind_of, same_type, value_text, yaml_value

SECTIONS = ("recipe", "sizes", "generator", "model")
RECIPE_FIXED = {"name", "path", "description", "seed", "train_splits"}  # seeds: --seeds; splits: the family's
VARIANTS_FOLDER = "variants"
MAX_VALUE_CHARS = 1000  # an override value: a number, a name or a short list
MAX_SETTING = 10**9  # a recipe, size or generator number above this is a typo


@dataclass(frozen=True)
class Variant:
    """What a run changes from the committed spec; empty for the spec as written."""

    overrides: tuple[tuple[str, Any], ...] = ()  # (dotted key, parsed value), sorted by key
    limit: int | None = None  # questions per split (paper scale): a partial run
    spec_file: str | None = None  # a spec given as a path outside the experiments folder
    spec_sha256: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.overrides or self.limit or self.spec_file)

    @property
    def name(self) -> str:
        """The folder name: what changed, readable; a digest is added when the text had to be shortened."""
        parts = [f"{Path(self.spec_file).stem}@{self.spec_sha256[:8]}"] if self.spec_file else []
        parts += [f"{key}={value_text(value)}" for key, value in self.overrides]
        parts += [f"limit={self.limit}"] if self.limit else []
        text = ",".join(parts)
        safe = re.sub(r"[^A-Za-z0-9._=,@+-]+", "_", text)
        safe = "_" + safe[1:] if safe.startswith(".") else safe  # a plain name, never a hidden folder
        if safe == text and len(text) <= 80:
            return text
        digest = hashlib.sha256(json.dumps(self.to_json(), sort_keys=True, default=str).encode()).hexdigest()[:8]
        return f"{safe[:60]}-{digest}"

    def describe(self) -> str:
        """One line for captions and messages."""
        parts = [f"spec file {self.spec_file}"] if self.spec_file else []
        parts += [f"{key}={value_text(value)}" for key, value in self.overrides]
        parts += [f"partial: first {self.limit} questions per split"] if self.limit else []
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any] | None:
        """What a record keeps: the overrides, the limit (a partial run), the spec file and its digest."""
        if self.empty:
            return None
        return {
            "overrides": dict(self.overrides),
            "limit": self.limit,
            "partial": self.limit is not None,
            "spec_file": self.spec_file,
            "spec_sha256": self.spec_sha256,
        }

    def results_root(self) -> Path | None:
        """Where this variant's records go, every scale's (None: the spec's own folder for the scale): under
        the scratch folder, never the committed results (`repro.paths.scratch_dir`)."""
        return None if self.empty else inside(scratch_dir(), VARIANTS_FOLDER, self.name)


# --- reading the command line ---------------------------------------------------------------------


def parse_overrides(items: list[str] | None) -> tuple[tuple[str, Any], ...]:
    """`recipe.epochs=2` -> (("recipe.epochs", 2),); the key's section is checked here, the rest by `apply`."""
    found: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        key = key.strip()
        shown = echoed(item)
        if not sep or not key:
            raise ReproError(f"{shown}: an override is key=value, e.g. recipe.epochs=2")
        parts = key.split(".")
        if parts[0] not in SECTIONS or len(parts) < 2 or not all(parts):
            starts = ", ".join(s + "." for s in SECTIONS)
            raise ReproError(f"{shown}: override keys start with {starts} (e.g. recipe.epochs=2)")
        if len(parts) > 3 or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", p) for p in parts):
            raise ReproError(f"{shown}: an override key is names joined by '.' (letters, digits, '_'), e.g. sizes.ffn")
        if key in found:
            raise ReproError(f"{shown}: {key} is given twice")
        if raw.strip() == "":
            raise ReproError(f"{shown}: no value after '='")
        if len(raw) > MAX_VALUE_CHARS:
            raise ReproError(f"{shown}: a value of {len(raw):,} characters; at most {MAX_VALUE_CHARS}")
        try:  # YAML 1.2, as spec files are read (repro.utils): `1:30` is text, `1e-3` a number
            found[key] = yaml_value(raw, key)
        except ReproError as exc:
            raise ReproError(
                f"{shown}: the value is not a YAML scalar or list ({str(exc).split(': ', 1)[-1]})"
            ) from None
        if isinstance(found[key], dict) or (
            isinstance(found[key], list) and any(isinstance(v, (list, dict)) for v in found[key])
        ):
            raise ReproError(f"{shown}: give one key per override (e.g. {key}.NAME=VALUE), not a mapping")
    return tuple(sorted(found.items()))


def load_target(ident: str) -> tuple[Spec, str | None, str | None]:
    """An experiment id, or a spec file path (`repro cp` writes one): (spec, file, sha256). A file inside the
    experiments folder is the committed spec; any other file is a variant of its own."""
    from repro.specs import parse_spec, resolve

    path = Path(ident)
    if not ident.endswith((".yaml", ".yml")):
        return resolve(ident), None, None
    if not path.is_file():
        raise ReproError(f"{ident}: no such spec file")
    try:
        path.resolve().relative_to(experiments_dir().resolve())
        return resolve(path.stem), None, None
    except ValueError:
        pass
    spec = parse_spec(path, in_tree=False)
    return spec, str(path), hashlib.sha256(path.read_bytes()).hexdigest()


def load(ident: str, overrides: list[str] | tuple[str, ...] | None, limit: int | None) -> tuple[Spec, Variant]:
    """The spec an id or a spec file names, as written, and what this run changes from the committed spec."""
    spec, spec_file, digest = load_target(ident)
    return spec, Variant(parse_overrides(overrides), limit, spec_file, digest)


# --- applying overrides to a spec's settings and rows ---------------------------------------------


def resolve(spec: Spec, scale: str, row_names: list[str] | None, variant: Variant) -> Spec:
    """The spec as this variant runs it at `scale`: the overrides applied once, here, to the scale's settings and to
    the selected rows' models (`--rows`; each override checked against what it changes). The spec as it is when
    nothing is overridden; what is planned from it (repro.run.make_plan) asks nothing of this module again."""
    if not variant.overrides or spec.overrides == variant.overrides:
        return spec
    settings = scale_settings(spec, scale)
    rows = select_rows(spec, row_names)
    settings, rows = apply(spec, scale, settings, rows, variant.overrides)
    changed = {row.name: row for row in rows}
    return dataclasses.replace(
        spec,
        rows=tuple(changed.get(row.name, row) for row in spec.rows),
        scales={**spec.scales, scale: settings},
        overrides=variant.overrides,
    )


def apply(
    spec: Spec, scale: str, settings: dict[str, Any], rows: list[Row], overrides: tuple[tuple[str, Any], ...]
) -> tuple[dict[str, Any], list[Row]]:
    """The scale settings and rows with the overrides in, each one checked against what it changes."""
    settings = copy.deepcopy(settings)
    for key, value in overrides:
        section, *path = key.split(".")
        try:
            _finite(value, negative_ok=section == "model")
            if section == "recipe":
                _recipe(spec, rows, settings, path, value)
            elif section == "sizes":
                _one_level(path)
                settings.setdefault("sizes", {})
                same_type(settings["sizes"].get(path[0]), value)
                _size(path[0], value)
                settings["sizes"][path[0]] = value
            elif section == "generator":
                _generator(scale, settings, rows, path, value)
            else:
                rows = _model(rows, path, value)
        except ReproError as exc:
            raise ReproError(f"{key}={value_text(value)}: {exc}") from None
    if any(key.startswith("sizes.") for key, _ in overrides):
        _check_sizes(rows, settings, overrides)
    return settings, rows


def check_spec_settings(
    spec: Spec, scale: str, settings: dict[str, Any], rows: list[Row], hooks: dict[str, Any] | None = None
) -> None:
    """A spec's own settings at `scale` (its recipe changes, sizes and generator) through the checks an override
    of the same key meets (`apply`): kinds, finite non-negative numbers, the recipe's and the generator's ranges, a
    model that builds with the sizes; each refusal names the spec's file and line. `hooks`: row name -> its
    family's hooks, where the caller has looked them up already (the plan does, once per row)."""
    if hooks is None:
        from repro.families import for_row

        hooks = {r.name: for_row(r) if r.model is not None else None for r in rows}
    where = ("scales", scale)
    for section in ("recipe", "sizes", "generator"):
        values = settings.get(section)
        if values is None:
            continue
        if not isinstance(values, dict):
            raise spec.error(where + (section,), f"{section} must be a mapping, got {kind_of(values)}")
        for key, value in values.items():
            if section == "recipe" and key in ("schedule", "optimizer"):
                continue  # mappings the recipe checks itself, below
            # sizes may be given per arch; a generator setting may be a mapping of numbers (mcan-pa's question_weights)
            for path, leaf in _leaves((key,), value, nested=section in ("sizes", "generator")):
                try:
                    _finite(leaf)
                    if section == "sizes":
                        _size(path[-1], leaf)
                except ReproError as exc:
                    dotted = ".".join(map(str, path))
                    raise spec.error(
                        where + (section, *path), f"{section}.{dotted}={value_text(leaf)}: {exc}"
                    ) from None
    if settings.get("recipe") and spec.recipe and any(r.model is not None for r in rows):
        from repro.families import load_recipe

        try:
            load_recipe(spec.recipe).replace(**settings["recipe"])
        except ReproError as exc:
            field_name = str(exc).split(":")[0].split(" ")[0]
            raise spec.error(where + ("recipe", field_name), f"recipe: {exc}") from None
    if settings.get("generator") is not None and scale != "paper":
        readers = {hooks[r.name].generator_settings for r in rows if r.model is not None and hooks[r.name]} - {None}
        for cls in {read(settings) for read in readers}:
            try:
                cls.from_mapping(settings["generator"])
            except ReproError as exc:
                named = [k for k in settings["generator"] if re.search(rf"\b{re.escape(k)}\b", str(exc))]
                raise spec.error(where + ("generator", *named[:1]), f"generator: {exc}") from None
    if settings.get("sizes"):
        sizes = json.dumps(settings["sizes"], sort_keys=True)
        unbuilt = [r for r in rows if r.model is not None and (type(r.config), r.config, sizes) not in _BUILT]
        try:
            _check_sizes(unbuilt, settings, tuple((f"sizes.{k}", v) for k, v in settings["sizes"].items()), hooks)
        except ReproError as exc:
            raise spec.error(where + ("sizes",), str(exc)) from None
        _BUILT.update((type(r.config), r.config, sizes) for r in unbuilt)


_BUILT: set[tuple] = set()  # (config, sizes) a model was built with on the meta device in this process


RATES = ("dropout", "momentum")  # model sizes that are rates in 0..1; `init_std` a scale; every other an integer


def _size(name: Any, value: Any) -> None:
    """A model size is a whole number (a width, a count of layers or tokens) or null (the family's own), except the
    rates (RATES: 0..1) and `init_std` (a number); a mapping holds the sizes of one arch."""
    if value is None or isinstance(value, dict):
        return
    if str(name).endswith(RATES):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ReproError(f"is a rate, a number in 0..1, got {value_text(value)}")
    elif name == "init_std":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ReproError(f"is a number, got {kind_of(value)}")
    elif isinstance(value, bool) or not isinstance(value, int):
        raise ReproError(f"is a whole number (a width or a count), got {kind_of(value)} {value_text(value)}")


def _leaves(path: tuple, value: Any, nested: bool):
    """(key path, value) of each setting, inside the mappings of a nested section (sizes per arch)."""
    if nested and isinstance(value, dict):
        for key, inner in value.items():
            yield from _leaves(path + (key,), inner, nested=False)
    else:
        yield path, value


def _finite(value: Any, negative_ok: bool = False) -> None:
    """No NaN or infinity anywhere in a value (it would train, or skip clipping, silently), and no negative
    number for a recipe, size or generator setting (counts, rates, norms: none is negative)."""
    import math

    if isinstance(value, dict):
        raise ReproError("must be a number, a name or a list of them, not a mapping")
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, (list, dict)):
            raise ReproError(f"must be a number, a name or a list of them, not {kind_of(item)} inside a list")
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            continue
        if not math.isfinite(item):
            raise ReproError("must be a finite number")
        if item < 0 and not negative_ok:
            raise ReproError("must not be negative")
        if abs(item) > MAX_SETTING:
            raise ReproError(f"at most {MAX_SETTING:,} (no count, size or rate is larger)")


def _one_level(path: list[str]) -> None:
    if len(path) != 1:
        raise ReproError("this section takes one key, e.g. sizes.d_model")


def _recipe(spec: Spec, rows: list[Row], settings: dict[str, Any], path: list[str], value: Any) -> None:
    from repro.families import load_recipe
    from repro.train.recipe import OPTIMIZERS, PRECISIONS, SCHEDULES, Recipe

    trains = any(r.model is not None for r in rows)
    if path == ["precision"] and trains:  # every recipe a unit trains by, named in the spec or by its family
        if value not in PRECISIONS:
            raise ReproError(f"no precision {value_text(value)}; one of {', '.join(PRECISIONS)}")
        settings.setdefault("recipe", {})["precision"] = value
        return
    if path == ["max_steps"] and trains and not spec.recipe:  # its stages' recipes, each (RunContext.recipe)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ReproError(f"recipe.max_steps must be a positive integer or null, got {value_text(value)}")
        settings.setdefault("recipe", {})["max_steps"] = value
        return
    if not spec.recipe or not trains:
        raise ReproError(f"{spec.id}: these rows train with no recipe")
    fields = {f.name for f in dataclasses.fields(Recipe)} - RECIPE_FIXED
    if path[0] not in fields:
        hint = " (use --seeds)" if path[0] == "seed" else ""
        raise ReproError(f"unknown recipe field {path[0]!r}{hint}; one of {', '.join(sorted(fields))}")
    base = load_recipe(spec.recipe)
    changes = settings.setdefault("recipe", {})
    current = base.replace(**changes)
    if path[0] in ("schedule", "optimizer"):
        if len(path) != 2:
            example = "base_lr" if path[0] == "schedule" else "weight_decay"
            raise ReproError(f"name one key of the {path[0]}, e.g. recipe.{path[0]}.{example}")
        section = dict(getattr(current, path[0]))
        kinds = SCHEDULES if path[0] == "schedule" else OPTIMIZERS
        if path[1] == "name":  # another optimiser or schedule: the keys it shares with the recipe's are kept
            if value not in kinds:
                raise ReproError(f"no {path[0]} {value!r}; one of {', '.join(sorted(kinds))}")
            changes[path[0]] = {"name": value, **{k: v for k, v in section.items() if k in kinds[value]}}
            base.replace(**changes)
            return
        allowed = kinds[section["name"]]
        if path[1] not in allowed:
            raise ReproError(f"the {section['name']} {path[0]} has no {path[1]!r}; one of {', '.join(sorted(allowed))}")
        same_type(section.get(path[1]), value)
        section[path[1]] = value
        changes[path[0]] = section
    else:
        _one_level(path)
        same_type(getattr(current, path[0]), value)
        changes[path[0]] = value
    try:
        base.replace(**changes)  # the recipe's own range checks
    except TypeError:
        raise ReproError(f"not a valid value for recipe.{'.'.join(path)}") from None


def _generator(scale: str, settings: dict[str, Any], rows: list[Row], path: list[str], value: Any) -> None:
    from repro.families import for_row

    if scale == "paper":
        raise ReproError("the paper scale reads real data; generator settings apply to smoke and synthetic")
    readers = {for_row(r).generator_settings for r in rows if r.model is not None and for_row(r)}
    if not readers or None in readers:
        raise ReproError("these rows' family does not declare its generator settings (generator_settings in family.py)")
    classes = {read(settings) for read in readers}
    generator = dict(settings.get("generator") or {})
    for cls in classes:
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        current = generator.get(path[0], defaults.get(path[0]))
        if len(path) == 2:  # one key of a mapping setting (mcan-pa's question_weights.is_on=2)
            if path[0] in defaults and not _takes_mapping(cls, path[0]):
                raise ReproError(f"generator.{path[0]} is not a mapping: give it as generator.{path[0]}=VALUE")
            value_at = {**(current or {}), path[1]: value}
        else:
            same_type(current, value)
            value_at = value
        cls.from_mapping({**generator, path[0]: value_at})
    generator[path[0]] = value_at
    settings["generator"] = generator


def _takes_mapping(cls: type, name: str) -> bool:
    """Whether generator setting `name` of `cls` is declared a mapping (`dict[str, float] | None`)."""
    import typing

    hint = typing.get_type_hints(cls).get(name)
    return any(typing.get_origin(k) is dict or k is dict for k in (hint, *typing.get_args(hint)))


def _model(rows: list[Row], path: list[str], value: Any) -> list[Row]:
    from pydantic import ValidationError

    _one_level(path)
    if not any(r.config is not None and r.model is not None for r in rows):
        raise ReproError("none of the selected rows trains a model")
    out = []
    for row in rows:
        if row.model is None or row.config is None:
            out.append(row)
            continue
        model = {**row.model, path[0]: value}
        try:
            config = type(row.config).model_validate(model)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or path[0]
            raise ReproError(f"row {row.name!r}: {where}: {first['msg']}") from None
        out.append(dataclasses.replace(row, model=model, config=config))
    return out


def _check_sizes(rows: list[Row], settings: dict[str, Any], overrides, hooks: dict[str, Any] | None = None) -> None:
    """Each family builds its model with the sizes on the meta device: unknown keys and bad values fail here."""
    import torch

    from repro.families import for_row

    keys = ", ".join(f"{k}={value_text(v)}" for k, v in overrides if k.startswith("sizes."))
    for row in rows:
        if row.model is None:
            family = None
        else:
            family = hooks[row.name] if hooks is not None and row.name in hooks else for_row(row)
        if family is None:
            continue
        try:
            with torch.device("meta"):
                family.build_model(row.config, sizes=settings["sizes"])
        except ReproError as exc:
            raise ReproError(f"{keys}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - a model that cannot be built with these sizes
            why = reason(exc)
            raise ReproError(f"{keys}: row {row.name!r} cannot be built with these sizes ({why})") from None
