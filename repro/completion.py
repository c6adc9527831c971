"""Shell completion and parse-time choices for the command line (`repro --install-completion`).

Completers return the candidates that start with what was typed; they never raise (a broken spec or
catalog must not break the shell), so each one falls back to no candidates.
"""

from collections.abc import Callable, Iterable

import typer


def _starting(values: Iterable[str], incomplete: str) -> list[str]:
    return sorted({v for v in values if v.startswith(incomplete)})


def _quietly(fn: Callable[[], Iterable[str]]) -> list[str]:
    try:
        return list(fn())
    except Exception:  # noqa: BLE001 - completion offers nothing rather than a traceback in the shell
        return []


def experiment_ids(incomplete: str) -> list[str]:
    from repro.specs import aliases, load_all

    return _starting(_quietly(lambda: [n for s in load_all() for n in (s.id, *aliases(s))]), incomplete)


def rows(ctx: typer.Context, args: list[str], incomplete: str) -> list[str]:
    """Row names of the experiment already on the command line (the first word that names one)."""
    from repro.specs import resolve

    def names() -> list[str]:
        import os
        import shlex

        typed = os.environ.get("COMP_WORDS") or os.environ.get("_TYPER_COMPLETE_ARGS") or ""  # the shell's line
        words = [ctx.params.get("ident"), *args, *shlex.split(typed)]
        words = [w for w in words if w and not w.startswith("-")]
        for word in words:
            try:
                return [r.name for r in resolve(word).rows if r.runnable]
            except Exception:  # noqa: BLE001 - not an experiment id: the next word may be
                continue
        return []

    return _starting(_quietly(names), incomplete)


def datasets(incomplete: str) -> list[str]:
    from repro.data.catalog import load_catalog

    return _starting(_quietly(lambda: load_catalog()), incomplete)


def targets(incomplete: str) -> list[str]:
    from repro.submit.check import load_targets

    return _starting(_quietly(lambda: load_targets()), incomplete)


def choice(values: tuple[str, ...], default, *names: str, help: str, what: str = "value", **kwargs):
    """An option whose value is one of `values`: shown in --help, completed, checked while parsing."""

    def check(value):
        if value is not None and value not in values:
            raise typer.BadParameter(f"unknown {what} {value!r}; one of {', '.join(values)}")
        return value

    return typer.Option(
        default,
        *names,
        help=help,
        metavar="[" + "|".join(values) + "]",
        callback=check,
        autocompletion=lambda incomplete: _starting(values, incomplete),
        **kwargs,
    )
