"""One judge for one run: the rubric, the pinned model, decoding settings, the cache and the
endpoint, held in one place.

The endpoint is a configured base URL, or the embedded judge, which starts on 127.0.0.1 only
when the first call is needed (a fully cached run never starts it) and stops when the session
closes, on errors, Ctrl-C and SIGTERM included.
"""

from __future__ import annotations

import signal
import threading
from typing import IO, Any, Self

from groundjudge.config import Config, api_key
from groundjudge.errors import InputError, JudgeUnavailable
from groundjudge.judge.cache import JudgeCache
from groundjudge.judge.client import ClientSettings, JudgeClient
from groundjudge.judge.local import MODEL_ID, LocalJudge, LocalJudgeError
from groundjudge.judge.results import JudgeIdentity, RubricRef
from groundjudge.judge.rubric import Rubric

# The embedded judge serves one request at a time on the CPU: more than one call in flight
# only queues on the server and runs into client timeouts.
EMBEDDED_TIMEOUT_S = 900.0


def _raise_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


class JudgeSession:
    """Use as a context manager (``groundjudge.open_judge(config)``)."""

    def __init__(self, config: Config, rubric: Rubric, *, log: IO[str] | None = None) -> None:
        j = config.judge
        self.config = config
        self.rubric = rubric
        self.embedded = not j.base_url
        if not self.embedded and not j.model:
            raise InputError.one(config.source or "command line", None, "judge.model",
                                 "a remote judge needs a pinned model id: --judge-model or GROUNDJUDGE_MODEL")
        self.model: str = MODEL_ID if self.embedded else str(j.model)
        self.base_url: str | None = None if self.embedded else str(j.base_url).rstrip("/")
        self.concurrency = 1 if self.embedded else j.concurrency
        self.settings = ClientSettings(
            base_url=self.base_url or "", model=self.model, api_key=api_key(),
            model_snapshots=tuple(j.model_snapshots), temperature=j.temperature, seed=j.seed,
            max_tokens=j.max_output_tokens,
            timeout_s=max(j.timeout_s, EMBEDDED_TIMEOUT_S) if self.embedded else j.timeout_s,
            max_attempts=j.max_attempts, requests_per_minute=j.requests_per_minute, output_mode=j.output_mode,
            stream_answers=self.embedded)
        self.cache = JudgeCache(config.cache.dir, enabled=config.cache.enabled)
        self._local = LocalJudge.from_config(config, log=log) if self.embedded else None
        self._lock = threading.Lock()
        self._previous_sigterm: Any = None

    # -- identity -------------------------------------------------------------------------
    def decoding(self) -> dict[str, Any]:
        spec = self.rubric.claim_questions if self.rubric.protocol == "claim_questions" else None
        return self.settings.decoding(spec.top_logprobs if spec else None)

    @property
    def identity(self) -> JudgeIdentity:
        r = self.rubric
        return JudgeIdentity(rubric=RubricRef(id=r.id, version=r.version, hash=r.content_hash), model=self.model,
                             decoding=self.decoding())

    @property
    def started(self) -> bool:
        return self.base_url is not None

    # -- endpoint -------------------------------------------------------------------------
    def ensure_endpoint(self) -> str:
        """The base URL, starting the embedded judge first if it is not running yet."""
        with self._lock:
            if self.base_url is None:
                assert self._local is not None
                try:
                    self._local.start()
                except LocalJudgeError as exc:
                    self._local.stop()
                    raise JudgeUnavailable(str(exc)) from exc
                self.base_url = self._local.base_url
            return self.base_url

    def new_client(self) -> JudgeClient:
        """A client for one event loop (the caller closes it); the endpoint must be up."""
        if self.base_url is None:
            raise RuntimeError("ensure_endpoint() first")
        settings = ClientSettings(**{**self.settings.__dict__, "base_url": self.base_url})
        return JudgeClient(settings)

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> Self:
        # SIGTERM would end Python without running `finally`; make it unwind like Ctrl-C, so
        # the embedded server is stopped on every way out.
        if self.embedded and threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, _raise_on_sigterm)
        return self

    def close(self) -> None:
        try:
            if self._local is not None:
                self._local.stop()
                if self.embedded:
                    self.base_url = None
        finally:
            self.cache.close()
            if self._previous_sigterm is not None:
                signal.signal(signal.SIGTERM, self._previous_sigterm)
                self._previous_sigterm = None

    def __exit__(self, *exc: object) -> None:
        self.close()
