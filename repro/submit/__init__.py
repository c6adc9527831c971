"""`repro submit`: check a test-set prediction file, send it to its server, record it, follow it.

The order is the point: every local check (`repro.submit.check`) runs before any network call, so
an incomplete file never leaves the machine and never costs one of the few test-std submissions.
EvalAI targets are then sent through the `evalai` client (`repro.submit.evalai`) after showing the
target, phase, file, question count and remaining submissions and asking for confirmation; the
submission is recorded (`repro.submit.records`) and, with `--wait`, polled until evaluated. Targets
on other servers get the exact file they require and instructions for uploading it by hand.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from repro.errors import ReproError, cut
from repro.paths import portable
from repro.submit.check import (
    MB,
    Preflight,
    Target,
    get_target,
    load_targets,
    not_paper_scale,
    package_manual,
    preflight,
    refuse_not_paper_scale,
    write_upload_file,
)
from repro.submit.records import add_record, find_record, resolve_phase, update_record
from repro.terminal import printable
from repro.utils import sha256_file

# --- the command --------------------------------------------------------------------------------


@dataclass
class SubmitOptions:
    target: str
    predictions: Path
    questions: Path | None = None
    wait: bool = False
    dry_run: bool = False
    yes: bool = False
    host: str | None = None
    token: str | None = None
    phase: int | None = None
    large: bool = False
    method: str | None = None
    poll_s: float = 5.0
    timeout_s: float = 3600.0


def submit(opts: SubmitOptions, console: Console, err: Console, confirm: Callable[[str], bool]) -> int:
    """The whole flow; returns the exit code. Raises ReproError/ServerError with one line on failure."""
    target = get_target(opts.target)
    with err.status(f"checking {opts.predictions} against {target.name}…"):
        check = preflight(target, opts.predictions, opts.questions)
    origin = not_paper_scale(opts.predictions)  # smoke, synthetic, --limit, variant: checked, never sent
    if origin is not None and not opts.dry_run:
        refuse_not_paper_scale(target, opts.predictions)
    if not target.on_evalai:
        return _prepare_manual(check, opts, console)
    if opts.dry_run:
        _summary(console, check, phase=(opts.phase or target.phase, ""), large=_is_large(check, opts), limits=None)
        console.print("[bold]dry run:[/] the file passed every check; nothing was sent")
        if origin is not None:
            console.print(f"[yellow]note:[/] made by {escape(origin)}: a submission of it is refused", highlight=False)
        return 0

    from repro.submit.evalai import EvalAI, resolve_connection

    client = EvalAI(resolve_connection(opts.host, opts.token))
    phase_id, phase_name = resolve_phase(target, client, opts.phase)
    detail = client.phase(target.challenge, phase_id)
    if isinstance(detail.get("allowed_submission_file_types"), str):
        detail = {**detail, "allowed_submission_file_types": said(client, detail["allowed_submission_file_types"])}
    phase_name = said(client, detail.get("name") or phase_name)
    limits = _said_limits(client, client.remaining(target.challenge, phase_id))
    upload = write_upload_file(check)
    _check_file_type(detail, upload, phase_name)
    large = _is_large(check, opts)
    _summary(
        console,
        check,
        (phase_id, phase_name),
        large,
        _said_limits(client, limits),
        host=client.conn.host,
        detail=detail,
    )
    _refuse_when_exhausted(limits, phase_name)
    if not opts.yes and not confirm(f"Submit {upload.name} to {target.name} ({phase_name})?"):
        console.print("not submitted")
        return 1
    metadata = {"method_name": opts.method} if opts.method else {}
    submission_id = _send(client, target, phase_id, upload, large, metadata, err)
    console.print(f"[green]submitted[/] {escape(upload.name)} as submission [bold]{submission_id}[/]", highlight=False)
    record = {
        "target": target.name,
        "challenge": target.challenge,
        "phase": phase_id,
        "phase_name": phase_name,
        "host": client.conn.host,
        "predictions": portable(str(check.source.absolute())),  # as result records name files (repro.paths)
        "file": portable(str(upload.absolute())),
        "sha256": sha256_file(upload),
        "bytes": upload.stat().st_size,
        "questions": check.count,
        "upload": "presigned" if large else "direct",
        "submission_id": submission_id,
        "submitted_at": _now(),
        "status": "submitted",
    }
    console.print(f"recorded in {escape(str(add_record(record)))}", highlight=False)
    if not opts.wait:
        console.print(f"follow it with: repro submit --status {submission_id} --wait", highlight=False)
        return 0
    return follow(client, submission_id, console, err, opts.poll_s, opts.timeout_s)


def show_status(
    submission_id: int,
    console: Console,
    err: Console,
    wait: bool,
    host: str | None = None,
    token: str | None = None,
    poll_s: float = 5.0,
    timeout_s: float = 3600.0,
) -> int:
    """`repro submit --status ID`: the submission's status, and its result once evaluated."""
    from repro.submit.evalai import TERMINAL, EvalAI, resolve_connection

    record = find_record(submission_id)
    client = EvalAI(resolve_connection(host or (record or {}).get("host"), token))
    if wait:
        return follow(client, submission_id, console, err, poll_s, timeout_s)
    data = client.submission(submission_id)
    if data["status"] in TERMINAL:
        return _finish(client, data, console)
    console.print(
        f"submission {submission_id}: [bold]{escape(said(client, data['status']))}[/] "
        f"(submitted {escape(said(client, data.get('submitted_at', '?')))})",
        highlight=False,
    )
    return 0


def follow(client: Any, submission_id: int, console: Console, err: Console, poll_s: float, timeout_s: float) -> int:
    """Poll `GET /api/jobs/submission/{id}` with backoff until finished, failed or cancelled."""
    from repro.submit.evalai import TERMINAL, ServerError

    start, delay, retries = time.monotonic(), max(poll_s, 0.001), 0
    with _pinned(err).status(f"waiting for submission {submission_id}…") as spinner:
        while True:
            try:
                data = client.submission(submission_id)
                retries = 0
            except ServerError as exc:
                retries += 1
                if not exc.transient or retries > 5:
                    raise
                data = {"status": f"unreachable ({exc})"}
            elapsed = time.monotonic() - start
            spinner.update(f"submission {submission_id}: {escape(said(client, data['status']))} ({elapsed:.0f} s)")
            if data["status"] in TERMINAL:
                return _finish(client, data, console)
            if elapsed + delay > timeout_s:
                raise ServerError(
                    f"submission {submission_id} is still {said(client, data['status'])} after {elapsed:.0f} s; "
                    f"check later with `repro submit --status {submission_id} --wait`"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 60.0)


def said(client: Any, text: Any, limit: int = 200) -> str:
    """Text a server sent, as it may be printed or stored: one line, no escape sequences, the token redacted in
    every form it could be echoed in (`Connection.redact`), cut after `limit` characters."""
    return cut(client.conn.redact(printable(text)), limit)


def _said_limits(client: Any, limits: dict | None) -> dict | None:
    """The remaining-submission counts as numbers, and the server's message (if any) redacted and cut."""
    if not isinstance(limits, dict):
        return None
    out = {k: v for k, v in limits.items() if isinstance(v, int) and not isinstance(v, bool)}
    for key in ("message", "remaining_time"):
        if limits.get(key) is not None:
            out[key] = said(client, limits[key])
    return out


def _finish(client: Any, data: dict, console: Console) -> int:
    """The end of a submission: its result as numbers (a table, and the record), or its failure in one line; what
    the server sent (the result file, the error log) is kept in a file whose path is printed, never shown raw."""
    from repro.submit.evalai import ServerError

    sid, status = data.get("id"), said(client, data["status"])
    changes: dict[str, Any] = {"status": status, "completed_at": said(client, data.get("completed_at"))}
    if status == "finished":
        result = client.result_file(data["submission_result_file"]) if data.get("submission_result_file") else None
        kept = None if result is None else _keep(client, sid, "result.json", result)
        numbers = result_numbers(client, result)
        changes.update(result=numbers, result_file=None if kept is None else portable(str(kept)))
        update_record(sid, client.conn.host, **changes)
        console.print(f"submission {sid}: [bold green]finished[/]", highlight=False)
        render_result(console, numbers, result is not None)
        if kept is not None:
            console.print(f"the server's result file: {escape(str(kept))}", highlight=False)
        return 0
    where = ""
    if status == "failed" and data.get("stderr_file"):
        try:
            kept = _keep(client, sid, "stderr.txt", client.result_file(data["stderr_file"]))
            changes["stderr_file"] = portable(str(kept))
            where = f"; its error log is in {kept}"
        except ServerError:
            where = " (its error log could not be fetched)"
    update_record(sid, client.conn.host, **changes)
    raise ServerError(f"submission {sid} {status} on the server{where}")


def _keep(client: Any, sid: Any, what: str, content: Any) -> Path:
    """A file the server sent, in `submissions/` beside the records, with the token redacted."""
    from repro.names import inside
    from repro.submit.records import records_path
    from repro.utils import write_bytes_atomic

    text = content if isinstance(content, str) else json.dumps(content, indent=2)
    path = inside(records_path().parent, "submissions", f"{int(sid)}.{what}")
    write_bytes_atomic(path, client.conn.redact(text).encode("utf-8"))
    return path


def result_numbers(client: Any, result: Any) -> list[dict] | None:
    """A VQA-style result `[{split: {metric: value}}]` as numbers only (names redacted and cut to 40 characters,
    values finite numbers); None for anything else."""
    import math

    if not isinstance(result, list) or not all(isinstance(x, dict) for x in result):
        return None
    out = []
    for entry in result:
        rows = {}
        for split, metrics in entry.items():
            if not isinstance(metrics, dict):
                return None
            values = {
                said(client, name, 40): float(value)
                for name, value in metrics.items()
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            }
            rows[said(client, split, 40)] = values
        out.append(rows)
    return out


def render_result(console: Console, numbers: list[dict] | None, sent: bool = True) -> None:
    """The result's numbers as a table (`result_numbers`); a line when the server sent none or no table."""
    rows = [(split, metrics) for entry in numbers or [] for split, metrics in entry.items()]
    if rows:
        names = list(dict.fromkeys(k for _, m in rows for k in m))
        table = Table(title="evaluated result")
        table.add_column("split")
        for name in names:
            table.add_column(escape(name), justify="right")
        for split, metrics in rows:
            table.add_row(escape(split), *(f"{metrics[n]:g}" if n in metrics else "–" for n in names))
        console.print(table)
    elif not sent:
        console.print("the server reports no result file")
    else:
        console.print("the server's result is not a table of numbers; open its file (below)")


def _is_large(check: Preflight, opts: SubmitOptions) -> bool:
    return opts.large or check.size > check.target.direct_upload_max_mb * MB


def _check_file_type(detail: dict, upload: Path, phase_name: str) -> None:
    """The phase's `allowed_submission_file_types` (e.g. ".json, .zip"), when the server lists them."""
    allowed = detail.get("allowed_submission_file_types")
    if not isinstance(allowed, str) or not allowed.strip():
        return
    suffixes = [s.strip().lower() for s in allowed.split(",") if s.strip()]
    if not any(upload.name.lower().endswith(suffix) for suffix in suffixes):
        raise ReproError(f"phase {phase_name!r} accepts {', '.join(suffixes)} files, not {upload.name}; nothing sent")


def _refuse_when_exhausted(limits: dict | None, phase_name: str) -> None:
    if not limits:
        return
    for key, what in (
        ("remaining_submissions_today_count", "today"),
        ("remaining_submissions_count", "in all"),
        ("remaining_submissions_this_month_count", "this month"),
    ):
        if limits.get(key) == 0:
            raise ReproError(f"the server reports no submissions left {what} for phase {phase_name!r}; nothing sent")


def _limits_text(limits: dict | None) -> str:
    if not limits:
        return "not reported by the server"
    if "message" in limits:
        return printable(
            f"{limits['message']}" + (f" (next in {limits['remaining_time']})" if limits.get("remaining_time") else "")
        )
    parts = [
        f"{what} {limits[key]}"
        for key, what in (
            ("remaining_submissions_today_count", "today"),
            ("remaining_submissions_this_month_count", "this month"),
            ("remaining_submissions_count", "in all"),
        )
        if key in limits
    ]
    return ", ".join(parts) or "not reported by the server"


def _summary(
    console: Console,
    check: Preflight,
    phase: tuple[int | None, str],
    large: bool,
    limits: dict | None,
    host: str = "",
    detail: dict | None = None,
) -> None:
    target = check.target
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")  # a long path folds onto the next line; it is never cut with an ellipsis
    table.add_row("target", f"{target.name} — {target.title}")
    if host:
        table.add_row("server", host)
    table.add_row("challenge", str(target.challenge))
    phase_id, phase_name = phase
    table.add_row("phase", f"{phase_id if phase_id else '(looked up by name when sending)'} {phase_name}".strip())
    if detail and detail.get("is_active") is False:
        table.add_row("", "[yellow]the server marks this phase inactive[/]")
    table.add_row(
        "file",
        str(check.upload if check.converted and check.upload != check.source else check.source)
        + (f"  ({check.converted})" if check.converted else ""),
    )
    table.add_row("size", f"{check.size / MB:,.2f} MB, {'presigned (large-file)' if large else 'direct'} upload")
    covered = (
        f"{check.count:,} predictions, every one of {check.question_count:,} questions "
        f"({check.target.questions.split if check.target.questions else check.questions}) answered once"
        if check.question_count
        else f"{check.count:,} predictions"
    )
    table.add_row("questions", covered)
    table.add_row("limits", target.limits or "not published")
    if host:
        table.add_row("remaining", _limits_text(limits))
    for note in check.notes:
        table.add_row("note", note)
    console.print(table)


def _pinned(err: Console) -> Console:
    """A console bound to the stream `err` writes to now. The client's output is captured (stdout and
    stderr swapped) while it runs; progress drawn meanwhile must still reach the terminal."""
    return Console(file=err.file, force_terminal=err.is_terminal, width=err.width)


def _send(client: Any, target: Target, phase_id: int, upload: Path, large: bool, metadata: dict, err: Console) -> int:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    with Progress(
        TextColumn("uploading {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=_pinned(err),
        transient=True,
        disable=not err.is_terminal,
        redirect_stdout=False,
        redirect_stderr=False,
    ) as progress:
        task = progress.add_task(upload.name, total=upload.stat().st_size)
        return client.submit(
            target.challenge, phase_id, upload, large, metadata, on_read=lambda n: progress.advance(task, n)
        )


def _prepare_manual(check: Preflight, opts: SubmitOptions, console: Console) -> int:
    target = check.target
    _summary(console, check, (None, ""), large=False, limits=None)
    if opts.dry_run:
        console.print("[bold]dry run:[/] the file passed every check; nothing was written")
        return 0
    out = package_manual(check, opts.method or "repro")
    console.print(f"[green]prepared[/] {escape(str(out))} (sha256 {sha256_file(out)[:16]}…)", highlight=False)
    console.print(f"{target.name} is not on EvalAI; upload it by hand:", highlight=False)
    console.print(escape(target.instructions.strip().format(file=out)), highlight=False)
    return 0


def _now() -> str:
    from repro.utils import now_iso

    return now_iso()


def targets_table() -> Table:
    table = Table(title="submission targets")
    for name in ("target", "server", "challenge / phase", "must answer", "limits"):
        table.add_column(name, overflow="fold")
    for target in load_targets().values():
        where = (
            f"{target.challenge} / {target.phase or ' or '.join(target.phase_names[:2])}"
            if target.on_evalai
            else "by hand"
        )
        table.add_row(
            target.name, target.server, where, target.questions.split if target.questions else "(hidden)", target.limits
        )
    return table
