"""A rater's labelling session over one run: what is labelled, the batches drawn, the weighted
agreement so far, and the next batch.

Weights (see ``estimate``): batch t, drawn after the rater's first ``labelled_before`` labels,
has ``m_t`` of its ``n_t`` picks labelled. Picks are shown in a random order and labelled in
that order, so the labelled ones are a random subsample: their inclusion probability is
``pi * m_t / n_t``. Mixing weights ``lambda_t`` proportional to ``m_t / pool_t^2`` (see
``design_weights``). An item's weight is ``sum(lambda_t over batches drawn after it was
labelled) + lambda_b / pi'`` for the batch b that picked it. A label with no batch behind it
(typed by hand) is known, not estimated, in every batch drawn after it; given after the last
batch, it is left out of the weighted estimate (no design covers it).

The human queue (items of the run that no trusted judge settled, under selective trust) is
offered first, as a ``queue`` batch: its items are chosen, not sampled, so a queue batch is no
part of the design. Its labels are known items, exactly like labels typed by hand: counted with
certainty in every sampled batch drawn after them, and left out of the weighted estimate until
one is. The sampled batches that follow draw from the rest, so the estimate stays unbiased.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from groundjudge.contracts import HumanLabel
from groundjudge.label.estimate import (
    KappaEstimate,
    WeightedItem,
    agreement_weights,
    estimate_kappa,
    expected_half_width,
    kappa_gradient,
)
from groundjudge.label.picker import PoolItem, plan_batch
from groundjudge.label.run_source import JudgedItem, Key, LabelRun
from groundjudge.label.store import BatchRecord, append_batch, read_batches, read_labels

QUEUE_STRATEGY = "queue"  # a batch of the run's human queue, outside the sampling design
PRIOR_AGREEMENT = 0.8  # assumed judge-human agreement before any label exists (expected CI only)
SPREAD_DISCOUNT = 0.5  # no confidence: a fully split claim verdict halves the chance the judge is right

# What the page asks a rater for: the criteria of the labels contract (SPEC 3.4, HumanLabel).
CRITERIA = ("faithful", "correct", "citations_supported")
ORDINAL = {"correct": [0, 1, 2, 3]}
BINARY = [True, False]


def criterion_labels(criterion: str) -> list[bool | int]:
    return list(ORDINAL.get(criterion, BINARY))


def criterion_weighting(criterion: str) -> str | None:
    return "quadratic" if criterion in ORDINAL else None


@dataclass
class LabelSession:
    run: LabelRun
    rater: str
    labels_path: Path
    mine: list[HumanLabel]  # this rater's labels in the file, in file order
    others: dict[Key, set[str]]  # item -> other raters who labelled it (files beside the labels file)
    batches: list[BatchRecord]  # this rater's batches over this run
    judged: dict[Key, JudgedItem] = field(default_factory=dict)

    def key_of(self, label: HumanLabel) -> Key | None:
        if label.config_id is not None:
            return (label.query_id, label.config_id)
        matches = [k for k in self.judged if k[0] == label.query_id]
        return matches[0] if len(matches) == 1 else None

    @property
    def labelled(self) -> dict[Key, HumanLabel]:
        out: dict[Key, HumanLabel] = {}
        for label in self.mine:
            key = self.key_of(label)
            if key is not None:
                out.setdefault(key, label)
        return out

    def pending(self) -> list[Key]:
        """Picks of the latest batch not labelled yet, in presentation order."""
        if not self.batches:
            return []
        done = self.labelled
        return [(q, c) for q, c, _, _ in self.batches[-1].picks if (q, c) not in done]

    def current_batch_progress(self) -> tuple[int, int]:
        if not self.batches:
            return 0, 0
        picks = self.batches[-1].picks
        done = self.labelled
        return sum(1 for q, c, _, _ in picks if (q, c) in done), len(picks)


def _other_labels(labels_path: Path, rater: str) -> dict[Key, set[str]]:
    out: dict[Key, set[str]] = {}
    folder = labels_path.parent
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.jsonl")):
        for label in read_labels(path):
            if label.rater != rater and label.config_id is not None:
                out.setdefault((label.query_id, label.config_id), set()).add(label.rater)
    return out


def open_session(run: LabelRun, rater: str, labels_path: Path) -> LabelSession:
    mine = [label for label in read_labels(labels_path) if label.rater == rater]
    batches = [b for b in read_batches(labels_path) if b.rater == rater and b.run == run.report_digest]
    return LabelSession(run, rater, labels_path, mine, _other_labels(labels_path, rater), sorted(
        batches, key=lambda b: b.batch), {item.key: item for item in run.items})


def sampled_batches(batches: list[BatchRecord]) -> list[BatchRecord]:
    """The batches of the sampling design (queue batches are not)."""
    return [b for b in batches if b.strategy != QUEUE_STRATEGY]


def design_weights(session: LabelSession) -> tuple[dict[Key, WeightedItem], dict[int, float] | None]:
    """Per labelled item: weight, batch and effective inclusion probability (cell left at -1)."""
    labelled_keys = [session.key_of(label) for label in session.mine]
    labelled = {k for k in labelled_keys if k is not None and k in session.judged}
    batches = sampled_batches(session.batches)
    if not batches:
        return {k: WeightedItem(-1, -1, 1.0) for k in labelled}, None
    counts: dict[int, int] = {}
    for b in batches:
        counts[b.batch] = sum(1 for q, c, _, _ in b.picks if (q, c) in labelled)
    # Mixing weights: inverse-variance-like, known before any label of the batch is seen. A
    # batch's estimate of the rest of the pool has variance ~ pool^2 / labelled, so later batches
    # (smaller pools) count for more; with one batch this is just lambda = 1.
    precision = {b.batch: batch_precision(b, counts[b.batch]) for b in batches}
    total = sum(counts.values())
    if total == 0:
        # batches drawn, none labelled yet: the pre-batch labels are all there is
        first = batches[0].labelled_before
        known = {k for k in labelled_keys[:first] if k in labelled}
        return {k: WeightedItem(-1, -1, 1.0) for k in known}, None
    lambdas = {b: p / sum(precision.values()) for b, p in precision.items()}
    weights: dict[Key, float] = {}
    design: dict[Key, tuple[int, float]] = {}
    for b in batches:
        lam = lambdas[b.batch]
        if lam == 0:
            continue
        known = {k for k in labelled_keys[:b.labelled_before] if k in labelled}
        for k in known:
            weights[k] = weights.get(k, 0.0) + lam
        n_t, m_t = len(b.picks), counts[b.batch]
        for q, c, pi, _ in b.picks:
            if (q, c) in labelled and (q, c) not in known:
                eff = pi * m_t / n_t
                weights[(q, c)] = weights.get((q, c), 0.0) + lam / eff
                design[(q, c)] = (b.batch, eff)
    return {k: WeightedItem(-1, -1, w, *design.get(k, (None, None))) for k, w in weights.items()}, lambdas


def agreement_estimates(session: LabelSession) -> dict[str, KappaEstimate]:
    """Judge-vs-this-rater kappa per criterion, weighted by inverse inclusion probability."""
    weights, lambdas = design_weights(session)
    out = {}
    for criterion in CRITERIA:
        size = len(criterion_labels(criterion))
        out[criterion] = estimate_kappa(_weighted_items(session, criterion, weights), size,
                                        agreement_weights(size, criterion_weighting(criterion)), lambdas)
    return out


def _shares(session: LabelSession, criterion: str, estimate_items: list[WeightedItem] | None) -> np.ndarray:
    """Current estimate of the judge-human cell shares, smoothed; a stated prior before any label."""
    scale = criterion_labels(criterion)
    size = len(scale)
    matrix = np.zeros((size, size))
    for item in estimate_items or []:
        matrix[item.first, item.second] += item.weight
    judge_counts = np.zeros(size)
    for judged in session.judged.values():
        value = judged.labels.get(criterion)
        if value in scale:
            judge_counts[scale.index(value)] += 1
    if judge_counts.sum() == 0:
        return np.full((size, size), 1.0 / size ** 2)
    rows = judge_counts / judge_counts.sum()
    prior = np.array([[PRIOR_AGREEMENT if j == k else (1 - PRIOR_AGREEMENT) / max(size - 1, 1)
                       for k in range(size)] for j in range(size)]) * rows[:, None]
    if matrix.sum() > 0:
        counts = matrix + prior
        sums = counts.sum(axis=1, keepdims=True)
        conditional = np.divide(counts, sums, out=np.full_like(counts, 1.0 / size), where=sums > 0)
        shares = conditional * rows[:, None]
    else:
        shares = prior
    return np.asarray(shares / shares.sum(), dtype=np.float64)


def _weighted_items(session: LabelSession, criterion: str,
                    weights: dict[Key, WeightedItem] | None = None) -> list[WeightedItem]:
    """The labelled items where both the judge and the rater gave ``criterion`` a label on its scale."""
    if weights is None:
        weights, _ = design_weights(session)
    labelled = session.labelled
    scale = criterion_labels(criterion)
    out = []
    for key, w in weights.items():
        judge = session.judged[key].labels.get(criterion)
        human = getattr(labelled[key], criterion)
        if judge is None or human is None or judge not in scale or human not in scale:
            continue
        out.append(WeightedItem(scale.index(judge), scale.index(human), w.weight, w.batch, w.pi))
    return out


def expected_z2(session: LabelSession, criterion: str, keys: list[Key]) -> list[float] | None:
    """E[z_i^2] for unlabelled items, under the current shares and, for ``faithful``, the judge's
    confidence (or its claim-verdict spread where it gives none). None: kappa undefined there."""
    scale = criterion_labels(criterion)
    size = len(scale)
    shares = _shares(session, criterion, _weighted_items(session, criterion))
    agree = agreement_weights(size, criterion_weighting(criterion))
    grad = kappa_gradient(shares, agree)
    if grad is None:
        return None
    centre = float((grad * shares).sum())
    conditional = shares / np.maximum(shares.sum(axis=1, keepdims=True), 1e-12)
    out = []
    for key in keys:
        item = session.judged[key]
        judge = item.labels.get(criterion)
        if judge not in scale or judge is None:
            out.append(0.0)
            continue
        j = scale.index(judge)
        probs = conditional[j].copy()
        if criterion == "faithful":
            right = item.confidence if item.confidence is not None else probs[j] * (1 - SPREAD_DISCOUNT * item.spread)
            probs = np.full(size, (1 - right) / max(size - 1, 1))
            probs[j] = right
        out.append(float(sum(probs[k] * (grad[j, k] - centre) ** 2 for k in range(size))))
    return out


def pool_items(session: LabelSession) -> tuple[list[PoolItem], list[PoolItem]]:
    """The items this rater has not labelled, split into fresh and labelled-by-another-rater."""
    done = session.labelled
    keys = [k for k in session.judged if k not in done]
    z2 = expected_z2(session, "faithful", keys) or [1.0] * len(keys)
    fresh: list[PoolItem] = []
    doubles: list[PoolItem] = []
    for key, value in zip(keys, z2):
        item = session.judged[key]
        tag = next(iter(session.run.dataset.cases[key[0]].tags), "untagged") if key[0] in session.run.dataset.cases \
            else "untagged"
        pool_item = PoolItem(key, (item.labels.get("faithful"), tag), math.sqrt(max(value, 0.0)) + 1e-9)
        (doubles if key in session.others else fresh).append(pool_item)
    return fresh, doubles


def plan_next_batch(session: LabelSession, *, strategy: str, size: int, double_share: float,
                    seed: int) -> BatchRecord:
    """Draw the next batch (not yet recorded; see ``draw_batch``). Refused while one is pending."""
    if session.pending():
        raise ValueError("the rater's current batch is not finished")
    fresh, doubles = pool_items(session)
    plan = plan_batch(fresh, doubles, size, double_share, strategy, seed)
    record = BatchRecord(
        rater=session.rater, batch=(session.batches[-1].batch + 1) if session.batches else 1,
        run=session.run.report_digest, strategy=strategy, seed=seed, double_share=double_share,
        labelled_before=len(session.mine), picks=[(p.key[0], p.key[1], p.pi, p.double) for p in plan.picks],
        pool=[(k[0], k[1], pi, d) for k, pi, d in plan.pool],
        created=datetime.now(UTC).isoformat(timespec="seconds"))
    return record


def draw_batch(session: LabelSession, *, strategy: str, size: int, double_share: float, seed: int) -> BatchRecord:
    """Draw the next batch and record it in the sidecar before anyone labels from it."""
    record = plan_next_batch(session, strategy=strategy, size=size, double_share=double_share, seed=seed)
    append_batch(session.labels_path, record)
    session.batches.append(record)
    return record


def waiting_in_queue(session: LabelSession) -> list[Key]:
    """The run's human queue, in its order, less what this rater has labelled."""
    done = session.labelled
    return [q.key for q in session.run.queue if q.key in session.judged and q.key not in done]


def plan_queue_batch(session: LabelSession, *, size: int) -> BatchRecord | None:
    """A ``queue`` batch of the first ``size`` queued items this rater has not labelled, shown
    in queue order (None when there are none; not yet recorded, see ``draw_queue_batch``).
    Refused while a batch is pending."""
    if session.pending():
        raise ValueError("the rater's current batch is not finished")
    keys = waiting_in_queue(session)[:size]
    if not keys:
        return None
    rows = [(q, c, 1.0, (q, c) in session.others) for q, c in keys]
    return BatchRecord(
        rater=session.rater, batch=(session.batches[-1].batch + 1) if session.batches else 1,
        run=session.run.report_digest, strategy=QUEUE_STRATEGY, seed=0, double_share=0.0,
        labelled_before=len(session.mine), picks=rows, pool=rows,
        created=datetime.now(UTC).isoformat(timespec="seconds"))


def draw_queue_batch(session: LabelSession, *, size: int) -> BatchRecord | None:
    """Plan the queue batch and record it in the sidecar before anyone labels from it."""
    record = plan_queue_batch(session, size=size)
    if record is None:
        return None
    append_batch(session.labels_path, record)
    session.batches.append(record)
    return record


def batch_precision(batch: BatchRecord, labelled: int) -> float:
    """A batch's unnormalised mixing weight: labelled count / pool size squared."""
    return labelled / max(len(batch.pool), 1) ** 2


def expected_after(session: LabelSession, batch: BatchRecord, current: dict[str, KappaEstimate]
                   ) -> dict[str, float | None]:
    """Expected 95% CI half-width per criterion once ``batch`` is fully labelled."""
    if batch.strategy == QUEUE_STRATEGY:  # chosen, not sampled: no design variance to predict
        return {criterion: None for criterion in CRITERIA}
    labelled = set(session.labelled)
    precisions = {b.batch: batch_precision(b, sum(1 for q, c, _, _ in b.picks if (q, c) in labelled))
                  for b in sampled_batches(session.batches) if b.batch != batch.batch}
    new_precision = batch_precision(batch, len(batch.picks))
    out: dict[str, float | None] = {}
    for criterion in CRITERIA:
        population = float(sum(1 for item in session.judged.values() if item.labels.get(criterion) is not None))
        keys = [(q, c) for q, c, _, _ in batch.pool]
        z2 = expected_z2(session, criterion, keys)
        used = {item.labels.get(criterion) for item in session.judged.values()} - {None}
        if z2 is None or len(used) < 2:  # a judge that uses one label has kappa 0 or undefined: no CI to shrink
            out[criterion] = None
            continue
        est = current.get(criterion)
        out[criterion] = expected_half_width(est if est is not None and est.weighted else None, precisions,
                                             new_precision, [pi for _, _, pi, _ in batch.pool], z2, population)
    return out
