"""`groundjudge label` as a library call: open the rater's session, resume or draw a batch, and
say what the agreement estimate is now and what it is expected to be after the batch."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from groundjudge.errors import InputError
from groundjudge.label.estimate import KappaEstimate
from groundjudge.label.run_source import Key, read_run
from groundjudge.label.session import (
    PRIOR_AGREEMENT,
    QUEUE_STRATEGY,
    LabelSession,
    agreement_estimates,
    draw_batch,
    draw_queue_batch,
    expected_after,
    open_session,
    waiting_in_queue,
)
from groundjudge.label.store import BatchRecord


@dataclass(frozen=True)
class LabelPlan:
    session: LabelSession
    batch: BatchRecord | None  # None: nothing left to label
    resumed: bool  # the rater's unfinished batch, not a new draw
    current: dict[str, KappaEstimate]
    expected_half_width: dict[str, float | None]
    confidence_note: str
    expected_note: str
    doubles: int  # items of the batch that another rater labelled
    queue_note: str  # the run's human queue: how many wait for this rater, and whether this batch is theirs


LABELS_DIR = Path("calibration") / "labels"
# A rater name that becomes a file name: a letter or digit first (no leading dot: no hidden file,
# no "..", no option-like "-"), then letters, digits, "_", "-" and ".": no separator, NUL or
# control character can reach the path.
RATER_FILE_NAME = re.compile(r"[^\W_][\w.-]{0,63}")


def default_labels_path(rater: str) -> Path:
    """``calibration/labels/<rater>.jsonl``, for a rater name that is a plain file name; any
    other name is refused (a name from the command line never becomes a path of its choosing)."""
    if not RATER_FILE_NAME.fullmatch(rater):
        raise InputError.one("command line", None, "rater",
                             f"{rater!r} cannot name a labels file: use a letter or digit first, then letters, "
                             "digits, '_', '-' or '.' (up to 64 characters, e.g. kim or kim.lee), or give your "
                             "own file with --labels")
    return LABELS_DIR / f"{rater}.jsonl"


def confidence_note(session: LabelSession) -> str:
    sources = Counter(item.confidence_source for item in session.judged.values())
    if not session.judged:
        return "no judged items"
    if sources.get("none", 0) == len(session.judged):
        return ("the judge gave no confidences: `uncertain` uses the spread of its claim verdicts "
                "and the current judge-human confusion matrix instead")
    return "judge confidences: " + ", ".join(f"{n} from {src}" for src, n in sorted(sources.items()))


def prepare_batch(run_dir: Path, rater: str, *, labels_path: Path | None = None, strategy: str = "uncertain",
                  size: int = 20, double_share: float = 0.2, seed: int = 0, queue_first: bool = True) -> LabelPlan:
    """Resume the rater's unfinished batch, else draw (and record) a new one: with
    ``queue_first``, the run's human queue (items no trusted judge settled) before any sampled
    batch, up to ``size`` items at a time (a ``queue`` batch, outside the sampling design)."""
    if not rater.strip():
        raise InputError.one("command line", None, "rater", "give a non-empty --rater")
    if size < 1:
        raise InputError.one("command line", None, "batch", "the batch size must be at least 1")
    if not 0.0 <= double_share <= 1.0:
        raise InputError.one("command line", None, "double", "the double share must be in [0, 1]")
    run = read_run(run_dir)
    path = labels_path or default_labels_path(rater)
    session = open_session(run, rater, path)
    current = agreement_estimates(session)
    resumed = bool(session.pending())
    waiting = waiting_in_queue(session)
    if resumed:
        batch: BatchRecord | None = session.batches[-1]
    elif len(session.labelled) >= len(session.judged):
        batch = None
    elif queue_first and waiting:
        batch = draw_queue_batch(session, size=size)
    else:
        batch = draw_batch(session, strategy=strategy, size=size, double_share=double_share, seed=seed)
    expected: dict[str, float | None] = (expected_after(session, batch, current) if batch is not None
                                         else dict.fromkeys(current))
    doubles = sum(1 for *_, d in batch.picks if d) if batch is not None else 0
    if batch is not None and batch.strategy == QUEUE_STRATEGY:
        expected_note = ("a queue batch is chosen, not sampled: its labels decide the queued items and join the "
                         "weighted estimate as known items once a sampled batch is drawn after them")
    else:
        expected_note = ("expected half-width: design variance of the batch under the current estimate"
                         + ("" if session.labelled else f" (before any label: {PRIOR_AGREEMENT:.0%} judge-human "
                                                        "agreement assumed)"))
    return LabelPlan(session, batch, resumed, current, expected, confidence_note(session), expected_note, doubles,
                     queue_summary(session, waiting, batch))


def queue_summary(session: LabelSession, waiting: list[Key], batch: BatchRecord | None) -> str:
    """What the run's human queue holds for this rater, one line."""
    if not session.run.queue:
        return "human queue: empty (no item awaits a person, or the run had no selective trust)"
    text = f"human queue: {len(waiting)} of {len(session.run.queue)} queued item(s) not yet labelled by {session.rater}"
    if batch is not None and batch.strategy == QUEUE_STRATEGY:
        text += f"; this batch is {len(batch.picks)} of them, in queue order"
    return text
