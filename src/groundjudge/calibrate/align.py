"""``groundjudge align``: fit a rubric's reading of its replies to human labels, prove it out of
fold, and write it as a derived rubric with its own calibration record.

The steps: read the labelled answers and their claims' signals from a run's report.json
(``align_data``: no judge call); fit on every label (``align_model``); measure by k-fold
cross-fitting grouped by question, with bootstrap CIs, the in-sample and the base rubric's
figures beside, and a learning curve (``align_eval``); write the derived rubric (the base's
prompts and asking rule unchanged, so its cached answers serve) and pin it in the folder's
lock file; write a calibration record from the out-of-fold predictions, marked as such.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from groundjudge.calibrate.align_cuts import criterion_items, fit_criterion
from groundjudge.calibrate.align_data import AnswerItem, Labelled, labelled_items
from groundjudge.calibrate.align_eval import Figures, cross_fit, figures, learning_curve, question_folds
from groundjudge.calibrate.align_model import Fit, ModelKind, fit
from groundjudge.calibrate.record import build_record, write_record
from groundjudge.calibrate.verdicts import ItemKey, ItemLabels, load_labels
from groundjudge.errors import InputError
from groundjudge.files import together, write_text_atomic
from groundjudge.judge.alignment import Aligned, FittedCriterion
from groundjudge.judge.results import CriterionInfo, RubricRef
from groundjudge.judge.rubric import LOCK_NAME, Rubric, load_rubric, parse_rubric_file, read_lock
from groundjudge.judge.scoring import centred

# How a record's verdicts relate to the labels a fitted rubric learnt from (record["fitting"]).
OUT_OF_FOLD = "out_of_fold"  # cross-fitted: no item scored by a fit that saw its question
HELD_OUT = "held_out"  # labels of questions not used in fitting
IN_SAMPLE = "in_sample"  # labels the rubric was fitted on: never gates


@dataclass
class Alignment:
    labelled: Labelled
    final: Fit
    folds: list[int]
    oof: Figures
    in_sample: Figures
    base: Figures
    curve: list[tuple[float, float | None]]
    oof_labels: list[bool]
    oof_scores: list[float]
    k: int
    seed: int
    model: ModelKind
    criterion: str


def run_alignment(report: Path, labels: Sequence[Path], *, criterion: str = "faithful", k: int = 5, seed: int = 0,
                  model: ModelKind = "logistic", rater: str | None = None, reps: int = 1000,
                  curve: bool = True) -> Alignment:
    labelled = labelled_items(report, labels, criterion, rater)
    items = labelled.items
    try:
        folds = question_folds(items, k, seed)
    except ValueError as exc:
        raise InputError.one(labels[0], None, "folds", str(exc)) from None

    def fitter(train: Sequence[AnswerItem]) -> Fit:
        return fit(train, model)

    predictions, _ = cross_fit(items, fitter, folds, seed=seed)
    final = fitter(items)
    in_labels, in_scores = final.predict(items)
    base_scores = [i.base_confidence if i.base_confidence is not None else float(i.base_label) for i in items]
    return Alignment(
        labelled=labelled, final=final, folds=folds,
        oof=figures(items, predictions.labels, predictions.scores, seed=seed, reps=reps),
        in_sample=figures(items, in_labels, in_scores, seed=seed, reps=reps),
        base=figures(items, [i.base_label for i in items], base_scores, seed=seed, reps=reps),
        curve=learning_curve(items, fitter, folds, seed) if curve else [],
        oof_labels=predictions.labels, oof_scores=predictions.scores, k=k, seed=seed, model=model,
        criterion=criterion)


@dataclass
class OtherCriterion:
    fitted: FittedCriterion
    oof: tuple[float | None, float | None, float | None]  # kappa and its CI
    in_sample: float | None
    base: float | None  # the base rubric's kappa on the same answers
    n: int


def fit_other_criteria(alignment: Alignment, base: Rubric, labels: Sequence[Path], *, reps: int = 1000
                       ) -> dict[str, OtherCriterion]:
    """The base rubric's other criteria that the labels carry, each fitted and measured out of
    fold on the claim model's folds (``align_cuts``)."""
    from groundjudge.calibrate.agreement import kappa

    judge = alignment.labelled.judge
    kinds = {c.name: c.score_kind for c in base.criteria if c.name != alignment.criterion}
    fold_of = {item.query_id: f for item, f in zip(alignment.labelled.items, alignment.folds)}
    out = {}
    for items in criterion_items(judge, kinds, labels, alignment.labelled.rater):
        # questions labelled for this criterion only: dealt to folds as the claim model's were
        extra = sorted(set(items.query_ids) - set(fold_of))
        folds = dict(fold_of) | {q: i % alignment.k for i, q in enumerate(extra)}
        try:
            fitted, figures_ = fit_criterion(items, folds, alignment.seed, reps)
        except ValueError as exc:
            raise InputError.one(labels[0], None, items.name, str(exc)) from None
        base_labels = []
        for q, config_id in items.keys:
            case = judge.case(config_id, q) if config_id is not None else None
            base_labels.append(case.label(items.name) if case is not None else None)
        pairs = [(b, t) for b, t in zip(base_labels, items.truth) if b is not None]
        base_kappa = kappa([b for b, _ in pairs], [t for _, t in pairs], items.labels,
                           "quadratic" if items.ordinal else None) if pairs else None
        out[items.name] = OtherCriterion(fitted, figures_["oof"], figures_["in_sample"], base_kappa, figures_["n"])
    return out


def base_rubric(labelled: Labelled, rubrics_dirs: Sequence[Path]) -> Rubric:
    """The rubric the report was judged with, found by id and version in the first folder that
    has it, and checked against the report's hash."""
    return rubric_by_ref(labelled.judge.identity.rubric, rubrics_dirs)


def rubric_by_ref(ref: RubricRef, rubrics_dirs: Sequence[Path]) -> Rubric:
    """The rubric ``ref`` names, from the first folder that has its id and version, checked
    against its hash."""
    for folder in rubrics_dirs:
        if (folder / ref.id / f"v{ref.version}.yaml").is_file():
            rubric = load_rubric(folder, ref.id, ref.version)
            if rubric.content_hash != ref.hash:
                raise InputError.one(folder / ref.id / f"v{ref.version}.yaml", None, "hash",
                                     f"is not the rubric the report was judged with (hash {rubric.content_hash[:12]} "
                                     f"!= {ref.hash[:12]})")
            return rubric
    raise InputError.one(rubrics_dirs[0] if rubrics_dirs else "rubrics", None, "rubric",
                         f"the report's rubric {ref.id}/v{ref.version} is in none of the rubric folders")


def derived_rubric(base: Rubric, alignment: Alignment, name: str, version: int, criterion: str,
                   others: dict[str, OtherCriterion] | None = None) -> Rubric:
    """The base rubric with a new id and version, ``derived_from`` and the fitted values."""
    final = alignment.final
    oof = alignment.oof.by_metric
    aligned = Aligned(
        criterion=criterion, claim_model=final.claim_model, combine=final.combine,  # type: ignore[arg-type]
        temperature=final.temperature, threshold=final.threshold, labels_sha256=alignment.labelled.labels_sha256,
        fitted_questions=sorted({i.query_id for i in alignment.labelled.items}), claim_labels=final.claim_labels,
        folds=alignment.k, seed=alignment.seed,
        out_of_fold={"n": alignment.oof.n, **{m: _r(f.value) for m, f in oof.items()},
                     **{f"{m}_ci": [round(f.ci_low, 4), round(f.ci_high, 4)] for m, f in oof.items()
                        if f.ci_low is not None and f.ci_high is not None}},
        criteria={name: other.fitted for name, other in (others or {}).items()})
    data = base.model_dump(mode="json", exclude_defaults=True)
    data.pop("opt_in", None)
    data.update(id=name, version=version, derived_from=f"{base.key}@{base.content_hash}",
                aligned=aligned.model_dump(mode="json", exclude_defaults=True),
                description=f"{base.key} with its `{criterion}` reading fitted to human labels by `groundjudge align` "
                            f"({final.claim_model.kind} claim model, {final.combine}); the base's questions, byte for "
                            "byte, so its cached answers serve. " + base.description)
    return Rubric.model_validate(data)


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


class _Dumper(yaml.SafeDumper):
    """Multi-line prompts as literal blocks, as the published rubric files write them."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _text)


def next_version(out_dir: Path, name: str) -> int:
    """One above every version of ``name`` in the folder or its lock file: a version once
    pinned is never written again, even when its file is gone."""
    versions = [int(p.stem[1:]) for p in (out_dir / name).glob("v*.yaml") if p.stem[1:].isdigit()]
    pinned = [int(key.rpartition("/v")[2]) for key in read_lock(out_dir)
              if key.rpartition("/v")[0] == name and key.rpartition("/v")[2].isdigit()]
    return max(versions + pinned, default=0) + 1


def write_derived(rubric: Rubric, out_dir: Path) -> Path:
    """The rubric file and its pin in the folder's lock file, together or not at all. An
    existing file is never replaced: each fit is a new version."""
    path = out_dir / rubric.id / f"v{rubric.version}.yaml"
    if path.exists():
        raise InputError.one(path, None, None, "exists already: an aligned rubric is never rewritten")
    lock = read_lock(out_dir)
    lock[rubric.key] = rubric.content_hash
    header = (f"# {rubric.key}: fitted by `groundjudge align` from {rubric.derived_from}.\n"
              "# Published and pinned in rubrics.lock: a change means a new version (run align again).\n")
    text = header + yaml.dump(rubric.model_dump(mode="json", exclude_defaults=True), Dumper=_Dumper,
                              sort_keys=False, allow_unicode=True, width=100)
    with together():
        write_text_atomic(path, text)
        write_text_atomic(out_dir / LOCK_NAME, json.dumps({"rubrics": dict(sorted(lock.items()))}, indent=2) + "\n")
    if parse_rubric_file(path).content_hash != rubric.content_hash:  # the YAML must read back as what was fitted
        raise RuntimeError(f"{path} does not read back as the fitted rubric")
    return path


def oof_record(alignment: Alignment, rubric: Rubric, labels: Sequence[Path], records_dir: Path, criterion: str, *,
               target_agreement: float = 0.9, risk: float = 0.1) -> tuple[dict[str, Any], Path]:
    """The derived rubric's calibration record, from its out-of-fold verdicts: no verdict in it
    came from a fit that saw its question."""
    ident = alignment.labelled.judge.identity
    provenance = {"rubric": {"id": rubric.id, "version": rubric.version, "hash": rubric.content_hash},
                  "model": ident.model, "decoding": dict(ident.decoding)}
    info = CriterionInfo(name=criterion, kind="binary", labels=[True, False], metric=rubric.criterion(criterion).metric_name)
    judged: dict[ItemKey, ItemLabels] = {}
    for item, label, score in zip(alignment.labelled.items, alignment.oof_labels, alignment.oof_scores):
        judged[(item.query_id, item.config_id)] = ItemLabels(
            labels={criterion: label}, confidence={criterion: centred(score, alignment.final.threshold)})
    humans = load_labels(labels, [criterion])
    humans = {alignment.labelled.rater: humans[alignment.labelled.rater]}
    record = build_record(judged, provenance, humans, [info], label_files=labels, seed=alignment.seed,
                          target_agreement=target_agreement, risk=risk)
    record["fitting"] = {"predictions": OUT_OF_FOLD, "folds": alignment.k, "seed": alignment.seed,
                         "derived_from": rubric.derived_from, "labels_sha256": alignment.labelled.labels_sha256}
    path, _ = write_record(record, records_dir)
    return record, path


def fitting_of(rubric: Rubric | None, labelled_questions: set[str]) -> dict[str, Any] | None:
    """For a record built by ``groundjudge calibrate``: how its labels relate to the fit of an
    aligned rubric (None for any other rubric). Any labelled question the rubric was fitted on
    makes the whole record in-sample, as does one a demonstration of its system prompt came from."""
    if rubric is None or (rubric.aligned is None and rubric.demonstrations is None):
        return None
    fitted = set(rubric.aligned.fitted_questions if rubric.aligned is not None else [])
    fitted |= set(rubric.demonstrations.from_questions if rubric.demonstrations is not None else [])
    seen = labelled_questions & fitted
    if seen:
        return {"predictions": IN_SAMPLE, "derived_from": rubric.derived_from,
                "reason": f"{len(seen)} of the {len(labelled_questions)} labelled questions were used to fit "
                          f"{rubric.key}"}
    return {"predictions": HELD_OUT, "derived_from": rubric.derived_from,
            "reason": f"none of the {len(labelled_questions)} labelled questions was used to fit {rubric.key}"}
