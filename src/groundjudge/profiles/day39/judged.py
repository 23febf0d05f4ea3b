"""The judge's columns of the day-39 report (Faithfulness, Answer relevance, ...), from what a
run's judge found, or said to be missing, and why: never a number the judge did not give.

Per config and judge metric the cell holds the value a judge gate reads (the share of judged
answers the criterion labels True; the mean grade for ``correctness``), its n, and a state:

- ``no_judge``: ``groundjudge metrics`` runs no judge;
- ``not_in_rubric``: the run's rubric does not judge this criterion (answer relevance and
  completeness need ``claim_check`` v5);
- ``none_judged``: the judge ran but judged none of the config's answers (the reasons counted:
  refusals decided without it, context chunks without text, ...);
- ``untrusted``: a value, from a judge no calibration record vouches for yet;
- ``trusted``: a value a calibration record vouches for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from groundjudge.profiles.day39.settings import JUDGE_METRICS
from groundjudge.profiles.registry import JudgedCase, JudgeFindings

__all__ = ["CORPUS_HINT", "cell_text", "judge_cells", "reasons_text"]

CORPUS_HINT = ("give the chunks' text with --corpus FILE: the document store, one JSON line per chunk with "
               "chunk_id and text (document_id, document_version, section_path, page_start, page_end, acl_roles, "
               "text_hash, chunking_strategy and index_version as the lesson lists them)")


def reasons_text(cases: Iterable[JudgedCase]) -> str:
    """Why these cases have no verdict, counted by kind: ``6 missing_text``."""
    counts = Counter((c.reason or c.status).split(":")[0] for c in cases)
    return ", ".join(f"{n} {why}" for why, n in counts.most_common())


def _cell(metric: str, criterion: str, cases: list[JudgedCase], findings: JudgeFindings) -> dict[str, Any]:
    judged = [c for c in cases if c.status == "judged"]
    labels = [v for c in judged if (v := c.labels.get(criterion)) is not None]
    if not labels:
        why = reasons_text([c for c in cases if c.status != "judged"]) or "no answer to judge"
        if judged:
            why = f"{len(judged)} judged, none with a {criterion} verdict" + (f"; {why}" if why else "")
        if any((c.reason or "").startswith("missing_text") for c in cases):
            why += f" ({CORPUS_HINT})"
        return {"metric": metric, "criterion": criterion, "value": None, "n": 0, "judged": len(judged),
                "state": "none_judged", "reason": f"no verdict: {why}" if judged else f"no judged answer: {why}"}
    if findings.kinds.get(criterion) == "ordinal":
        value = sum(float(v) for v in labels) / len(labels)
    else:
        value = sum(1 for v in labels if v is True) / len(labels)
    trusted, why = findings.trust.get(metric, (False, "no calibration record for this judge"))
    return {"metric": metric, "criterion": criterion, "value": value, "n": len(labels),
            "state": "trusted" if trusted else "untrusted", "reason": why}


def judge_cells(findings: JudgeFindings | None, case_ids: Mapping[str, list[str]]) -> dict[str, dict[str, Any]]:
    """config -> judge metric -> cell (see the module docstring), for the cases of each config."""
    out: dict[str, dict[str, Any]] = {}
    for cfg, ids in case_ids.items():
        out[cfg] = {}
        for metric, criterion in JUDGE_METRICS.items():
            if findings is None:
                out[cfg][metric] = {"metric": metric, "criterion": criterion, "value": None, "n": 0,
                                    "state": "no_judge",
                                    "reason": "not judged: `groundjudge metrics` runs no judge; "
                                              "`groundjudge run --profile day39` does"}
            elif criterion not in findings.criteria:
                out[cfg][metric] = {"metric": metric, "criterion": criterion, "value": None, "n": 0,
                                    "state": "not_in_rubric",
                                    "reason": f"not judged: the rubric {findings.rubric} has no {criterion} criterion "
                                              "(claim_check v5 judges answer relevance and completeness)"}
            else:
                cases = [findings.cases.get((cfg, cid), JudgedCase("not_sent", "no output")) for cid in ids]
                out[cfg][metric] = _cell(metric, criterion, cases, findings)
    return out


def cell_text(cell: Mapping[str, Any]) -> str:
    """A table cell: the value with its n and trust, or what is missing instead of a number."""
    state = cell["state"]
    if state == "no_judge":
        return "not judged (metrics: no judge)"
    if state == "not_in_rubric":
        return "not judged (not in the rubric)"
    if state == "none_judged":
        return f"no verdict ({cell['judged']} judged)" if cell.get("judged") else "no judged answer"
    mark = "" if state == "trusted" else ", untrusted"
    return f"{cell['value']:.3f} (n={cell['n']}{mark})"
