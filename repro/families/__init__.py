"""Paper families: one folder each, and this table, the only place where a family is named.

Each family folder holds what is only that paper's: `config.py` (typed model configs, `CONFIGS`),
`build.py` (config -> model, sizes, cost), and once it runs, `family.py` (its hooks: a `Hooks` value
named `HOOKS`, see `repro.families.base`), its model modules, synthetic generator, `recipes/*.yaml`
and a README with the paper's equations and the choices made where it is silent. Adding a family is
one folder plus one line below. Nothing but this table imports a `family.py`.

The table sits under the spec schema (`repro.specs` checks `paper:`, `arch:` and `recipe:` against it): it imports
nothing of the toolkit but `errors`; the hooks it hands out are behaviour, loaded by name, above everything.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.names import inside


@dataclass(frozen=True)
class Family:
    paper: str  # the paper id used by specs (`paper:`) and recipe names (`mcan-pa/vqa2`)
    package: str  # the folder, as a module path
    archs: tuple[str, ...]  # the `arch:` values of spec rows this family builds
    old_prefix: str | None = None  # experiment ids before one scheme: `<old_prefix>-<rest>` still resolves


FAMILIES: list[Family] = [
    Family("mcan-pa", "repro.families.mcan_pa", ("mcan", "vl-bert"), old_prefix=""),
    Family("sa-m4c", "repro.families.sa_m4c", ("m4c", "sa-m4c"), old_prefix="sam4c"),
    Family("psac", "repro.families.psac", ("psac",)),
    Family("dsganet", "repro.families.dsganet", ("dsganet",)),
    Family("ace-rpe", "repro.families.ace_rpe", ("albef",), old_prefix="acerpe"),
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
    raise ReproError(f"unknown model arch {arch!r}; one of {', '.join(known_archs())}")


def recipes_dir(paper: str) -> Path:
    """Where a family keeps its recipes: `recipes/` beside its modules."""
    spec = importlib.util.find_spec(by_paper(paper).package)
    return Path(next(iter(spec.submodule_search_locations))) / "recipes"


def recipe_path(name: str) -> Path:
    """`<paper>/<name>` (e.g. `mcan-pa/vqa2`) -> the family folder's `recipes/<name>.yaml`."""
    paper, _, short = name.partition("/")
    if not short or "/" in short or short.startswith("."):
        raise ReproError(f"recipe name {name!r} must be <paper>/<name>, e.g. mcan-pa/vqa2")
    return inside(recipes_dir(paper), f"{short}.yaml", what="recipe")


def load_recipe(name: str):
    """A recipe by name (`mcan-pa/vqa2`: the family folder's `recipes/vqa2.yaml`) or by path (`*.yaml`)."""
    from repro.train.recipe import load_recipe as read_file
    from repro.train.recipe import parse_recipe

    if name.endswith((".yaml", ".yml")):
        return read_file(name)
    path = recipe_path(name)
    if not path.is_file():
        raise ReproError(f"no recipe {name!r} (looked for {path}); known recipes: {', '.join(available_recipes())}")
    return parse_recipe(path, name)


def available_recipes() -> list[str]:
    """Every family's recipes, as `<paper>/<name>`."""
    return sorted(f"{f.paper}/{p.stem}" for f in FAMILIES for p in recipes_dir(f.paper).glob("*.yaml"))


def arch_of(config_class: type) -> str:
    """The `arch:` value a typed config class accepts (its `arch` field is a one-value Literal)."""
    return config_class.model_fields["arch"].annotation.__args__[0]


def config_classes() -> dict[str, type]:
    """arch -> typed config class, over every family (imports only the config modules)."""
    return {arch_of(cls): cls for family in FAMILIES for cls in _import(f"{family.package}.config").CONFIGS}


def known_archs() -> list[str]:
    """Every family's archs, sorted (imports nothing)."""
    return sorted(a for f in FAMILIES for a in f.archs)


def config_class(arch: str) -> type:
    """The typed config class of `arch`, importing only its own family's config module (`repro show` of one
    family's spec loads no other family's)."""
    configs = _import(f"{by_arch(arch).package}.config").CONFIGS
    return next(cls for cls in configs if arch_of(cls) == arch)


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


def implementation(family: Family) -> Any:
    """The family's hooks (`HOOKS` of its `family.py`: a `repro.families.base.Hooks`), or None while the family is
    not implemented."""
    try:
        return _import(f"{family.package}.family").HOOKS
    except ModuleNotFoundError as exc:
        if exc.name == f"{family.package}.family":
            return None
        raise


def implemented(row: Any) -> bool:
    """Whether a spec's row runs: a compute row without a model, or a row whose family has its `family.py`
    (found, not imported: `repro list` imports no model code). It answers as `for_row(row) is not None` does,
    every implemented family's hooks running each arch the table gives it (a test holds the two equal)."""
    if row.config is None:
        return True
    family = by_arch(row.config.arch)
    return importlib.util.find_spec(f"{family.package}.family") is not None


def not_at_scale(row: Any, scale: str) -> str | None:
    """Why a spec's row does not run at `scale` (a row of the paper scale only), or None: as its family's hooks say
    (`Hooks.not_at_scale`), from the family's `config.py` (a `not_at_scale(config, scale)` there), without loading
    the model code; a test holds the two equal."""
    if row.config is None:
        return None
    rule = getattr(_import(f"{by_arch(row.config.arch).package}.config"), "not_at_scale", None)
    return rule(row.config, scale) if rule is not None else None


def for_row(row: Any) -> Any:
    """The hooks of the family that runs a spec's row (None while its family or arch is not implemented)."""
    if row.config is None:
        return None
    hooks = implementation(by_arch(row.config.arch))
    return hooks if hooks is not None and row.config.arch in hooks.archs else None


def require(family: Family) -> Any:
    module = implementation(family)
    if module is None:
        raise ReproError(
            f"the {family.paper} family ({', '.join(family.archs)}) is not implemented yet: "
            f"its rows are validated and shown, not run"
        )
    return module


@cache
def _import(name: str):
    return importlib.import_module(name)
