"""Atomic report writes: the umask decides who may read the file, and no temporary file is left."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from groundjudge.files import write_json_atomic, write_text_atomic


def written_under(umask: int, path: Path) -> int:
    """Write ``path`` (new, then replaced) under ``umask``; return its permission bits."""
    previous = os.umask(umask)
    try:
        write_text_atomic(path, "first\n")
        write_json_atomic(path, {"second": True})
    finally:
        os.umask(previous)
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_get_the_mode_the_umask_allows(tmp_path: Path, umask: int, mode: int) -> None:
    path = tmp_path / "out" / "report.json"
    assert written_under(umask, path) == mode
    assert json.loads(path.read_text(encoding="utf-8")) == {"second": True}
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    write_json_atomic(path, {"old": 1})
    with pytest.raises(ValueError):
        write_json_atomic(path, {"bad": float("nan")})  # refused before anything is written
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(path, "half \udcff")  # fails while writing the temporary file
    assert json.loads(path.read_text(encoding="utf-8")) == {"old": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_compact_json_is_the_same_document(tmp_path):
    import json as _json

    from groundjudge.files import write_json_atomic

    data = {"a": [1, 2.5, None], "b": {"ü": "x"}}
    write_json_atomic(tmp_path / "pretty.json", data)
    write_json_atomic(tmp_path / "compact.json", data, indent=None)
    pretty, compact = (tmp_path / "pretty.json").read_text(), (tmp_path / "compact.json").read_text()
    assert _json.loads(pretty) == _json.loads(compact) == data
    assert compact == '{"a":[1,2.5,null],"b":{"ü":"x"}}\n' and "\n  " in pretty
