"""A real Arize Phoenix server for tests: `phoenix serve` on 127.0.0.1 with its own temporary
working directory and telemetry off, stopped (with its process group) when the test ends.

Phoenix's server pins versions the core does not accept (its agent library wants openai 3,
groundjudge openai < 3), so it lives in an environment of its own: ``GROUNDJUDGE_PHOENIX``
names its ``phoenix`` executable, else ``.venv-phoenix/bin/phoenix`` beside the checkout
(``scripts/test.sh`` makes it), else ``phoenix`` on PATH.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent.parent


def phoenix_executable() -> str | None:
    named = os.environ.get("GROUNDJUDGE_PHOENIX")
    if named:
        return named
    local = ROOT / ".venv-phoenix" / "bin" / "phoenix"
    if local.exists():
        return str(local)
    return shutil.which("phoenix")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def phoenix_server(workdir: Path, *, timeout_s: float = 240.0) -> Iterator[str]:
    """Start Phoenix; yield its base URL once it answers /healthz; stop it afterwards."""
    executable = phoenix_executable()
    assert executable is not None, "no phoenix executable"
    port, grpc = _free_port(), _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc), "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = (workdir / "phoenix.log").open("wb")
    proc = subprocess.Popen([executable, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"phoenix serve exited with {proc.returncode}: "
                                   f"{(workdir / 'phoenix.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"phoenix serve did not answer within {timeout_s:.0f} s")
            time.sleep(0.5)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
