"""A loopback HTTP file server for download tests: Range support, request log, one-shot connection cuts,
slow bodies, redirects and bodies without end."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FileServer:
    """Serves `files` ({path: bytes}) on 127.0.0.1:<free port>. Use as a context manager.

    `cut_once[path] = n` makes the next full or ranged GET of `path` announce the whole length but
    close the connection after `n` body bytes; `ignore_range` makes it answer 200 to Range requests.
    `slow[path] = seconds` sends the body in 16 kB pieces with that pause between them.
    `redirects[path] = location` answers 302 to `location`. `endless[path] = cap` sends the bytes of
    `files[path]` over and over with no Content-Length, until the client hangs up or `cap` bytes are out.
    `sent[path]` counts the body bytes written. `redirects[path] = None` answers 302 without a Location.
    `mute[path] = s` answers nothing for s seconds; `silent[path] = s` sends the headers, then nothing for
    s seconds; `trickle[path] = s` sends the body one byte at a time, s seconds apart.
    """

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.cut_once: dict[str, int] = {}
        self.ignore_range = False
        self.slow: dict[str, float] = {}
        self.redirects: dict[str, str | None] = {}
        self.endless: dict[str, int] = {}
        self.sent: dict[str, int] = {}
        self.mute: dict[str, float] = {}
        self.silent: dict[str, float] = {}
        self.trickle: dict[str, float] = {}
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range header)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_HEAD(self) -> None:
                self._serve(body=False)

            def do_GET(self) -> None:
                self._serve(body=True)

            def _serve(self, body: bool) -> None:
                rng = self.headers.get("Range")
                server.requests.append((self.command, self.path, rng))
                if self.path in server.mute:
                    time.sleep(server.mute[self.path])
                    return
                if self.path in server.redirects:
                    self.send_response(302)
                    if server.redirects[self.path] is not None:
                        self.send_header("Location", server.redirects[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path in server.endless:
                    self._endless(body)
                    return
                data = server.files.get(self.path)
                if data is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start, status = 0, 200
                if rng and not server.ignore_range:
                    start = int(rng.split("=")[1].split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    status = 206
                payload = data[start:]
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Accept-Ranges", "bytes")
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                if not body:
                    return
                cut = server.cut_once.pop(self.path, None)
                if cut is not None:
                    self.wfile.write(payload[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if self.path in server.silent:
                    self.wfile.flush()
                    time.sleep(server.silent[self.path])
                    return
                if self.path in server.trickle:
                    try:
                        for i in range(len(payload)):
                            self.wfile.write(payload[i : i + 1])
                            self.wfile.flush()
                            self._count(1)
                            time.sleep(server.trickle[self.path])
                    except OSError:  # the client hung up
                        pass
                    return
                delay = server.slow.get(self.path)
                if delay is None:
                    self.wfile.write(payload)
                    self._count(len(payload))
                    return
                for i in range(0, len(payload), 16384):
                    self.wfile.write(payload[i : i + 16384])
                    self.wfile.flush()
                    self._count(len(payload[i : i + 16384]))
                    time.sleep(delay)

            def _count(self, n: int) -> None:
                server.sent[self.path] = server.sent.get(self.path, 0) + n

            def _endless(self, body: bool) -> None:
                self.send_response(200)
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                block, cap = server.files[self.path], server.endless[self.path]
                try:
                    while body and server.sent.get(self.path, 0) < cap:
                        self.wfile.write(block)
                        self._count(len(block))
                except OSError:  # the client hung up
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base + path

    def gets(self, path: str) -> list[str | None]:
        """Range headers of the GET requests for `path`, in order (None for a plain GET)."""
        return [rng for method, p, rng in self.requests if method == "GET" and p == path]

    def __enter__(self) -> "FileServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
