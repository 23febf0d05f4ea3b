"""The labelling page's HTTP API: state without the verdict, labels appended in the labels
format, the verdict revealed only after labelling, and requests from elsewhere refused."""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
from pathlib import Path

import pytest

from groundjudge.calibrate.verdicts import load_labels
from groundjudge.label import prepare_batch
from groundjudge.label.server import CSP, LabelApp, LabelServer
from groundjudge.label.session import CRITERIA
from groundjudge.label.store import read_batches
from tests.support.label_run import HOSTILE, make_label_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return make_label_run(tmp_path_factory.mktemp("labelrun"))


@pytest.fixture
def server(run_dir, tmp_path):
    labels = tmp_path / "labels" / "ann.jsonl"
    plan = prepare_batch(run_dir, "ann <b>", labels_path=labels, strategy="random", size=4, seed=1)
    app = LabelApp(plan.session)
    srv = LabelServer(app)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv, app, labels
    srv.shutdown()
    srv.server_close()


def request(srv, method: str, path: str, body: dict | None = None, headers: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=10)
    data = json.dumps(body).encode() if body is not None else None
    hdrs = {"Content-Type": "application/json"} if body is not None else {}
    hdrs.update(headers or {})
    conn.request(method, path, body=data, headers=hdrs)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    return response, payload


def label_body(item: dict, faithful: bool = True) -> dict:
    return {"query_id": item["query_id"], "config_id": item["config_id"], "faithful": faithful, "correct": 2,
            "citations_supported": True, "claims": [{"text": item["claims"][0]["text"], "supported": True}],
            "note": "checked </script> \u202e"}


def test_page_has_strict_csp_and_escapes_the_rater(server):
    srv, app, _ = server
    response, payload = request(srv, "GET", "/")
    html = payload.decode()
    assert response.status == 200
    assert response.getheader("Content-Security-Policy") == CSP
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP and "default-src 'none'" in CSP
    assert response.getheader("X-Content-Type-Options") == "nosniff"
    assert "ann &lt;b&gt;" in html and "ann <b>" not in html
    assert f'content="{app.token}"' in html
    assert re.findall(r"<script[^>]*>", html) == ['<script src="/static/label.js" defer>']  # nothing inline
    js_response, js = request(srv, "GET", "/static/label.js")
    assert js_response.status == 200 and b"innerHTML" not in js and b"textContent" in js


def test_state_hides_the_judge_until_the_item_is_labelled(server):
    srv, app, _labels = server
    _, payload = request(srv, "GET", "/api/state")
    state = json.loads(payload)
    assert state["done"] == 0 and state["total"] == 4 and state["rater"] == "ann <b>"
    item = state["item"]
    assert set(item) == {"query_id", "config_id", "question", "expected_answer", "tags", "answer", "citations",
                         "chunks", "claims"}
    assert "verdict" not in payload.decode() and "scripted" not in payload.decode()
    reveal, _ = request(srv, "GET", f"/api/reveal?query_id={item['query_id']}&config_id={item['config_id']}")
    assert reveal.status == 403
    first = app.session.batches[-1].picks[0]
    assert (item["query_id"], item["config_id"]) == (first[0], first[1])
    assert item["claims"] and all("citations" in c for c in item["claims"])


def test_label_is_appended_in_the_labels_format_and_reveals_the_verdict(server):
    srv, app, labels = server
    item = json.loads(request(srv, "GET", "/api/state")[1])["item"]
    response, payload = request(srv, "POST", "/api/label", label_body(item, faithful=False),
                                {"X-Label-Token": app.token})
    assert response.status == 200, payload
    data = json.loads(payload)
    assert data["judge"]["labels"]["faithful"] in (True, False)
    assert data["state"]["done"] == 1 and data["state"]["item"]["query_id"] != item["query_id"]
    lines = labels.read_text().splitlines()
    assert len(lines) == 1
    saved = json.loads(lines[0])
    assert saved == {"query_id": item["query_id"], "config_id": "sys", "rater": "ann <b>", "faithful": False,
                     "correct": 2, "citations_supported": True,
                     "claims": [{"text": item["claims"][0]["text"], "supported": True}],
                     "note": "checked </script> \u202e"}
    humans = load_labels([labels], CRITERIA)  # calibrate's own reader takes it as it is
    assert humans["ann <b>"][(item["query_id"], "sys")].labels["faithful"] is False
    again, _ = request(srv, "POST", "/api/label", label_body(item), {"X-Label-Token": app.token})
    assert again.status == 409
    reveal, body = request(srv, "GET", f"/api/reveal?query_id={item['query_id']}&config_id=sys")
    assert reveal.status == 200 and "claims" in json.loads(body)


@pytest.mark.parametrize("headers, status", [
    ({}, 403),  # no token
    ({"X-Label-Token": "guess"}, 403),
    ({"X-Label-Token": "TOKEN", "Host": "evil.example:80"}, 403),  # DNS rebinding
    ({"X-Label-Token": "TOKEN", "Content-Type": "text/plain"}, 415),  # a cross-site form post
])
def test_foreign_requests_are_refused(server, headers, status):
    srv, app, labels = server
    item = json.loads(request(srv, "GET", "/api/state")[1])["item"]
    headers = {k: (app.token if v == "TOKEN" else v) for k, v in headers.items()}
    response, _ = request(srv, "POST", "/api/label", label_body(item), headers)
    assert response.status == status
    assert not labels.exists() or labels.read_text() == ""


def test_bad_labels_are_refused_and_nothing_is_written(server):
    srv, app, labels = server
    item = json.loads(request(srv, "GET", "/api/state")[1])["item"]
    token = {"X-Label-Token": app.token}
    cases = [
        {**label_body(item), "correct": 7},  # off the scale
        {**label_body(item), "faithful": None},  # faithful is required
        {**label_body(item), "rater": "someone else"},  # the rater is the server's
        {**label_body(item), "query_id": "not-pending"},
    ]
    statuses = [request(srv, "POST", "/api/label", body, token)[0].status for body in cases]
    assert statuses == [400, 400, 400, 409]
    assert not labels.exists() or labels.read_text() == ""


def test_hostile_text_travels_as_json_data(server):
    srv, app, labels = server
    token = {"X-Label-Token": app.token}
    seen = []
    for _ in range(4):
        state = json.loads(request(srv, "GET", "/api/state")[1])
        item = state["item"]
        seen.append(item)
        assert request(srv, "POST", "/api/label", label_body(item), token)[0].status == 200
    assert json.loads(request(srv, "GET", "/api/state")[1])["item"] is None
    assert len(labels.read_text().splitlines()) == 4
    batch = read_batches(labels)[0]
    assert [(i["query_id"], i["config_id"]) for i in seen] == [(q, c) for q, c, _, _ in batch.picks]
    hostile = [i for i in seen if i["query_id"] == "h1"]
    if hostile:  # the random batch of 4 may leave it out
        assert HOSTILE in hostile[0]["question"] and HOSTILE in hostile[0]["chunks"][0]["text"]


def test_the_server_stops_by_itself_when_idle(run_dir, tmp_path):
    from groundjudge.label.server import serve

    plan = prepare_batch(run_dir, "idle", labels_path=tmp_path / "idle.jsonl", strategy="random", size=2, seed=0)
    urls: list[str] = []
    thread = threading.Thread(target=serve, args=(LabelApp(plan.session),),
                              kwargs={"idle_seconds": 1.0, "ready": urls.append}, daemon=True)
    thread.start()
    thread.join(timeout=15)
    assert urls and urls[0].startswith("http://127.0.0.1:")
    assert not thread.is_alive()
    port = int(urls[0].rsplit(":", 1)[1].strip("/"))
    with pytest.raises(OSError):
        http.client.HTTPConnection("127.0.0.1", port, timeout=2).request("GET", "/")


def test_a_queue_batch_is_marked_and_the_reason_shows_only_after_labelling(run_dir, tmp_path):
    from dataclasses import replace

    from groundjudge.label.run_source import QueuedItem, read_run
    from groundjudge.label.session import draw_queue_batch, open_session

    run = read_run(run_dir)
    key = run.items[-1].key
    why = "faithful: `scripted` (first): verdict confidence 0.600 < lambda 0.71"
    session = open_session(replace(run, queue=[QueuedItem(key, ["faithful"], why)]), "ann",
                           tmp_path / "labels" / "ann.jsonl")
    assert draw_queue_batch(session, size=5) is not None
    srv = LabelServer(LabelApp(session))
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        state_text = request(srv, "GET", "/api/state")[1].decode()
        state = json.loads(state_text)
        assert state["queue"] is True and state["total"] == 1
        assert (state["item"]["query_id"], state["item"]["config_id"]) == key
        assert "0.600" not in state_text and "lambda" not in state_text  # nothing of the judge before labelling
        response, payload = request(srv, "POST", "/api/label", label_body(state["item"]),
                                    {"X-Label-Token": srv.app.token})
        assert response.status == 200, payload
        assert json.loads(payload)["judge"]["queued_because"] == why
    finally:
        srv.shutdown()
        srv.server_close()


# --- malformed requests: a 4xx answer, never a traceback, a hang or a dead thread --------------

@pytest.fixture
def strict_server(run_dir, tmp_path, capfd):
    """The real server on 127.0.0.1, with a short request timeout so that a body that never comes
    is answered within the test."""
    labels = tmp_path / "labels" / "ann.jsonl"
    plan = prepare_batch(run_dir, "ann", labels_path=labels, strategy="random", size=2, seed=1)
    srv = LabelServer(LabelApp(plan.session), request_timeout=1.0)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv, labels
    srv.shutdown()
    srv.server_close()
    assert "Traceback" not in capfd.readouterr().err


def raw_post(srv, length_header: str, body: bytes, *, close_after_send: bool = False) -> tuple[int, dict]:
    """A POST written byte for byte on a socket; the answer's status and JSON body."""
    head = (f"POST /api/label HTTP/1.1\r\nHost: 127.0.0.1:{srv.server_address[1]}\r\n"
            f"Content-Type: application/json\r\nX-Label-Token: {srv.app.token}\r\n{length_header}\r\n").encode()
    with socket.create_connection(("127.0.0.1", srv.server_address[1]), timeout=30) as sock:  # a hang fails, not waits
        sock.sendall(head + body)
        if close_after_send:
            sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head_text, _, payload = answer.partition(b"\r\n\r\n")
    return int(head_text.split()[1]), json.loads(payload)


def handler_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if "process_request_thread" in t.name]


DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(("length_header", "body", "status", "error"), [
    ("Content-Length: abc\r\n", b"{}", 400, "Content-Length must be one whole number"),
    ("Content-Length: -5\r\n", b"{}", 400, "Content-Length must be one whole number"),
    ("Content-Length: 1e3\r\n", b"{}", 400, "Content-Length must be one whole number"),
    ("Content-Length: 2\r\nContent-Length: 3\r\n", b"{}", 400, "Content-Length must be one whole number"),
    ("Content-Length: 99999999999999999999\r\n", b"{}", 413, "body larger than"),
    ("Content-Length: 262145\r\n", b"{}", 413, "body larger than"),
    ("", b"{}", 411, "give Content-Length"),
    ("Content-Length: 0\r\n", b"", 400, "body missing"),
    (f"Content-Length: {len(DEEP)}\r\n", DEEP, 400, "nested too deeply"),
    ("Content-Length: 4\r\n", b"\xff\xfe{}", 400, "not JSON in UTF-8"),
    ("Content-Length: 7\r\n", b'{"a": }', 400, "not JSON in UTF-8"),
    ("Content-Length: 2\r\n", b"[]", 400, "must be a JSON object"),
    ("Content-Length: 4\r\n", b'"x" ', 400, "must be a JSON object"),
])
def test_a_malformed_post_gets_a_4xx_and_the_server_goes_on(strict_server, length_header, body, status, error):
    srv, labels = strict_server
    answer, data = raw_post(srv, length_header, body)
    assert (answer, set(data)) == (status, {"error"}) and error in data["error"]
    assert request(srv, "GET", "/api/state")[0].status == 200
    assert not labels.exists()


def test_a_body_shorter_than_its_length_is_answered_and_frees_its_thread(strict_server):
    """It used to hang its thread for as long as the client kept the connection open."""
    srv, labels = strict_server
    busy = len(handler_threads())
    status, data = raw_post(srv, "Content-Length: 100\r\n", b'{"query_id": ')
    assert status == 408 and data["error"].startswith("body shorter than its Content-Length (13 < 100")
    # a client that closes its side early gets its answer too (the server does not wait for the rest)
    status, data = raw_post(srv, "Content-Length: 100\r\n", b'{"query_id": ', close_after_send=True)
    assert status == 400 and data == {"error": "body shorter than its Content-Length (13 < 100)"}
    for _ in range(300):  # the handler threads end once they answered
        if len(handler_threads()) <= busy:
            break
        threading.Event().wait(0.05)
    assert len(handler_threads()) <= busy
    # and a normal label still goes through
    item = json.loads(request(srv, "GET", "/api/state")[1])["item"]
    response, payload = request(srv, "POST", "/api/label", label_body(item), {"X-Label-Token": srv.app.token})
    assert response.status == 200, payload
    assert len(labels.read_text().splitlines()) == 1
