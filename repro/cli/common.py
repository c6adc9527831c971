"""What every command module of the `repro` command line shares: the Typer app, `command` (the error
boundary), the consoles, the lists of choices, the ID and KEY=VALUE arguments, and the spec or variant an
ID names. The command modules import this module, never the package, so no import runs in a circle."""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
import warnings
from collections.abc import Callable

import typer
import typer.core

from repro import completion as complete
from repro.errors import LINE_LIMIT, ReproError

SCALES = ("paper", "synthetic", "smoke")  # repro.specs.SCALES (a test keeps them equal)
TABLE_FORMATS = ("rich", "text", "md", "csv", "latex", "html", "json")  # repro.report.FORMATS (idem)
RICH_OR_JSON = ("rich", "json")
LAUNCHERS = ("local", "slurm")
OVERRIDES_HELP = (
    "Overrides such as recipe.epochs=2 sizes.d_model=32 model.positional=[pwa]; the results are a variant, "
    "kept apart under variants/ in the scratch folder, never in results/ (docs/usage.md: Overrides)."
)


# typer's own copy of click raises these (found through a public class, whichever click typer uses)
ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


# the tags that mark a docstring's example commands (`[bold]repro run ...[/]`: the tests run each one); the help shows
# the command without them
EXAMPLE_TAGS = re.compile(r"\[(?:/|/?bold|/?dim|/?italic)\]")


def logger_option():
    """`--logger tensorboard|wandb` (repeated, or a comma list): experiment loggers beside train.jsonl."""
    return typer.Option(
        None,
        "--logger",
        metavar="tensorboard|wandb",
        help="Also log each unit's training to TensorBoard or Weights & Biases, beside train.jsonl (repeat it, or a "
        "comma list; the extras repro[tensorboard], repro[wandb]). Sets REPRO_LOGGERS for the run's processes.",
    )


def help_text(text: str | None) -> str | None:
    """Help as the terminal shows it (click's plain help: no markup to parse, so `repro --help` needs no rich): the
    example tags left out, and the lines of a paragraph joined, so the terminal's width decides where they break (a
    paragraph starting with \\b, or indented, keeps its lines)."""
    if not text:
        return text
    paragraphs = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        if not paragraph.startswith("\b") and not any(line[:1].isspace() for line in paragraph.splitlines()):
            paragraph = " ".join(line.strip() for line in paragraph.splitlines())
        paragraphs.append(paragraph)
    return EXAMPLE_TAGS.sub("", "\n\n".join(paragraphs))


def help_examples(doc: str | None) -> list[str]:
    """The example commands of a command's docstring (the `[bold]repro ...[/]` ones), each on one line."""
    return [" ".join(found.split()) for found in re.findall(r"\[bold\](repro .*?)\[/\]", doc or "", flags=re.S)]


class _Option(typer.core.TyperOption):
    """An option's help shows a metavar that names its value (`--limit LIMIT`), none on a flag (no `<bool>`)."""

    def display_type_rich(self, ctx):
        if self.is_flag or self.count:
            return None
        return self.metavar if self.metavar is not None else self.name.upper()


class _Argument(typer.core.TyperArgument):
    """An argument is named by its metavar alone: `ID`, `[KEY=VALUE]...` (no `<str>` or `{ID}`)."""

    def display_type_rich(self, ctx):
        return None

    def _usage_display_name(self) -> str:
        return self.metavar if self.metavar is not None else super()._usage_display_name()


def _named(params: list) -> list:
    for param in params:
        if type(param) is typer.core.TyperOption:
            param.__class__ = _Option
        elif type(param) is typer.core.TyperArgument:
            param.__class__ = _Argument
    return params


def tidy(cmd):
    """A command's help through `help_text`, with the metavars of `_Option` and `_Argument`; a group's
    commands alike when it hands them out (`weights ls` as much as `run`)."""
    if cmd is None or getattr(cmd, "_tidy", False):
        return cmd
    cmd.help = help_text(cmd.help)
    for param in cmd.params:
        param.help = help_text(getattr(param, "help", None))
    if type(cmd) is typer.core.TyperCommand:
        cmd.__class__ = ReproCommand
    elif type(cmd) is typer.core.TyperGroup:
        cmd.__class__ = ReproGroup
    cmd._tidy = True
    return cmd


class ReproCommand(typer.core.TyperCommand):
    def get_params(self, ctx):
        return _named(super().get_params(ctx))  # --help is made here


class ReproGroup(typer.core.TyperGroup):
    def get_params(self, ctx):
        return _named(super().get_params(ctx))

    def get_command(self, ctx, cmd_name):
        return tidy(super().get_command(ctx, cmd_name))


class OneLineErrors(ReproGroup):
    """Usage errors (an unknown option, a value not among the choices, a missing argument) are one line on
    stderr and exit 2, like every other error of the toolkit."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except ClickException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # `repro` alone: the help
                typer.echo(exc.ctx.get_help())
                sys.exit(2)
            where = f" (`{exc.ctx.command_path} -h` lists the options)" if getattr(exc, "ctx", None) else ""
            err_console.print(
                f"[bold red]error:[/] {escape(line_cut(one_line(exc.format_message())))}{where}", highlight=False
            )
            sys.exit(exc.exit_code)
        except typer.Abort:
            err_console.print("Aborted.", highlight=False)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    name="repro",
    cls=OneLineErrors,
    help="Reproduce the tables of five papers on positional and spatial attention in vision-language models.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


class LazyConsole:
    """rich's Console, made when a command first prints: `repro --help` (click's plain help) loads no rich, and the
    console takes the terminal's width and settings when the command runs, as one made at import would."""

    __slots__ = ("_settings", "_console")

    def __init__(self, **settings) -> None:
        object.__setattr__(self, "_settings", settings)
        object.__setattr__(self, "_console", None)

    def _made(self):
        if self._console is None:
            from rich.console import Console

            object.__setattr__(self, "_console", Console(**self._settings))
        return self._console

    def forget(self) -> None:
        """The next use makes a new console (a test's runner sets its own terminal width)."""
        object.__setattr__(self, "_console", None)

    def __getattr__(self, name: str):
        return getattr(self._made(), name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self._made(), name, value)

    def __enter__(self):
        return self._made().__enter__()

    def __exit__(self, *exc) -> None:
        self._made().__exit__(*exc)


# emoji=False: a name or message holding `:smile:` prints as written (and rich's emoji table stays unloaded)
console = LazyConsole(emoji=False)
err_console = LazyConsole(stderr=True, soft_wrap=True, emoji=False)


def escape(text: str) -> str:
    """`text` with rich's markup escaped (rich loaded only by a command that prints)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def fail(message: str, code: int = 2) -> None:
    """Print one line to stderr (at most LINE_LIMIT characters) and exit with `code`."""
    err_console.print(f"[bold red]error:[/] {line_cut(message)}", markup=True, highlight=False)
    raise typer.Exit(code)


def line_cut(text: str) -> str:
    """A message cut to what one line may hold (LINE_LIMIT characters with a count of the rest), never in the
    middle of a markup escape."""
    if len(text) <= LINE_LIMIT - 20:
        return text
    head = text[: LINE_LIMIT - 60].rstrip("\\")
    return f"{head}… ({len(text) - len(head):,} more characters)"


def debugging() -> bool:
    """`--debug` or REPRO_DEBUG=1: failures show their traceback."""
    return os.environ.get("REPRO_DEBUG", "") not in ("", "0")


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def quoted(word: str) -> str:
    """`word` as a shell reads it back, in the commands a message suggests."""
    import shlex

    return shlex.quote(word)


def target_argument():
    """The ID argument of the commands that take an experiment or a spec file of one's own."""
    return typer.Argument(
        ...,
        metavar="ID",
        autocompletion=complete.experiment_ids,
        help="Experiment id (`repro list` shows them) or a spec file.",
    )


def overrides_argument(help: str):
    return typer.Argument(None, metavar="[KEY=VALUE]...", help=help)


def boundary(fn: Callable) -> Callable:
    """The error boundary every command runs behind: a ReproError is one line on stderr and its exit code (2: bad
    input, 1: a server refused); a failure of the system (disk full, a file size limit, permission, a file that
    vanished) is one line naming the file and exit 2; input nested too deeply or a number too long to read is one
    line, exit 2; anything else is one line, exit 1, and a hint. No line names a Python exception class, none is
    longer than LINE_LIMIT characters. `--debug` (REPRO_DEBUG=1) shows the traceback instead."""

    @functools.wraps(fn)
    def wrapper(*a, **k):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                return fn(*a, **k)
            except ReproError as exc:
                if debugging():
                    raise
                fail(escape(one_line(exc)), exc.exit_code)
            except OSError as exc:
                if debugging():
                    raise
                where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
                fail(escape(one_line(f"{where}{exc.strerror or exc}")), 2)
            except (KeyboardInterrupt, typer.Exit, typer.Abort, SystemExit):
                raise
            except RecursionError:
                if debugging():
                    raise
                fail("the input is nested too deeply to read (run with --debug for the traceback)", 2)
            except Exception as exc:  # noqa: BLE001 - the boundary: no traceback unless asked
                if debugging():
                    raise
                if isinstance(exc, ValueError) and "integer string conversion" in str(exc):
                    fail("a number in the input has too many digits to read", 2)
                said = one_line(exc) or "no message"
                fail(escape(f"internal error: {said} (run with --debug or REPRO_DEBUG=1 for the traceback)"), 1)
            finally:
                for w in caught:
                    err_console.print(f"[yellow]warning:[/] {escape(line_cut(one_line(w.message)))}", highlight=False)

    return wrapper


def command(*args, **kwargs) -> Callable:
    """`app.command` behind the error boundary (`boundary`)."""

    def decorate(fn: Callable) -> Callable:
        return app.command(*args, **kwargs)(boundary(fn))

    return decorate


def target_and_variant(
    ident: str,
    overrides: list[str] | tuple[str, ...] | None,
    limit: int | None,
    scale: str | None = None,
    rows: list[str] | None = None,
):
    """The spec an id or a spec file names, and what this run changes from the committed spec; given a `scale`,
    the spec with the variant's overrides applied to that scale's settings and the `rows` selected."""
    from repro.variants import load, resolve

    spec, variant = load(ident, overrides, limit)
    return (spec if scale is None else resolve(spec, scale, rows, variant)), variant


def view_inputs(view, variant) -> dict:
    """What `repro table -o` and `repro plot -o` read, which their output may not replace: the spec file and the
    folders of its records (the variant's, else the results and scratch folders)."""
    from repro.names import inside
    from repro.paths import results_read_roots

    roots = [variant.results_root()] if not variant.empty else [root for root, _ in results_read_roots()]
    inputs = {"spec file": view.spec.path}
    for name, root in zip(("records folder", "scratch records folder"), roots):
        inputs[name] = inside(root, view.spec.paper, view.spec.id)
    return inputs


def variant_view(ident: str, overrides: list[str] | None, limit: int | None, scale: str, columns: str | None):
    """The table view of a spec, or of the variant these overrides / this limit / this spec file name."""
    from repro.report import build_view

    spec, variant = target_and_variant(ident, overrides, limit)
    picked = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    view = build_view(spec, scale, results_root=variant.results_root(), columns=picked)
    view.variant = view.variant or variant.to_json()  # said in the caption even before it has results
    return view, variant
