"""The rater's labels file and its selection sidecar, appended one whole line at a time.

An append writes the old content plus the new line to a temporary file, fsyncs it and renames
it over the original (then fsyncs the folder), under an exclusive lock on the hidden ``.<file>.lock``: a
reader or a crash sees the file before or after the line, never half of it, and concurrent
writers queue. Label files are small (a line per label), so the copy costs nothing that matters.

The sidecar ``<labels file>.selection`` (JSON lines, not ``.jsonl`` so that a glob over label
files never takes it for labels) records each batch a rater was given and every pool item's
inclusion probability, which the weighted agreement estimates need.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from groundjudge.contracts import HumanLabel
from groundjudge.errors import InputError, InputProblem
from groundjudge.files import jsonl_lines
from groundjudge.load.records import read_records

SIDECAR_SUFFIX = ".selection"
_LINE_BREAKS = "\u2028\u2029\x85"  # left raw by json.dumps(ensure_ascii=False)


def sidecar_path(labels_path: Path) -> Path:
    return labels_path.with_name(labels_path.name + SIDECAR_SUFFIX)


def append_line(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON object as one line, atomically and durably (see the module docstring)."""
    line = json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))
    for char in _LINE_BREAKS:  # str.splitlines() (the JSONL readers) would split a line on these
        line = line.replace(char, f"\\u{ord(char):04x}")
    if "\n" in line:
        raise ValueError("a record must serialise to one line")
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        for stale in path.parent.glob(f".{path.name}.*.tmp"):
            stale.unlink(missing_ok=True)  # left by a writer killed before its rename
        old = path.read_bytes() if path.exists() else b""
        if old and not old.endswith(b"\n"):
            old += b"\n"
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(old + line.encode("utf-8") + b"\n")
                handle.flush()
                os.fsync(handle.fileno())
            if path.exists():
                os.chmod(tmp, path.stat().st_mode & 0o777)
            else:
                os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    finally:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)
        os.close(lock_fd)


def append_label(path: Path, label: HumanLabel) -> dict[str, Any]:
    """Validate and append one label in the labels format; returns the line written."""
    record = label.model_dump(mode="json", exclude_none=False)
    if record.get("claims") is None:
        record.pop("claims", None)
    append_line(path, record)
    return record


def read_labels(path: Path) -> list[HumanLabel]:
    """Every label of a labels file, in file order (an absent or empty file has none)."""
    if not path.exists() or not path.read_bytes().strip():
        return []
    return [label for _, label in read_records(path, HumanLabel)]


class BatchRecord(BaseModel):
    """One batch drawn for a rater; ``pool`` lists every item it was drawn from with its
    inclusion probability, in ``[query_id, config_id, pi, double]`` rows."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: str = "batch"
    rater: str
    batch: int = Field(ge=1)
    run: str  # sha256 of the report.json the pool came from
    strategy: str
    seed: int
    double_share: float
    labelled_before: int = Field(ge=0)  # this rater's labels in the file when the batch was drawn
    picks: list[tuple[str, str, float, bool]]  # in presentation order
    pool: list[tuple[str, str, float, bool]]
    created: str


def read_batches(labels_path: Path) -> list[BatchRecord]:
    path = sidecar_path(labels_path)
    if not path.exists():
        return []
    out, problems = [], []
    for lineno, line in enumerate(jsonl_lines(path.read_text(encoding="utf-8")), 1):
        if not line.strip():
            continue
        try:
            out.append(BatchRecord.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValueError) as exc:
            problems.append(InputProblem(str(path), lineno, None, f"not a batch record: {str(exc)[:200]}"))
    if problems:
        raise InputError(problems)
    return out


def append_batch(labels_path: Path, batch: BatchRecord) -> None:
    append_line(sidecar_path(labels_path), batch.model_dump(mode="json"))
