"""A scriptable, real-HTTP fake of the OpenAI chat-completions API (stdlib only).

Used by the LLM-judge client tests and by the throughput benchmark::

    from tests.support.openai_server import ScriptedOpenAIServer, Reply, HTTPError

    with ScriptedOpenAIServer(script=[HTTPError(429, retry_after=1), Reply('{"score": 2}')]) as srv:
        client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="test", max_retries=0)
        ...
        assert srv.call_count == 2
        assert srv.requests[1].body["messages"][0]["role"] == "system"

Scripting
---------
``script`` is either a list of actions consumed in order, or a callable
``(request_body: dict, call_index: int) -> action``.  When the list is
exhausted (or the callable returns ``None``) the ``default`` action is used;
``default`` may itself be an action or a callable with the same signature.
Anywhere an action is expected a plain ``str`` is accepted as ``Reply(str)`` and
a ``dict`` as ``Reply(json.dumps(dict))``.

Actions: :class:`Reply`, :class:`HTTPError`, :class:`Hang`, :class:`Disconnect`,
:class:`Truncated`.

Every ``POST /v1/chat/completions`` is recorded in :attr:`ScriptedOpenAIServer.requests`
(``call_index`` counts only those).  Other requests (``GET /v1/models``, unknown
paths) are recorded in :attr:`ScriptedOpenAIServer.other_requests`.

Run standalone for benchmarks::

    python -m tests.support.openai_server --delay 0.2 --model m [--port 8000]
"""

from __future__ import annotations

import argparse
import json
import select
import signal
import socket
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import unquote

__all__ = [
    "DEFAULT_CONTENT",
    "DEFAULT_MODEL",
    "Action",
    "BatchBackend",
    "Disconnect",
    "HTTPError",
    "Hang",
    "RecordedRequest",
    "Reply",
    "ScriptedOpenAIServer",
    "Truncated",
    "main",
]

DEFAULT_MODEL = "judge-test-1"
DEFAULT_CONTENT = '{"ok": true}'


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Reply:
    """A normal 200 chat completion.

    ``model`` defaults to the server's ``model``; token counts default to rough
    word counts (prompt: all message text; completion: ``content``).  ``delay_s``
    is added to the server-wide ``delay_s``.
    """

    content: str
    model: str | None = None
    delay_s: float = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"
    # Per generated token, its top alternatives as (token, logprob): sent as the OpenAI
    # ``logprobs.content`` list when the request asked for logprobs; None sends ``logprobs: null``.
    top_logprobs: tuple[tuple[tuple[str, float], ...], ...] | None = None
    usage: bool = True  # False: no ``usage`` object, as llama.cpp's server streams one-token answers


@dataclass(frozen=True)
class HTTPError:
    """An HTTP error response.

    ``body``: dict -> JSON, str -> sent verbatim, None -> OpenAI-style
    ``{"error": {"message", "type", "code"}}``.  ``retry_after`` sets the
    ``Retry-After`` header (numbers are sent as seconds, strings verbatim).
    """

    status: int
    body: dict | str | None = None
    retry_after: float | str | None = None
    delay_s: float = 0


@dataclass(frozen=True)
class Hang:
    """Sleep ``seconds`` before answering, so that a client with a shorter timeout
    gives up.  The wait is cut short when the client closes the connection or the
    server stops; it never blocks other requests.  If the client is still there
    afterwards the request is answered with ``then`` (default: the server's
    ``default`` action).
    """

    seconds: float
    then: Any = None


@dataclass(frozen=True)
class Disconnect:
    """Close the connection without sending any response bytes."""


@dataclass(frozen=True)
class Truncated:
    """A 200 reply whose message content is ``content`` (JSON text, or a dict/list
    that is JSON-encoded first) cut in half, i.e. invalid JSON.  ``finish_reason``
    defaults to ``"length"`` as a real max_tokens truncation would report."""

    content: Any
    model: str | None = None
    finish_reason: str = "length"

    @property
    def truncated_text(self) -> str:
        text = self.content if isinstance(self.content, str) else json.dumps(self.content)
        return text[: len(text) // 2]


Action = Reply | HTTPError | Hang | Disconnect | Truncated
ScriptFn = Callable[[dict, int], Any]


@dataclass
class RecordedRequest:
    """One request as received.  ``headers`` keys are lower-cased.
    ``arrived_at`` / ``responded_at`` are ``time.monotonic()`` values
    (``responded_at`` stays None if nothing was sent)."""

    method: str
    path: str
    body: Any
    headers: dict[str, str]
    arrived_at: float
    call_index: int | None = None
    action: Any = None
    responded_at: float | None = None


# ----------------------------------------------------------------------------- helpers

_ERROR_TYPES = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("not_found_error", "model_not_found"),
    409: ("conflict_error", "conflict"),
    422: ("invalid_request_error", "unprocessable_entity"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def _error_body(status: int, message: str | None = None) -> dict:
    etype, code = _ERROR_TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
    if code is None:
        code = "server_error" if status >= 500 else f"http_{status}"
    return {"error": {"message": message or f"scripted HTTP {status}", "type": etype, "param": None, "code": code}}


def _words(text: Any) -> int:
    if isinstance(text, str):
        return len(text.split())
    if isinstance(text, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return sum(_words(p.get("text") if isinstance(p, dict) else p) for p in text)
    return 0


def _prompt_words(body: dict) -> int:
    msgs = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(msgs, list):
        return 0
    return sum(_words(m.get("content")) for m in msgs if isinstance(m, dict))


def _coerce(action: Any) -> Any:
    if isinstance(action, type):  # e.g. ``Disconnect`` passed without ()
        action = action()
    if isinstance(action, str):
        return Reply(action)
    if isinstance(action, dict):
        return Reply(json.dumps(action))
    return action


def _fmt_retry_after(value: float | str) -> str:
    if isinstance(value, str):
        return value
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


class _ClientGone(Exception):
    pass


# ------------------------------------------------------------------------------ server


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # we close connections and join handler threads ourselves
    allow_reuse_address = True
    request_queue_size = 128
    owner: ScriptedOpenAIServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ScriptedOpenAI/1.0"
    timeout = 120  # idle keep-alive connections are dropped after this
    disable_nagle_algorithm = True  # headers and body go out in separate writes: avoid 40 ms Nagle stalls
    server: _HTTPServer

    # ---- connection bookkeeping
    def setup(self) -> None:
        super().setup()
        self.server.owner._register(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._unregister(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.owner.verbose:
            sys.stderr.write(f"{self.address_string()} - {format % args}\n")

    # ---- low level
    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        if isinstance(payload, (bytes, bytearray)):
            data, ctype = bytes(payload), "application/octet-stream"
        elif isinstance(payload, str):
            data, ctype = payload.encode("utf-8"), "text/plain; charset=utf-8"
        else:
            data, ctype = json.dumps(payload).encode("utf-8"), "application/json"
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close_connection = True
            raise _ClientGone from None

    def _wait(self, seconds: float) -> None:
        """Sleep ``seconds``; raise _ClientGone if the client hangs up or the server stops."""
        owner = self.server.owner
        deadline = time.monotonic() + max(0.0, float(seconds))
        sock = self.connection
        while True:
            if owner._stopping.is_set():
                raise _ClientGone
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            step = min(remaining, 0.05)
            try:
                readable, _, _ = select.select([sock], [], [], step)
            except (OSError, ValueError):
                raise _ClientGone from None
            if readable:
                try:
                    peek = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                except OSError:
                    raise _ClientGone from None
                if not peek:
                    raise _ClientGone
                owner._stopping.wait(step)  # pipelined bytes: just keep sleeping

    # ---- dispatch
    def _headers_dict(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def _route(self, method: str) -> None:
        owner = self.server.owner
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            raw = self._read_body() if method == "POST" else b""
        except (OSError, ValueError):
            self.close_connection = True
            return
        rec = RecordedRequest(
            method=method, path=path, body=None, headers=self._headers_dict(), arrived_at=time.monotonic()
        )
        try:
            if method == "POST" and path == "/v1/chat/completions":
                self._chat(raw, rec)
            elif path.startswith(("/v1/files", "/v1/batches")):
                owner._record_other(rec)
                status, payload = owner.batches.handle(method, path, raw, self.headers.get("Content-Type") or "", owner)
                self._send(status, payload)
                rec.responded_at = time.monotonic()
            elif method == "GET" and path == "/v1/models":
                owner._record_other(rec)
                self._send(200, {"object": "list", "data": [owner._model_entry()]})
                rec.responded_at = time.monotonic()
            elif method == "GET" and path.startswith("/v1/models/"):
                owner._record_other(rec)
                mid = path[len("/v1/models/"):]
                if mid == owner.model:
                    self._send(200, owner._model_entry())
                else:
                    self._send(404, _error_body(404, f"The model '{mid}' does not exist"))
                rec.responded_at = time.monotonic()
            else:
                owner._record_other(rec)
                self._send(404, _error_body(404, f"Unknown endpoint {method} {path}"))
                rec.responded_at = time.monotonic()
        except _ClientGone:
            self.close_connection = True

    def do_POST(self) -> None:
        self._route("POST")

    def do_GET(self) -> None:
        self._route("GET")

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    # ---- chat completions
    def _chat(self, raw: bytes, rec: RecordedRequest) -> None:
        owner = self.server.owner
        try:
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = raw.decode("utf-8", "replace")
        rec.body = body
        if not isinstance(body, dict):
            owner._record_other(rec)
            rec.action = HTTPError(400)
            self._send(400, _error_body(400, "request body is not a JSON object"))
            rec.responded_at = time.monotonic()
            return

        action = owner._next_action(body, rec)
        self._perform(action, body, rec)

    def _perform(self, action: Any, body: dict, rec: RecordedRequest) -> None:
        owner = self.server.owner
        if isinstance(action, Hang):
            self._wait(action.seconds)
            then = _coerce(action.then) if action.then is not None else owner._default_action(body, rec.call_index or 0)
            if isinstance(then, Hang):  # avoid unbounded nesting
                then = Reply(DEFAULT_CONTENT)
            self._perform(then, body, rec)
            return
        if isinstance(action, Disconnect):
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if isinstance(action, HTTPError):
            self._wait(action.delay_s)
            headers = {}
            if action.retry_after is not None:
                headers["Retry-After"] = _fmt_retry_after(action.retry_after)
            payload = action.body if action.body is not None else _error_body(action.status)
            self._send(action.status, payload, headers)
            rec.responded_at = time.monotonic()
            return
        if isinstance(action, Truncated):
            self._wait(owner.delay_s)
            text = action.truncated_text
            self._send(200, owner._completion(body, text, action.model, None, None, action.finish_reason))
            rec.responded_at = time.monotonic()
            return
        if isinstance(action, Reply):
            self._wait(owner.delay_s + action.delay_s)
            payload = owner._completion(
                body, action.content, action.model, action.prompt_tokens, action.completion_tokens, action.finish_reason,
                action.top_logprobs,
            )
            if not action.usage:
                del payload["usage"]
            self._send(200, payload)
            rec.responded_at = time.monotonic()
            return
        self._send(500, _error_body(500, f"ScriptedOpenAIServer: unknown action {action!r}"))
        rec.responded_at = time.monotonic()


class ScriptedOpenAIServer:
    """A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions API.

    Parameters
    ----------
    script:
        list of actions consumed in order, or ``callable(body, call_index) -> action``
        (returning None means "use default").  None = always ``default``.
    default:
        action, or callable ``(body, call_index) -> action``, used once the script is
        exhausted.  Defaults to ``Reply(DEFAULT_CONTENT)``.
    model:
        model id reported in replies (unless a Reply overrides it) and by ``/v1/models``.
    delay_s:
        fixed delay added to every Reply / Truncated (benchmarks).
    reject_json_schema:
        if True, ``response_format.type == "json_schema"`` gets HTTP 500 (like
        llama-cpp-python's server) without consuming a script entry;
        ``json_object`` is accepted.
    port:
        0 (default) picks a free port.
    max_lifetime_s:
        the server stops itself after this many seconds (None disables).
    verbose:
        log each request to stderr.
    """

    def __init__(
        self,
        script: list | ScriptFn | None = None,
        *,
        default: Any = None,
        model: str = DEFAULT_MODEL,
        delay_s: float = 0.0,
        reject_json_schema: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        max_lifetime_s: float | None = 300.0,
        verbose: bool = False,
        batches: BatchBackend | None = None,
    ) -> None:
        self.model = model
        self.batches = batches if batches is not None else BatchBackend()
        self.delay_s = float(delay_s)
        self.reject_json_schema = reject_json_schema
        self.max_lifetime_s = max_lifetime_s
        self.verbose = verbose
        self._host = host
        self._port = port
        self._default = default if default is not None else Reply(DEFAULT_CONTENT)
        self._script_fn: ScriptFn | None = None
        self._script: deque = deque()
        self._set_script(script)

        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._other: list[RecordedRequest] = []
        self._calls = 0
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None
        self._stop_lock = threading.Lock()
        self._stopped = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Self:
        if self._httpd is not None:
            raise RuntimeError("server already started")
        httpd = _HTTPServer((self._host, self._port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=f"ScriptedOpenAIServer:{self.port}", daemon=True
        )
        self._thread.start()
        if self.max_lifetime_s is not None:
            self._timer = threading.Timer(self.max_lifetime_s, self.stop)
            self._timer.daemon = True
            self._timer.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, drop open connections, join the server thread.  Idempotent."""
        with self._stop_lock:
            already = self._stopped or self._httpd is None
            self._stopped = True
        if already:
            if self._thread is not None and self._thread is not threading.current_thread():
                self._thread.join(timeout)
            return
        self._stopping.set()
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.cancel()
        httpd = self._httpd
        httpd.shutdown()  # returns once serve_forever has exited
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopping.is_set()

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

    # ------------------------------------------------------------------ scripting
    def _set_script(self, script: Any) -> None:
        if script is None:
            self._script_fn, self._script = None, deque()
        elif callable(script):
            self._script_fn, self._script = script, deque()
        else:
            self._script_fn, self._script = None, deque(script)

    def set_script(self, script: list | ScriptFn | None, default: Any = None) -> None:
        """Replace the script (and, if given, the default) of a running server."""
        with self._lock:
            self._set_script(script)
            if default is not None:
                self._default = default

    def enqueue(self, *actions: Any) -> None:
        """Append actions to a list script."""
        with self._lock:
            if self._script_fn is not None:
                raise RuntimeError("script is a callable; cannot enqueue")
            self._script.extend(actions)

    @property
    def remaining(self) -> int:
        """Number of unconsumed list-script actions."""
        with self._lock:
            return len(self._script)

    def _default_action(self, body: dict, index: int) -> Any:
        d = self._default
        action = d(body, index) if callable(d) and not isinstance(d, type) else d
        return _coerce(action) if action is not None else Reply(DEFAULT_CONTENT)

    def _next_action(self, body: dict, rec: RecordedRequest) -> Any:
        with self._lock:
            index = self._calls
            self._calls += 1
            rec.call_index = index
            self._requests.append(rec)
            rf = body.get("response_format")
            if self.reject_json_schema and isinstance(rf, dict) and rf.get("type") == "json_schema":
                rec.action = HTTPError(
                    500,
                    body={"error": {"message": "json_schema response_format is not supported", "type": "server_error",
                                    "param": None, "code": None}},
                )
                return rec.action
            action = None
            fn = self._script_fn
            if fn is None and self._script:
                action = self._script.popleft()
        if fn is not None:
            action = fn(body, index)  # outside the lock: may be slow or re-entrant
        action = _coerce(action) if action is not None else self._default_action(body, index)
        rec.action = action
        return action

    def batch_action(self, body: dict) -> Any:
        """The scripted action for one batch line: the same script as a live call, but not
        counted in ``call_count`` nor recorded in ``requests`` (see ``batches.lines``)."""
        with self._lock:
            fn = self._script_fn
            action = self._script.popleft() if fn is None and self._script else None
            index = self._calls
        if fn is not None:
            action = fn(body, index)
        return _coerce(action) if action is not None else self._default_action(body, index)

    # ------------------------------------------------------------------ recording
    def _record_other(self, rec: RecordedRequest) -> None:
        with self._lock:
            self._other.append(rec)

    def _register(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.add(conn)
            stopping = self._stopping.is_set()
        if stopping:  # accepted while stop() was running: drop it at once
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _unregister(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.discard(conn)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Snapshot of recorded chat-completion requests, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def other_requests(self) -> list[RecordedRequest]:
        """Snapshot of every other request (``/v1/models``, unknown paths, bad bodies)."""
        with self._lock:
            return list(self._other)

    @property
    def call_count(self) -> int:
        """Number of chat-completion requests received."""
        with self._lock:
            return self._calls

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._conns)

    def reset(self) -> None:
        """Clear recorded requests and the call counter (the script is untouched)."""
        with self._lock:
            self._requests.clear()
            self._other.clear()
            self._calls = 0

    # ------------------------------------------------------------------ payloads
    def _model_entry(self) -> dict:
        return {"id": self.model, "object": "model", "created": 0, "owned_by": "scripted"}

    def _completion(
        self,
        body: dict,
        content: str,
        model: str | None,
        prompt_tokens: int | None,
        completion_tokens: int | None,
        finish_reason: str,
        top_logprobs: Any = None,
    ) -> dict:
        pt = _prompt_words(body) if prompt_tokens is None else int(prompt_tokens)
        ct = _words(content) if completion_tokens is None else int(completion_tokens)
        logprobs = None
        if top_logprobs is not None and isinstance(body, dict) and body.get("logprobs"):
            keep = int(body.get("top_logprobs") or 0)
            logprobs = {"content": [
                {"token": alts[0][0], "logprob": alts[0][1], "bytes": None,
                 "top_logprobs": [{"token": t, "logprob": lp, "bytes": None} for t, lp in alts[:keep]]}
                for alts in top_logprobs]}
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model or self.model,
            "system_fingerprint": "fp_scripted",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "logprobs": logprobs,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
        }


# ------------------------------------------------------------------------ files and batches


class BatchBackend:
    """The Files and Batch APIs (``/v1/files``, ``/v1/batches``), kept outside any one server so
    that a server restarted on the same port with the same backend still knows every file and
    batch (a restart mid-poll).

    A batch stays ``in_progress`` for ``polls_to_complete`` retrievals, then completes: each
    input line is answered with the server's scripted chat action for its body (or with
    ``script``'s, when given: batch lines can then fail where live calls do not; a ``Reply``
    becomes a 200 line in the output file, an ``HTTPError`` a failed line in the error file).
    Faults: ``expire_after=k`` (for batches created while it is set) answers only the first k
    lines and ends the batch ``expired`` (the rest go to the error file with code
    ``batch_expired``, as the Batch API does); ``cancel`` ends a batch ``cancelled`` after its
    first ``expire_after`` lines (0 if unset).

    A hostile server: ``batch_ids`` and ``file_ids``, when set, choose the id of each new batch
    and of each output or error file (``lambda: "x/../../../../PWN"``); ids in request paths are
    percent-decoded, as a real server reads them.
    """

    def __init__(self, *, polls_to_complete: int = 1, expire_after: int | None = None,
                 script: ScriptFn | None = None, batch_ids: Callable[[], str] | None = None,
                 file_ids: Callable[[], str] | None = None) -> None:
        self.script = script  # answers batch lines instead of the server's chat script, when set
        self.batch_ids, self.file_ids = batch_ids, file_ids
        self.polls_to_complete = polls_to_complete
        self.expire_after = expire_after
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.lines: list[dict] = []  # every line answered, in order
        self._polls: dict[str, int] = {}
        self._expire: dict[str, int | None] = {}
        self._lock = threading.Lock()

    def _file(self, data: bytes, filename: str, purpose: str, fid: str | None = None) -> dict:
        fid = fid or f"file-{uuid.uuid4().hex[:20]}"
        entry = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                 "filename": filename, "purpose": purpose, "status": "processed", "data": data}
        self.files[fid] = entry
        return entry

    @staticmethod
    def _public(entry: dict) -> dict:
        return {k: v for k, v in entry.items() if k != "data"}

    def handle(self, method: str, path: str, raw: bytes, content_type: str, owner: ScriptedOpenAIServer,
               ) -> tuple[int, Any]:
        parts = [unquote(p) for p in path.strip("/").split("/")]  # v1, files|batches, id?, action?
        with self._lock:
            if parts[1] == "files":
                if method == "POST" and len(parts) == 2:
                    fields = _multipart(raw, content_type)
                    if "file" not in fields or fields.get("purpose", (b"",))[0] != b"batch":
                        return 400, _error_body(400, "a file and purpose=batch are required")
                    data, filename = fields["file"]
                    return 200, self._public(self._file(data, filename or "upload.jsonl", "batch"))
                entry = self.files.get(parts[2]) if len(parts) > 2 else None
                if entry is None:
                    return 404, _error_body(404, "no such file")
                if method == "GET" and len(parts) == 4 and parts[3] == "content":
                    return 200, entry["data"]
                return 200, self._public(entry)
            if method == "POST" and len(parts) == 2:
                body = json.loads(raw or b"{}")
                if body.get("input_file_id") not in self.files:
                    return 400, _error_body(400, "unknown input_file_id")
                bid = self.batch_ids() if self.batch_ids else f"batch_{uuid.uuid4().hex[:20]}"
                self.batches[bid] = {
                    "id": bid, "object": "batch", "endpoint": body.get("endpoint"), "errors": None,
                    "input_file_id": body["input_file_id"], "completion_window": body.get("completion_window"),
                    "status": "in_progress", "output_file_id": None, "error_file_id": None,
                    "created_at": int(time.time()), "in_progress_at": int(time.time()), "expires_at": None,
                    "completed_at": None, "expired_at": None, "cancelled_at": None, "failed_at": None,
                    "request_counts": {"total": 0, "completed": 0, "failed": 0},
                    "metadata": body.get("metadata")}
                self._polls[bid] = 0
                self._expire[bid] = self.expire_after  # the fault applies to batches created while it is set
                return 200, self.batches[bid]
            batch = self.batches.get(parts[2]) if len(parts) > 2 else None
            if batch is None:
                return 404, _error_body(404, "no such batch")
            if method == "POST" and len(parts) == 4 and parts[3] == "cancel":
                if batch["status"] == "in_progress":
                    self._finish(batch, owner, "cancelled", self._expire[batch["id"]] or 0)
                return 200, batch
            self._polls[batch["id"]] += 1
            if batch["status"] == "in_progress" and self._polls[batch["id"]] >= self.polls_to_complete:
                if self._expire[batch["id"]] is not None:
                    self._finish(batch, owner, "expired", self._expire[batch["id"]])
                else:
                    self._finish(batch, owner, "completed", None)
            return 200, batch

    def _finish(self, batch: dict, owner: ScriptedOpenAIServer, status: str, answer_first: int | None) -> None:
        text = self.files[batch["input_file_id"]]["data"].decode("utf-8")
        requests = [json.loads(line) for line in text.splitlines() if line.strip()]
        out, errors = [], []
        for i, req in enumerate(requests):
            rid = f"batch_req_{uuid.uuid4().hex[:16]}"
            if answer_first is not None and i >= answer_first:
                errors.append({"id": rid, "custom_id": req["custom_id"], "response": None,
                               "error": {"code": f"batch_{status}", "message": f"This request could not be executed "
                                                                             f"before the batch was {status}."}})
                continue
            action = _coerce(self.script(req["body"], i)) if self.script else owner.batch_action(req["body"])
            self.lines.append({"custom_id": req["custom_id"], "body": req["body"], "action": action})
            if isinstance(action, Reply):
                payload = owner._completion(req["body"], action.content, action.model, action.prompt_tokens,
                                            action.completion_tokens, action.finish_reason, action.top_logprobs)
                out.append({"id": rid, "custom_id": req["custom_id"],
                            "response": {"status_code": 200, "request_id": rid, "body": payload}, "error": None})
            else:
                code = action.status if isinstance(action, HTTPError) else 500
                errors.append({"id": rid, "custom_id": req["custom_id"],
                               "response": {"status_code": code, "request_id": rid, "body": _error_body(code)},
                               "error": None})
        if out:
            batch["output_file_id"] = self._file("".join(json.dumps(o) + "\n" for o in out).encode(),
                                                 "batch_output.jsonl", "batch_output",
                                                 self.file_ids() if self.file_ids else None)["id"]
        if errors:
            batch["error_file_id"] = self._file("".join(json.dumps(e) + "\n" for e in errors).encode(),
                                                "batch_errors.jsonl", "batch_output")["id"]
        batch["status"] = status
        batch[f"{status}_at"] = int(time.time())
        batch["request_counts"] = {"total": len(requests), "completed": len(out), "failed": len(errors)}


def _multipart(raw: bytes, content_type: str) -> dict[str, tuple[bytes, str | None]]:
    """Fields of a multipart/form-data body: name -> (bytes, filename)."""
    import email.parser
    import email.policy

    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw)
    fields: dict[str, tuple[bytes, str | None]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name:
            fields[str(name)] = (part.get_payload(decode=True) or b"", part.get_filename())
    return fields


# -------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.support.openai_server", description=__doc__.split("\n")[0])
    p.add_argument("--delay", type=float, default=0.0, help="seconds added to every reply")
    p.add_argument("--model", default=DEFAULT_MODEL, help="model id to report")
    p.add_argument("--content", default=DEFAULT_CONTENT, help="message content of every reply")
    p.add_argument("--port", type=int, default=0, help="port (0 = pick a free one)")
    p.add_argument("--lifetime", type=float, default=300.0, help="stop after this many seconds (<=0: never)")
    p.add_argument("--reject-json-schema", action="store_true", help="500 on response_format json_schema")
    p.add_argument("-v", "--verbose", action="store_true", help="log requests to stderr")
    args = p.parse_args(argv)
    # Ctrl-C stops the server even when it was started from a background job, which inherits
    # SIGINT ignored (and Python then leaves it ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    srv = ScriptedOpenAIServer(
        default=Reply(args.content),
        model=args.model,
        delay_s=args.delay,
        reject_json_schema=args.reject_json_schema,
        port=args.port,
        max_lifetime_s=args.lifetime if args.lifetime > 0 else None,
        verbose=args.verbose,
    )
    with srv:
        try:  # a SIGINT that arrives as soon as the URL is out still ends the server cleanly
            print(srv.base_url, flush=True)
            while srv.running:
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
    print(f"served {srv.call_count} chat completions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
