"""A loopback stand-in for the EvalAI API, enough for the `evalai` client's file submission.

Routes follow EvalAI's submission API (plus the phase list and remaining-submissions calls): phase detail and
list, direct multipart submission, the presigned flow (start, storage PUT, finish, enqueue),
submission detail, and the result / error files. Every request is logged without its headers,
except whether the bearer token matched. `fail[route] = (status, body)` makes a route answer an
error (`fail_times[route] = n`: only the next n times); a dict body is sent as JSON, a str body as HTML.
`answer[path] = (status, body)` answers that exact path (with its query) so, before any route;
`trickle[route] = seconds` sends that route's answer one byte at a time with that pause between bytes.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

PHASES = {
    830: [
        {"id": 1793, "name": "Test-Dev Phase", "codename": "test-dev"},
        {"id": 1794, "name": "Test-Standard Phase", "codename": "test-std"},
        {"id": 1795, "name": "Test-Challenge Phase", "codename": "test-challenge"},
    ],
    874: [
        {"id": 1801, "name": "Test-Standard", "codename": "test-std"},
        {"id": 1802, "name": "Test-Violation Standard", "codename": "test-violation"},
    ],
    225: [
        {"id": 601, "name": "test-dev2019", "codename": "testdev"},
        {"id": 602, "name": "test2019", "codename": "test"},
    ],
}
VQA_RESULT = [{"test-dev": {"yes/no": 87.21, "number": 54.86, "other": 61.02, "overall": 71.05}}]


@dataclass
class Logged:
    method: str
    path: str
    authorized: bool
    fields: dict[str, str] = field(default_factory=dict)
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # part name -> (file name, bytes)
    body: bytes = b""


class EvalAIStub:
    def __init__(self, token: str):
        self.token = token
        self.log: list[Logged] = []
        self.fail: dict[str, tuple[int, Any]] = {}
        self.fail_times: dict[str, int] = {}  # route -> failures left (absent: fail for good)
        self.answer: dict[str, tuple[int, Any]] = {}  # path with query -> (status, body)
        self.trickle: dict[str, float] = {}  # route -> pause between two bytes
        self.submissions: dict[int, dict] = {}
        self.uploads: dict[int, dict[int, bytes]] = {}  # presigned: submission -> part -> bytes
        self.remaining: dict[int, dict] = {}  # phase -> limits
        self.polls_before_done = 1
        self.outcome = "finished"
        self.result: Any = VQA_RESULT
        self.stderr_text = "Traceback (most recent call last):\nKeyError: 'answer'\n"
        self._next_id = 500
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> "EvalAIStub":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def calls(self, method: str | None = None, prefix: str = "") -> list[Logged]:
        return [c for c in self.log if (method is None or c.method == method) and c.path.startswith(prefix)]

    # routing ---------------------------------------------------------------------------------

    def _new_submission(self, phase: int, status: str) -> dict:
        self._next_id += 1
        sub = {
            "id": self._next_id,
            "participant_team": 7,
            "participant_team_name": "repro-team",
            "challenge_phase": phase,
            "status": status,
            "execution_time": "None",
            "submitted_at": "2024-06-01T12:00:00.000000Z",
            "submission_result_file": None,
            "stderr_file": None,
            "stdout_file": None,
            "method_name": "",
            "polls": 0,
        }
        self.submissions[sub["id"]] = sub
        return sub

    def _route(self, method: str, path: str, entry: Logged) -> tuple[str, int, Any]:
        m = re.fullmatch
        if method == "GET" and (g := m(r"/api/challenges/challenge/(\d+)/challenge_phase", path)):
            phases = PHASES.get(int(g[1]), [])
            return "phase_list", 200, {"count": len(phases), "next": None, "previous": None, "results": phases}
        if method == "GET" and (g := m(r"/api/challenges/challenge/(\d+)/challenge_phase/(\d+)", path)):
            found = [p for p in PHASES.get(int(g[1]), []) if p["id"] == int(g[2])]
            if not found:
                return "phase", 404, {"detail": "Not found."}
            return (
                "phase",
                200,
                dict(
                    found[0],
                    challenge=int(g[1]),
                    is_active=True,
                    submission_meta_attributes=[],
                    max_submissions_per_day=1,
                    max_submissions=5,
                    allowed_submission_file_types=".json, .zip, .txt",
                ),
            )
        if method == "GET" and (g := m(r"/api/jobs/(\d+)/remaining_submissions/", path)):
            phases = [
                {
                    "id": p["id"],
                    "name": p["name"],
                    "limits": self.remaining.get(
                        p["id"],
                        {
                            "remaining_submissions_today_count": 1,
                            "remaining_submissions_this_month_count": 5,
                            "remaining_submissions_count": 4,
                        },
                    ),
                }
                for p in PHASES.get(int(g[1]), [])
            ]
            return "remaining", 200, {"participant_team": "repro-team", "participant_team_id": 7, "phases": phases}
        if method == "POST" and (g := m(r"/api/jobs/challenge/(\d+)/challenge_phase/(\d+)/submission/", path)):
            if "input_file" not in entry.files:
                return "submit", 406, {"input_file": ["No file was submitted."]}
            sub = self._new_submission(int(g[2]), "submitted")
            sub["challenge"] = int(g[1])
            sub["method_name"] = entry.fields.get("method_name", "")
            return "submit", 201, {k: v for k, v in sub.items() if k != "polls"}
        if method == "POST" and (g := m(r"/api/jobs/phases/(\d+)/get_submission_file_presigned_url/", path)):
            sub = self._new_submission(int(g[1]), "submitting")
            chunks = int(entry.fields.get("num_file_chunks", "1"))
            urls = [
                {"partNumber": n, "url": f"{self.url}/s3/{sub['id']}?partNumber={n}&uploadId=U{sub['id']}"}
                for n in range(1, chunks + 1)
            ]
            return "presign", 201, {"presigned_urls": urls, "upload_id": f"U{sub['id']}", "submission_pk": sub["id"]}
        if method == "PUT" and (g := m(r"/s3/(\d+)", path)):
            return "s3", 200, None
        if method == "POST" and (g := m(r"/api/jobs/phases/(\d+)/finish_submission_file_upload/(\d+)/", path)):
            return "finish", 201, {"upload_id": entry.fields.get("upload_id"), "submission_pk": int(g[2])}
        if method == "POST" and (g := m(r"/api/jobs/phases/(\d+)/send_submission_message/(\d+)/", path)):
            self.submissions[int(g[2])]["status"] = "submitted"
            return "publish", 200, {}
        if method == "GET" and (g := m(r"/api/jobs/submission/(\d+)", path)):
            sub = self.submissions.get(int(g[1]))
            if sub is None:
                return "poll", 404, {"error": f"Submission {g[1]} does not exist"}
            sub["polls"] += 1
            if sub["polls"] > self.polls_before_done and sub["status"] not in ("finished", "failed"):
                sub["status"] = self.outcome
                if self.outcome == "finished":
                    sub["submission_result_file"] = f"{self.url}/media/result/{sub['id']}.json"
                else:
                    sub["stderr_file"] = f"{self.url}/media/stderr/{sub['id']}.txt"
            elif sub["polls"] <= self.polls_before_done and sub["status"] == "submitted":
                sub["status"] = "running"
            return "poll", 200, {k: v for k, v in sub.items() if k != "polls"}
        if method == "GET" and m(r"/media/result/\d+\.json", path):
            return "result", 200, self.result
        if method == "GET" and m(r"/media/stderr/\d+\.txt", path):
            return "stderr", 200, self.stderr_text
        return "none", 404, {"detail": "Not found."}

    def _handler(self) -> type:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parsed = urlparse(self.path)
                entry = Logged(
                    method, parsed.path, self.headers.get("Authorization") == f"Bearer {stub.token}", body=body
                )
                _parse_body(self.headers.get("Content-Type", ""), body, entry)
                stub.log.append(entry)
                route, status, payload = stub._route(method, parsed.path, entry)
                if self.path in stub.answer:
                    status, payload = stub.answer[self.path]
                elif parsed.path.startswith("/api/") and not entry.authorized:
                    status, payload = 401, {"detail": "Invalid token"}
                elif route in stub.fail:
                    status, payload = stub.fail[route]
                    if route in stub.fail_times:
                        stub.fail_times[route] -= 1
                        if stub.fail_times[route] <= 0:
                            del stub.fail[route], stub.fail_times[route]
                elif route == "s3":
                    sub_id, part = int(parsed.path.rsplit("/", 1)[1]), int(parse_qs(parsed.query)["partNumber"][0])
                    stub.uploads.setdefault(sub_id, {})[part] = body
                self._reply(
                    status,
                    payload,
                    etag=f'"etag-{len(body)}"' if route == "s3" and status == 200 else None,
                    pause=stub.trickle.get(route, 0.0),
                )

            def _reply(self, status: int, payload: Any, etag: str | None = None, pause: float = 0.0) -> None:
                if isinstance(payload, str):
                    data, ctype = payload.encode(), "text/html" if status >= 400 else "text/plain"
                elif payload is None:
                    data, ctype = b"", "text/plain"
                else:
                    data, ctype = json.dumps(payload).encode(), "application/json"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                if etag:
                    self.send_header("ETag", etag)
                self.end_headers()
                if not pause:
                    self.wfile.write(data)
                    return
                try:
                    for k in range(len(data)):
                        self.wfile.write(data[k : k + 1])
                        self.wfile.flush()
                        time.sleep(pause)
                except OSError:  # the client gave up
                    pass

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PUT(self) -> None:
                self._serve("PUT")

        return Handler


def _parse_body(ctype: str, body: bytes, entry: Logged) -> None:
    if ctype.startswith("multipart/form-data"):
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body
        )
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            filename = part.get_filename()
            payload = part.get_payload(decode=True) or b""
            if filename is not None:
                entry.files[name] = (filename, payload)
            else:
                entry.fields[name] = payload.decode()
    elif ctype.startswith("application/x-www-form-urlencoded"):
        entry.fields = {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
