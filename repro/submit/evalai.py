"""Talking to an EvalAI server: files go through the `evalai` client library, never its console script.

The console script (`evalai.main`) asks PyPI for a newer version before anything else, so it is not
used. The client's submission functions are called directly, inside `_client_session`, which
- points the client at the resolved host and token by replacing the lookups of `evalai.utils.auth`
  (`get_user_auth_token`, `HOST_URL_FILE_PATH`, `API_HOST_URL`) for the duration of the call, so the
  token never touches the disk and the user's `~/.evalai/` is read when the command runs, not when the
  client is imported;
- captures what the client prints (it reports ids and errors with `click.echo`, and exits with
  `sys.exit`) so the user sees one clear line instead;
- records every HTTP call the client makes (status and body, never headers), which gives the new
  submission's id (the client returns None) and the server's own error text. Only the name `requests`
  inside the client's own modules is swapped for the recorder; the rest of the process is untouched.

Read-only calls the client has no quiet function for (phase list, phase detail, remaining
submissions, result files) use `requests` directly with the same bearer header.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from repro.errors import ReproError, reason
from repro.terminal import printable

DEFAULT_HOST = "https://eval.ai"
TIMEOUT_S = 60  # seconds without a byte before a call counts as failed
DEADLINE_S = 120.0  # seconds one call may take in all (REPRO_EVALAI_DEADLINE_S)
UPLOAD_MIN_RATE = 32 * 1024  # bytes/s an upload is allowed on top of DEADLINE_S (its size at this rate)
MAX_PAGES = 50  # pages of one paginated list followed at most
MAX_BODY = 64 << 20  # bytes of one answer read at most
REDACT_RUN = 6  # this many consecutive characters of the token are redacted wherever they appear
TERMINAL = ("finished", "failed", "cancelled", "archived")


class ServerError(ReproError):
    """The server refused or failed; the message is one line, without control characters or escape
    sequences (it carries the server's own text). Exit code 1: the input was fine."""

    exit_code = 1

    def __init__(self, message: str, status: int | None = None):
        super().__init__(printable(message))
        self.status = status

    @property
    def transient(self) -> bool:
        return self.status is None or self.status >= 500


# --- configuration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Connection:
    """Host and token. The token is kept out of repr so it cannot leak into a log or traceback."""

    host: str
    token: str = field(repr=False)

    def redact(self, text: str) -> str:
        """The text with every echo of the token replaced by `***`.

        Besides the whole token as is and base64-encoded, any run of 6 or more consecutive characters
        of the token is removed in whatever case, encoding and form the server echoes it: %xx URL escapes
        (also twice encoded, %25xx), HTML character references (&#65; &#x41; &amp;#65; and named
        ones), JSON \\u escapes; NFKC-normalised (fullwidth letters), with zero-width characters, spaces and
        separators (- _ . : /) between its characters; and re-encoded as hex, base32, base64 or rot13.
        """
        if not self.token:
            return text
        import base64
        import codecs

        raw = self.token.encode()
        whole = base64.b64encode(raw).decode().rstrip("=")
        if len(whole) >= REDACT_RUN:
            text = text.replace(whole, "***")
        text = _redact_runs(text, self.token)
        for encoded, run in (
            (raw.hex(), 2 * REDACT_RUN),  # 6 bytes of the token, as hex digits
            (base64.b32encode(raw).decode().rstrip("="), 2 * REDACT_RUN),
            (codecs.encode(self.token, "rot13"), REDACT_RUN),
        ):
            text = _redact_runs(text, encoded, run)
        return text

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def evalai_dir() -> Path:
    return Path.home() / ".evalai"


def resolve_connection(host: str | None = None, token: str | None = None) -> Connection:
    """The user's EvalAI configuration, as the client resolves it, with `--host`/`--token` overriding.

    Host: `--host`, else `~/.evalai/host_url` (raw URL), else `$EVALAI_API_URL`, else https://eval.ai.
    Token: `--token` (the token itself, or a path to a token.json), else `~/.evalai/token.json`.
    """
    if not host:
        host_file = evalai_dir() / "host_url"
        if host_file.is_file():
            host = host_file.read_text(encoding="utf-8").strip()
        else:
            host = os.environ.get("EVALAI_API_URL", DEFAULT_HOST)
    host = host.strip().rstrip("/")
    if not re.match(r"^https?://[^/\s]+", host):
        raise ReproError(
            f"EvalAI host {host!r} is not an http(s) URL (from --host, ~/.evalai/host_url or EVALAI_API_URL)"
        )
    if token and Path(token).is_file():
        token = _token_from_file(Path(token))
    if not token:
        path = evalai_dir() / "token.json"
        if not path.is_file():
            raise ReproError(
                f"no EvalAI token: save the token from your EvalAI profile page as {path} "
                '({"token": "..."}) or pass --token'
            )
        token = _token_from_file(path)
    return Connection(host=host, token=token.strip())


def _token_from_file(path: Path) -> str:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReproError(f"{path}: not a readable token file ({reason(exc)})") from None
    token = data.get("token") if isinstance(data, dict) else None
    if not isinstance(token, str) or not token.strip():
        raise ReproError(f'{path}: no "token" string in it')
    return token


# --- redaction, hosts, deadlines -------------------------------------------------------------------

_UNIT = re.compile(
    r"%(?:25)*(?P<pct>[0-9A-Fa-f]{2})"  # %41, twice encoded %2541, ...
    r"|&(?:amp;)*#(?P<dec>[0-9]{1,7});"  # &#65;  &amp;#65;
    r"|&(?:amp;)*#[xX](?P<hex>[0-9A-Fa-f]{1,6});"  # &#x41;
    r"|&(?:amp;)*(?P<name>[A-Za-z][A-Za-z0-9]{1,31});"  # &lt; ...
    r"|\\u(?P<json>[0-9A-Fa-f]{4})"  # JSON \u0041
)


# what may stand between two characters of an echoed token without hiding it: zero-width characters, spaces and
# the separators a server or a person puts into long strings
_SEPARATORS = frozenset("\u200b\u200c\u200d\u2060\ufeff\u00ad \t\n\r-_.:/")


def _decoded_units(text: str) -> list[tuple[str, int, int]]:
    """`text` as (normalised characters, start, end) units: an escape sequence is one unit; a unit's characters are
    its NFKC form in lower case (a fullwidth Ａ is a), and a separator's are none."""
    import html
    import unicodedata

    units, i = [], 0
    while i < len(text):
        m = _UNIT.match(text, i)
        ch = None
        if m:
            if m["pct"] is not None:
                ch = chr(int(m["pct"], 16))
            elif m["dec"] is not None and int(m["dec"]) < 0x110000:
                ch = chr(int(m["dec"]))
            elif m["hex"] is not None and int(m["hex"], 16) < 0x110000:
                ch = chr(int(m["hex"], 16))
            elif m["name"] is not None:
                named = html.unescape(f"&{m['name']};")
                ch = named if len(named) == 1 else None
            elif m["json"] is not None:
                ch = chr(int(m["json"], 16))
        if ch is not None:
            start, i = i, m.end()
        else:
            ch, start, i = text[i], i, i + 1
        units.append(("" if ch in _SEPARATORS else unicodedata.normalize("NFKC", ch).lower(), start, i))
    return units


def _normalised(token: str) -> str:
    import unicodedata

    return "".join(c for c in unicodedata.normalize("NFKC", token).lower() if c not in _SEPARATORS)


def _redact_runs(text: str, token: str, run: int = REDACT_RUN) -> str:
    """Replace each stretch of `text` that decodes to a run of >= `run` consecutive characters of `token`
    (any case, any normal form, separators ignored) by `***`."""
    lowered = _normalised(token)
    run = min(run, len(lowered))
    if run == 0:
        return text
    grams = {lowered[k : k + run] for k in range(len(lowered) - run + 1)}
    units = _decoded_units(text)
    owner = [k for k, (chars, _, _) in enumerate(units) for _ in chars]  # decoded position -> its unit
    decoded = "".join(u[0] for u in units)
    marked = [False] * len(units)
    for pos in range(len(decoded) - run + 1):
        if decoded[pos : pos + run] in grams:
            for k in range(owner[pos], owner[pos + run - 1] + 1):  # separators inside the run go with it
                marked[k] = True
    if not any(marked):
        return text
    out, last = [], 0
    for k, (_, start, end) in enumerate(units):
        if marked[k]:
            if k == 0 or not marked[k - 1]:
                out.append(text[last:start] + "***")
            last = end
    out.append(text[last:])
    return "".join(out)


def _request_failure(exc: BaseException) -> str:
    """What a failed request ran into, in words (no exception class names)."""
    kinds = (
        (requests.Timeout, "timed out"),
        (requests.TooManyRedirects, "too many redirects"),
        (requests.ConnectionError, "connection failed"),
        (requests.HTTPError, "the server answered with an error"),
    )
    return next((words for kind, words in kinds if isinstance(exc, kind)), "the request failed")


def _origin(url: str) -> tuple[str, str, int | None]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = -1
    return scheme, (parts.hostname or "").lower(), port


def same_host(url: str, host: str) -> bool:
    """`url` is on the configured EvalAI `host` (same scheme, name and port): the only place the token goes."""
    return _origin(url) == _origin(host)


def deadline_s() -> float:
    """Seconds one EvalAI call may take in all, headers and body: `$REPRO_EVALAI_DEADLINE_S`, default 120."""
    raw = os.environ.get("REPRO_EVALAI_DEADLINE_S", "").strip()
    if not raw:
        return DEADLINE_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ReproError(f"REPRO_EVALAI_DEADLINE_S={raw!r}: give a positive number of seconds")
    return value


class DeadlineExceeded(requests.Timeout):
    """A call that did not complete (headers and whole body) within its deadline."""


def bounded_request(fn: Callable[..., requests.Response], url: str, *args: Any, **kwargs: Any) -> requests.Response:
    """`fn(url, ...)` (requests.get/post/put) with the whole call, headers and body, under one deadline.

    A server that trickles a byte now and then defeats `requests`' per-read timeout; here the call runs
    in a worker thread and is abandoned (DeadlineExceeded) once `deadline_s()` has passed. An upload
    gets its size at UPLOAD_MIN_RATE on top. The body is read whole (at most MAX_BODY bytes).
    """
    deadline = deadline_s()
    data = kwargs.get("data")
    if isinstance(data, (bytes, bytearray)):
        deadline += len(data) / UPLOAD_MIN_RATE
    read_timeout = min(TIMEOUT_S, deadline)
    kwargs["timeout"] = (read_timeout, read_timeout)
    kwargs["stream"] = True
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            response = fn(url, *args, **kwargs)
            box["response"] = response
            body = bytearray()
            for chunk in response.iter_content(1 << 16):
                body += chunk
                if len(body) > MAX_BODY:
                    raise requests.exceptions.ContentDecodingError(f"an answer of more than {MAX_BODY} bytes")
            response._content = bytes(body)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="evalai-call", daemon=True)
    worker.start()
    worker.join(deadline)
    if worker.is_alive():  # left to end on its own (its reads time out): closing would wait for it
        raise DeadlineExceeded(f"no complete answer within {deadline:g} s (set REPRO_EVALAI_DEADLINE_S to allow more)")
    if "error" in box:
        raise box["error"]
    return box["response"]


# --- recording the client's HTTP calls ------------------------------------------------------------


@dataclass
class Call:
    method: str
    url: str
    status: int | None = None
    body: Any = None  # parsed JSON, or text
    json_body: bool = False
    reason: str = ""
    error: str = ""  # connection-level failure
    etag: str | None = None

    @property
    def failed(self) -> bool:
        return bool(self.error) or (self.status is not None and self.status >= 400)


class UploadAborted(BaseException):
    """Raised into the client after a failed storage upload so it cannot queue an incomplete file.

    A BaseException, because the client catches only `requests` exceptions around these calls.
    """


# the client's modules whose `requests` name the recorder replaces while a client call runs
CLIENT_MODULES = ("evalai.utils.auth", "evalai.utils.common", "evalai.utils.submissions", "evalai.utils.requests")


class _Requests:
    """What the client's modules see as `requests` during a call: the recorder's get/post/put, everything
    else (`requests.exceptions`, `requests.packages`, ...) the real module's."""

    def __init__(self, **functions: Callable) -> None:
        self.__dict__.update(functions)

    def __getattr__(self, name: str) -> Any:
        return getattr(requests, name)


class _Recorder:
    """Wraps `requests.get/post/put` as the client's own modules (CLIENT_MODULES) see them, and keeps each call.

    Only the name `requests` inside those modules is replaced, for the duration of the session: the
    `requests` module itself, and every other user of it in the process (another thread included), is
    untouched. Every call runs under `bounded_request`'s deadline, and a call to any host but `host` goes
    without the Authorization header (the token is for the configured server only).
    """

    def __init__(self, host: str = "", modules: tuple[Any, ...] = ()) -> None:
        self.host = host
        self.calls: list[Call] = []
        self.storage_upload_failed = False
        self._modules = modules
        self._saved: dict[Any, Any] = {}

    def __enter__(self) -> "_Recorder":
        scoped = _Requests(**{name: self._wrap(name, getattr(requests, name)) for name in ("get", "post", "put")})
        for module in self._modules:
            self._saved[module] = module.requests
            module.requests = scoped
        return self

    def __exit__(self, *exc: Any) -> None:
        for module, saved in self._saved.items():
            module.requests = saved
        self._saved.clear()

    def _wrap(self, method: str, fn: Callable) -> Callable:
        def call(url: str, *args: Any, **kwargs: Any) -> requests.Response:
            if self.storage_upload_failed and method == "post":
                raise UploadAborted()
            if self.host and not same_host(url, self.host) and isinstance(kwargs.get("headers"), dict):
                kwargs["headers"] = {k: v for k, v in kwargs["headers"].items() if k.lower() != "authorization"}
            record = Call(method.upper(), url)
            self.calls.append(record)
            try:
                response = bounded_request(fn, url, *args, **kwargs)
            except requests.RequestException as exc:
                record.error = str(exc) if isinstance(exc, DeadlineExceeded) else _request_failure(exc)
                if method == "put":
                    self.storage_upload_failed = True
                raise
            record.status, record.reason = response.status_code, response.reason or ""
            record.etag = response.headers.get("ETag")
            try:
                record.body, record.json_body = response.json(), True
            except ValueError:
                record.body = response.text[:500]
            if method == "put" and (response.status_code != 200 or not record.etag):
                self.storage_upload_failed = True
            return response

        return call


# --- the client --------------------------------------------------------------------------------


def _import_client() -> Any:
    """The client's modules used here; a clear line when the client is not installed."""
    try:
        for module in CLIENT_MODULES:
            importlib.import_module(module)
        return importlib.import_module("evalai.utils.auth")
    except ImportError as exc:
        raise ReproError(
            f"the evalai client is not importable ({exc}); install it with "
            "`pip install --no-deps evalai==1.3.18` (see the Makefile)"
        ) from None


# one client session at a time: each replaces names inside the client's modules and puts them back
_SESSION = threading.Lock()


@contextlib.contextmanager
def _client_session(conn: Connection) -> Iterator[tuple[_Recorder, io.StringIO]]:
    auth = _import_client()
    modules = tuple(sys.modules[name] for name in CLIENT_MODULES)
    with _SESSION:
        saved = {name: getattr(auth, name) for name in ("get_user_auth_token", "HOST_URL_FILE_PATH", "API_HOST_URL")}
        output = io.StringIO()
        auth.get_user_auth_token = lambda: conn.token
        auth.HOST_URL_FILE_PATH = os.path.join(os.devnull, "no-host-file")  # never exists: API_HOST_URL is used
        auth.API_HOST_URL = conn.host
        try:
            with (
                _Recorder(conn.host, modules) as recorder,
                contextlib.redirect_stdout(output),
                contextlib.redirect_stderr(output),
            ):
                yield recorder, output
        finally:
            for name, value in saved.items():
                setattr(auth, name, value)


def _clean_output(text: str) -> str:
    lines = [printable(line).strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("Use `evalai") and "%|" not in line]
    return " ".join(lines)


def _server_message(call: Call) -> str:
    body = call.body
    if call.json_body and isinstance(body, dict):
        for key in ("error", "detail", "message"):
            if isinstance(body.get(key), str) and body[key].strip():
                return body[key].strip()
        parts = []
        for key, value in body.items():
            text = "; ".join(str(v) for v in value) if isinstance(value, list) else str(value)
            parts.append(f"{key}: {text}")
        return "; ".join(parts)
    if call.json_body and isinstance(body, (list, str)):
        return str(body)[:200]
    return call.reason or "no explanation"


def describe_http_failure(call: Call, host: str) -> ServerError:
    """One line for a failed call: what the server said and what the user can do."""
    if call.error:
        return ServerError(f"could not reach EvalAI at {host} ({call.error})")
    message = _server_message(call).replace("\n", " ")
    status = call.status or 0
    if status == 401 or ("token" in message.lower() and status in (400, 403)):
        text = (
            f"EvalAI rejected the token (HTTP {status}: {message}); save a fresh token from your "
            "EvalAI profile in ~/.evalai/token.json or pass --token"
        )
    elif status >= 500:
        text = (
            f"EvalAI server error (HTTP {status} {message}); try again later, after checking the phase's "
            "submissions on the EvalAI page"
        )
    elif status == 404:
        text = f"EvalAI has no such resource (HTTP 404: {message}) at {call.url.split('?')[0]}"
    else:
        text = f"EvalAI refused (HTTP {status}): {message}"
    return ServerError(text, status=status)


class EvalAI:
    """One server, one token. Methods raise ServerError (one line, token redacted) on any failure."""

    def __init__(self, conn: Connection):
        self.conn = conn

    # read-only calls ------------------------------------------------------------------------

    def _get(self, path: str, params: dict | None = None) -> Any:
        url = path if "://" in path else f"{self.conn.host}{path}"
        if not same_host(url, self.conn.host):
            raise ServerError(
                f"EvalAI at {self.conn.host} pointed to another host ({printable(url)[:200]}); not followed: "
                "the token is sent only to the configured host"
            )
        call = Call("GET", url)
        try:
            response = bounded_request(requests.get, url, headers=self.conn.headers, params=params)
        except requests.RequestException as exc:
            call.error = str(exc) if isinstance(exc, DeadlineExceeded) else _request_failure(exc)
            raise self._redacted(describe_http_failure(call, self.conn.host)) from None
        call.status, call.reason = response.status_code, response.reason or ""
        try:
            call.body, call.json_body = response.json(), True
        except ValueError:
            call.body = response.text[:500]
        if call.failed:
            raise self._redacted(describe_http_failure(call, self.conn.host))
        if not call.json_body:
            raise ServerError(f"EvalAI at {self.conn.host} answered {path} with something that is not JSON")
        return call.body

    def _redacted(self, error: ServerError) -> ServerError:
        return ServerError(self.conn.redact(str(error)), status=error.status)

    def phases(self, challenge: int) -> list[dict]:
        """Every phase of a challenge (follows pagination)."""
        found: list[dict] = []
        url: Any = f"/api/challenges/challenge/{challenge}/challenge_phase"
        seen: set[str] = set()
        while url:
            if not isinstance(url, str):
                raise ServerError(f"EvalAI at {self.conn.host} gave a `next` link that is not a URL")
            if url in seen or len(seen) >= MAX_PAGES:
                why = "points back to a page already read" if url in seen else f"goes past {MAX_PAGES} pages"
                raise ServerError(f"EvalAI at {self.conn.host}: the phase list of challenge {challenge} {why}")
            seen.add(url)
            page = self._get(url)
            if isinstance(page, list):
                return found + [p for p in page if isinstance(p, dict)]
            if not isinstance(page, dict):
                raise ServerError(f"EvalAI at {self.conn.host}: the phase list is not a JSON object or list")
            results = page.get("results") or []
            found += [p for p in results if isinstance(p, dict)] if isinstance(results, list) else []
            url = page.get("next")
        return found

    def phase(self, challenge: int, phase: int) -> dict:
        return self._get(f"/api/challenges/challenge/{challenge}/challenge_phase/{phase}")

    def remaining(self, challenge: int, phase: int) -> dict | None:
        """The `limits` of one phase from `remaining_submissions`, or None when the server does not say."""
        try:
            data = self._get(f"/api/jobs/{challenge}/remaining_submissions/")
        except ServerError:
            return None
        for entry in data.get("phases", []) if isinstance(data, dict) else []:
            if entry.get("id") == phase and isinstance(entry.get("limits"), dict):
                return entry["limits"]
        return None

    def result_file(self, url: str) -> Any:
        """The evaluated result: fetched without the auth header, as the client does."""
        try:
            response = bounded_request(requests.get, url)
            response.raise_for_status()
        except requests.RequestException as exc:
            why = str(exc) if isinstance(exc, DeadlineExceeded) else _request_failure(exc)
            raise ServerError(self.conn.redact(f"could not fetch the result file ({why})")) from None
        try:
            return response.json()
        except ValueError:
            return response.text

    # through the client ---------------------------------------------------------------------

    def submit(
        self,
        challenge: int,
        phase: int,
        path: Path,
        large: bool,
        metadata: dict[str, str],
        on_read: Callable[[int], None] | None = None,
    ) -> int:
        """Send `path` to (challenge, phase) with the client's direct or presigned upload; the new id."""
        _import_client()  # a clear line when the client is missing
        from evalai.utils.common import upload_file_using_presigned_url
        from evalai.utils.submissions import make_submission

        handle = _ReadCounter(path, on_read)
        failure: BaseException | None = None
        with _client_session(self.conn) as (recorder, output):
            try:
                if large:
                    upload_file_using_presigned_url(phase, handle, "submission", dict(metadata))
                else:
                    make_submission(challenge, phase, handle, dict(metadata), {})
            except (SystemExit, UploadAborted, Exception) as exc:  # the client exits or trips on bad bodies
                failure = exc
            finally:
                handle.close()
        return self._submitted_id(recorder, output.getvalue(), failure, large)

    def _submitted_id(self, recorder: _Recorder, output: str, failure: BaseException | None, large: bool) -> int:
        calls = recorder.calls
        created = next(
            (
                c
                for c in calls
                if c.method == "POST"
                and c.json_body
                and isinstance(c.body, dict)
                and c.status in (200, 201)
                and ("submission_pk" in c.body or "id" in c.body)
            ),
            None,
        )
        sid = None
        if created is not None:
            sid = created.body.get("submission_pk", created.body.get("id"))
        if recorder.storage_upload_failed:
            put = next((c for c in reversed(calls) if c.method == "PUT"), None)
            why = (put.error or f"HTTP {put.status}" + ("" if put.etag else ", no ETag")) if put else "no upload"
            queued = "" if sid is None else f"; submission {sid} was created but not queued for evaluation"
            raise ServerError(f"uploading the file to EvalAI's storage failed ({why}){queued}")
        failed = next((c for c in reversed(calls) if c.failed), None)
        if failed is not None:
            raise self._redacted(describe_http_failure(failed, self.conn.host))
        if failure is not None or sid is None:
            said = _clean_output(output) or (reason(failure) if failure else "no submission id returned")
            raise ServerError(self.conn.redact(f"the evalai client did not complete the submission: {said}"))
        return int(sid)

    def submission(self, submission_id: int) -> dict:
        """`GET /api/jobs/submission/{id}` through the client's `submission_details_request`."""
        _import_client()
        from evalai.utils.submissions import submission_details_request

        with _client_session(self.conn) as (recorder, output):
            try:
                response = submission_details_request(submission_id)
            except (SystemExit, Exception):
                response = None
        if response is None or not recorder.calls or recorder.calls[-1].failed:
            failed = next((c for c in reversed(recorder.calls) if c.failed), None)
            if failed is not None:
                raise self._redacted(describe_http_failure(failed, self.conn.host))
            said = _clean_output(output.getvalue()) or "no answer"
            raise ServerError(self.conn.redact(f"could not read submission {submission_id}: {said}"))
        try:
            data = response.json()
        except ValueError:
            raise ServerError(f"EvalAI answered submission {submission_id} with something that is not JSON") from None
        if not isinstance(data, dict) or "status" not in data:
            raise ServerError(f"EvalAI's answer for submission {submission_id} has no status")
        return data


class _ReadCounter:
    """A binary file opened for reading that reports the bytes read (drives the upload progress bar).

    Keeps the real path as `.name`: the client stats it for the size and sends its base name.
    """

    def __init__(self, path: Path, on_read: Callable[[int], None] | None):
        self._file = open(path, "rb")
        self.name = str(path)
        self._on_read = on_read

    def read(self, size: int = -1) -> bytes:
        data = self._file.read(size)
        if self._on_read is not None and data:
            self._on_read(len(data))
        return data

    def close(self) -> None:
        self._file.close()
