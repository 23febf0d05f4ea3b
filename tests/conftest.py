from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED_TREC = ROOT.parent / "shared" / "data" / "trec"


@pytest.fixture
def mini() -> Path:
    return FIXTURES / "mini"


@pytest.fixture
def no_judge_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No judge named by the environment: a test that runs groundjudge in process decides its
    judge itself (``pytestmark = pytest.mark.usefixtures("no_judge_environment")``)."""
    for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
