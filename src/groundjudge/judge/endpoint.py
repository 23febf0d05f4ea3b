"""Where the judge lives for a run: a configured base URL, or the embedded local judge."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from groundjudge.config import Config
from groundjudge.load.errors import InputError


class JudgeUnavailable(RuntimeError):
    """No judge can be used for this run (exit code 3)."""


@contextmanager
def judge_endpoint(config: Config, quiet: bool = False) -> Iterator[tuple[str, str]]:
    """Yield ``(base_url, model)``; with no base URL, run the embedded judge for the duration."""
    j = config.judge
    if j.base_url:
        if not j.model:
            raise InputError.one(config.source or "command line", None, "judge.model",
                                 "a remote judge needs a pinned model id: --judge-model or GROUNDJUDGE_MODEL")
        yield j.base_url.rstrip("/"), j.model
        return
    from groundjudge.judge.local import LocalJudge, LocalJudgeError

    try:
        with LocalJudge.from_config(config, log=None if quiet else sys.stderr) as local:
            yield local.base_url, local.model_id
    except LocalJudgeError as exc:
        raise JudgeUnavailable(str(exc)) from exc
