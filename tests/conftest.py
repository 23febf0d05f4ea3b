from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED_TREC = ROOT.parent / "shared" / "data" / "trec"


@pytest.fixture
def mini() -> Path:
    return FIXTURES / "mini"
