"""The labelling page: a small HTTP server on 127.0.0.1 (standard library only).

Routes: ``GET /`` the page, ``GET /static/<file>`` its script and style, ``GET /api/state``
the rater's progress and next item (without the judge's verdict), ``POST /api/label`` one
label (appended to the labels file before the answer is sent; the reply reveals the judge's
verdict on that item), ``GET /api/reveal`` the verdict of an item this rater has labelled.

Every response carries a strict Content-Security-Policy (scripts, styles and requests from
this origin only, nothing inline). The page builds its DOM with ``textContent``, never HTML
strings, so text from the data cannot become markup. Requests must name this server in
``Host`` (DNS-rebinding guard) and a POST must carry the per-start token from the page.
"""

from __future__ import annotations

import json
import re
import secrets
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from jinja2 import Environment, select_autoescape
from pydantic import ValidationError

from groundjudge.contracts import HumanLabel
from groundjudge.label.claims import split_answer
from groundjudge.label.run_source import Key, item_view
from groundjudge.label.session import QUEUE_STRATEGY, LabelSession
from groundjudge.label.store import append_label

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
MAX_BODY = 256 * 1024
REQUEST_TIMEOUT_S = 10.0  # a request's headers and body must arrive within this (a label is a few hundred bytes)
STATIC = {"label.js": "text/javascript; charset=utf-8", "label.css": "text/css; charset=utf-8"}
LABEL_FIELDS = {"query_id", "config_id", "faithful", "correct", "citations_supported", "claims", "note"}


def _asset(name: str) -> str:
    return resources.files("groundjudge.label").joinpath("assets", name).read_text("utf-8")


class LabelApp:
    """The state behind the page: one rater's session, guarded by a lock."""

    def __init__(self, session: LabelSession) -> None:
        self.session = session
        self.lock = threading.Lock()
        self.token = secrets.token_urlsafe(24)
        env = Environment(autoescape=select_autoescape(default=True, default_for_string=True))
        self.page = env.from_string(_asset("page.html"))
        self.last_request = time.monotonic()

    def state(self) -> dict[str, Any]:
        s = self.session
        done, total = s.current_batch_progress()
        pending = s.pending()
        item = self.item(pending[0]) if pending else None
        return {"rater": s.rater, "done": done, "total": total, "item": item,
                "batch": s.batches[-1].batch if s.batches else None,
                "queue": bool(s.batches) and s.batches[-1].strategy == QUEUE_STRATEGY}

    def item(self, key: Key) -> dict[str, Any]:
        view = item_view(self.session.run, key)
        view["claims"] = split_answer(view["answer"] or "", [c["id"] for c in view["chunks"]])
        return view

    def reveal(self, key: Key) -> dict[str, Any]:
        judged = self.session.judged[key]
        queued = next((q.why for q in self.session.run.queue if q.key == key), None)
        return {"labels": judged.labels, "confidence": judged.confidence,
                "confidence_source": judged.confidence_source, "claims": judged.claims, "queued_because": queued}

    def save(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        unknown = set(body) - LABEL_FIELDS
        if unknown:
            return HTTPStatus.BAD_REQUEST, {"error": f"unknown fields: {', '.join(sorted(unknown))}"}
        with self.lock:
            key = (body.get("query_id"), body.get("config_id"))
            pending = self.session.pending()
            if key in self.session.labelled:
                return HTTPStatus.CONFLICT, {"error": "this item is already labelled by this rater"}
            if not pending or key != pending[0]:
                return HTTPStatus.CONFLICT, {"error": "not the item being labelled; reload the page"}
            try:
                label = HumanLabel.model_validate({**body, "rater": self.session.rater})
            except ValidationError as exc:
                return HTTPStatus.BAD_REQUEST, {"error": "; ".join(
                    f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False))}
            if label.faithful is None:
                return HTTPStatus.BAD_REQUEST, {"error": "faithful: give yes or no"}
            record = append_label(self.session.labels_path, label)
            self.session.mine.append(label)
            return HTTPStatus.OK, {"saved": record, "judge": self.reveal(key), "state": self.state()}


class LabelHandler(BaseHTTPRequestHandler):
    server: LabelServer
    server_version = "groundjudge-label"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.request_timeout)  # headers that never end too

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8")

    def _host_ok(self) -> bool:
        port = self.server.server_address[1]
        return self.headers.get("Host") in {f"127.0.0.1:{port}", f"localhost:{port}"}

    def do_GET(self) -> None:
        app = self.server.app
        app.last_request = time.monotonic()
        if not self._host_ok():
            return self._json(HTTPStatus.FORBIDDEN, {"error": "wrong Host header"})
        url = urlsplit(self.path)
        if url.path == "/":
            html = app.page.render(rater=app.session.rater, token=app.token)
            return self._send(HTTPStatus.OK, html.encode("utf-8"), "text/html; charset=utf-8")
        if url.path == "/favicon.ico":
            return self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
        if url.path.startswith("/static/") and url.path[len("/static/"):] in STATIC:
            name = url.path[len("/static/"):]
            return self._send(HTTPStatus.OK, _asset(name).encode("utf-8"), STATIC[name])
        if url.path == "/api/state":
            with app.lock:
                return self._json(HTTPStatus.OK, app.state())
        if url.path == "/api/reveal":
            query = parse_qs(url.query)
            key = (query.get("query_id", [""])[0], query.get("config_id", [""])[0])
            with app.lock:
                if key not in app.session.labelled:
                    return self._json(HTTPStatus.FORBIDDEN, {"error": "label the item first"})
                return self._json(HTTPStatus.OK, app.reveal(key))
        return self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})

    def do_POST(self) -> None:
        app = self.server.app
        app.last_request = time.monotonic()
        if not self._host_ok():
            return self._json(HTTPStatus.FORBIDDEN, {"error": "wrong Host header"})
        if urlsplit(self.path).path != "/api/label":
            return self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})
        if not secrets.compare_digest(self.headers.get("X-Label-Token", ""), app.token):
            return self._json(HTTPStatus.FORBIDDEN, {"error": "missing or wrong token"})
        if not (self.headers.get("Content-Type") or "").startswith("application/json"):
            return self._json(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": "send application/json"})
        raw = self._read_body()
        if isinstance(raw, tuple):
            return self._json(*raw)
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return self._json(HTTPStatus.BAD_REQUEST, {"error": "body is not JSON in UTF-8"})
        except RecursionError:  # nested deeper than the decoder's recursion limit
            return self._json(HTTPStatus.BAD_REQUEST, {"error": "body is nested too deeply"})
        if not isinstance(body, dict):
            return self._json(HTTPStatus.BAD_REQUEST, {"error": "body must be a JSON object"})
        try:
            status, data = app.save(body)
        except OSError as exc:  # the labels file could not be written (disk full, permissions)
            return self._json(HTTPStatus.INTERNAL_SERVER_ERROR,
                              {"error": f"the label was not saved: {exc.strerror or type(exc).__name__}"})
        return self._json(status, data)

    def _read_body(self) -> bytes | tuple[int, dict[str, str]]:
        """The body, exactly Content-Length bytes, read before a deadline; or (status, error) for
        a missing, malformed, too large, short or late body. A thread never waits for bytes that
        are not coming: the whole body must arrive within the server's request timeout."""
        given = self.headers.get_all("Content-Length") or []
        if not given:
            return HTTPStatus.LENGTH_REQUIRED, {"error": "give Content-Length"}
        text = given[0].strip()
        if len(given) > 1 or not re.fullmatch(r"[0-9]+", text):
            return HTTPStatus.BAD_REQUEST, {"error": "Content-Length must be one whole number of bytes"}
        if len(text) > 9 or int(text) > MAX_BODY:
            return HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": f"body larger than {MAX_BODY} bytes"}
        length = int(text)
        if length == 0:
            return HTTPStatus.BAD_REQUEST, {"error": "body missing"}
        deadline = time.monotonic() + self.server.request_timeout
        chunks, got = [], 0
        try:
            while got < length:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self.connection.settimeout(left)
                chunk = self.rfile.read1(length - got)
                if not chunk:  # the client closed its side
                    return HTTPStatus.BAD_REQUEST, {"error": f"body shorter than its Content-Length ({got} < {length})"}
                chunks.append(chunk)
                got += len(chunk)
        except TimeoutError:
            self.close_connection = True
            return HTTPStatus.REQUEST_TIMEOUT, {"error": f"body shorter than its Content-Length ({got} < {length} "
                                                         f"bytes after {self.server.request_timeout:g} s)"}
        return b"".join(chunks)


class LabelServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, app: LabelApp, port: int = 0, *, verbose: bool = False,
                 request_timeout: float = REQUEST_TIMEOUT_S) -> None:
        self.app = app
        self.verbose = verbose
        self.request_timeout = request_timeout
        super().__init__(("127.0.0.1", port), LabelHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line, not the standard library's traceback: a client that went away is no news;
        anything else is named (and the server goes on serving)."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        sys.stderr.write(f"labelling page: a request failed: {type(exc).__name__}: {exc}\n")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"


def serve(app: LabelApp, port: int = 0, *, idle_seconds: float = 3600.0, ready: Any = None,
          verbose: bool = False) -> None:
    """Serve until ``idle_seconds`` pass with no request (or Ctrl-C). ``ready(url)`` is called
    once the socket listens."""
    server = LabelServer(app, port, verbose=verbose)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    try:
        if ready is not None:
            ready(server.url)
        while time.monotonic() - app.last_request < idle_seconds:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass  # Ctrl-C: every label given is already on disk
    finally:
        server.shutdown()
        server.server_close()
