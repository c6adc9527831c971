"""Paper families: one folder each, and this table, the only place where a family is named.

Each family folder holds what is only that paper's: `config.py` (typed model configs, `CONFIGS`),
and once it runs, `family.py` (the protocol of `repro.families.base`: model, data, loss and predict
steps, evaluation, test-set files, paper-scale cost), its model modules, synthetic generator,
`recipes/*.yaml` and a README with the paper's equations and the choices made where it is silent.
Adding a family is one folder plus one line below.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from repro.errors import ReproError


@dataclass(frozen=True)
class Family:
    paper: str  # the paper id used by specs (`paper:`) and recipe names (`mcan-pa/vqa2`)
    package: str  # the folder, as a module path
    archs: tuple[str, ...]  # the `arch:` values of spec rows this family builds


FAMILIES: list[Family] = [
    Family("mcan-pa", "repro.families.mcan_pa", ("mcan", "vl-bert")),
    Family("sa-m4c", "repro.families.sa_m4c", ("m4c", "sa-m4c")),
    Family("psac", "repro.families.psac", ("psac",)),
    Family("dsganet", "repro.families.dsganet", ("dsganet",)),
    Family("ace-rpe", "repro.families.ace_rpe", ("albef",)),
]


def papers() -> tuple[str, ...]:
    return tuple(f.paper for f in FAMILIES)


def by_paper(paper: str) -> Family:
    for family in FAMILIES:
        if family.paper == paper:
            return family
    raise ReproError(f"unknown paper {paper!r}; one of {', '.join(papers())}")


def by_arch(arch: str) -> Family:
    for family in FAMILIES:
        if arch in family.archs:
            return family
    known = sorted(a for f in FAMILIES for a in f.archs)
    raise ReproError(f"unknown model arch {arch!r}; one of {', '.join(known)}")


def recipes_dir(paper: str) -> Path:
    """Where a family keeps its recipes: `recipes/` beside its modules."""
    spec = importlib.util.find_spec(by_paper(paper).package)
    return Path(next(iter(spec.submodule_search_locations))) / "recipes"


def arch_of(config_class: type) -> str:
    """The `arch:` value a typed config class accepts (its `arch` field is a one-value Literal)."""
    return config_class.model_fields["arch"].annotation.__args__[0]


def config_classes() -> dict[str, type]:
    """arch -> typed config class, over every family (imports only the config modules)."""
    return {arch_of(cls): cls for family in FAMILIES for cls in _import(f"{family.package}.config").CONFIGS}


def as_typed(config: Any, configs: tuple[type, ...]):
    """A family's typed config as it is, or a `model:` mapping validated by the class its `arch` names."""
    if isinstance(config, configs):
        return config
    from pydantic import ValidationError

    classes = {arch_of(cls): cls for cls in configs}
    if not isinstance(config, dict) or config.get("arch") not in classes:
        raise ReproError(f"model config {config!r} needs an arch: one of {', '.join(classes)}")
    try:
        return classes[config["arch"]].model_validate(config)
    except ValidationError as exc:
        raise ReproError(f"model config {config!r}: {exc.errors()[0]['msg']}") from None


def implementation(family: Family) -> ModuleType | None:
    """The family's `family.py` (the run protocol), or None while the family is not implemented."""
    try:
        return _import(f"{family.package}.family")
    except ModuleNotFoundError as exc:
        if exc.name == f"{family.package}.family":
            return None
        raise


def require(family: Family) -> ModuleType:
    module = implementation(family)
    if module is None:
        raise ReproError(
            f"the {family.paper} family ({', '.join(family.archs)}) is not implemented yet: "
            f"its rows are validated and shown, not run"
        )
    return module


@cache
def _import(name: str) -> ModuleType:
    return importlib.import_module(name)
