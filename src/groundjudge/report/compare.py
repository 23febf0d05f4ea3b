"""Compare two runs or two configs: per-metric deltas with a paired test, per-case outcomes.

Per metric, the delta of the means is tested with the paired sign-flip test of
``metrics.change`` over the cases both sides define (seeded, so the verdict is reproducible;
the same test regression gates and the run history use): ``real`` when p < alpha, else
``noise``. A metric ``regressed`` when the change is real and for the worse (a drop, or a rise
for latency, cost, tokens, error and refusal rates and ACL leaks).

Judge metrics are compared beside the deterministic ones when the documents are report.json
files: per judged case, each criterion's verdict under the criterion's name (``faithful``,
``citations_supported`` as 1 or 0, ``correct`` as its grade: what the judge's gates read) and,
for a binary criterion, the judge's score under its metric's name (``faithfulness``: the mean
claim support). A judge metric is ``advisory`` when either run's judge is not trusted for its
criterion: its regression is shown but never counted as one (``--fail-on-regression``).

Per case, the deterministic checks decide: ``regression`` (A passed every check, B fails one),
``win`` (B fails fewer checks than A), ``loss`` (B fails more, A already failed some), ``draw``.

When the two sides were chunked differently (``versions.chunking`` differs), chunk ids cannot
be matched across them; retrieval is then re-scored by matching chunks on document id plus at
least 50% span overlap, and the report says so. ``strict_chunker_version`` refuses instead
(:class:`~groundjudge.errors.ChunkerMismatch`).

When a replaced system's profile compared the same two configs (``profile-<name>.json`` of a
run folder), its own per-case outcomes are set beside these (``profile_agreement``): where they
agree, and for each case where they differ, what each looked at and why the rules part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from groundjudge.errors import ChunkerMismatch, InputError, InputProblem
from groundjudge.inert import markdown, markdown_code
from groundjudge.metrics.change import ALPHA, EXACT_MAX, REPS, paired_change, paired_permutation_p
from groundjudge.metrics.failures import DESCRIPTIONS, deterministic_failures
from groundjudge.metrics.spans import SPAN_METRIC_PREFIXES

if TYPE_CHECKING:
    from groundjudge.profiles.registry import CaseOutcomes
    from groundjudge.report.metrics_document import MetricsDocument

__all__ = ["ALPHA", "compare_configs", "compare_run_files", "configs_agreement", "document_agreement",
           "judge_values", "load_run_document", "paired_permutation_p", "profile_agreement", "profile_comparisons",
           "render_agreement_markdown", "render_compare_markdown"]


# retrieval metrics that match chunks by id (meaningless across chunker versions)
ID_MATCHED = {"hit", "recall", "precision", "mrr", "ndcg", "ndcg_exp", "map", "r_precision", "context_recall",
              "context_precision", "citation_scoped", "must_cite_coverage"}
assert not ID_MATCHED & set(SPAN_METRIC_PREFIXES)


class _ComparedSide(BaseModel):
    model_config = ConfigDict(extra="allow")
    per_case: dict[str, dict[str, float | None]]
    versions: dict[str, list[str] | str | None] = {}


class _Compared(BaseModel):
    """What :func:`compare_run_files` reads of a run document, checked before it is read."""

    model_config = ConfigDict(extra="allow")
    configs: list[str] = Field(min_length=1)
    per_config: dict[str, _ComparedSide]


def load_run_document(path: Path) -> dict[str, Any]:
    """A run's metrics.json or report.json (``path`` or the run folder holding it), with what
    a comparison reads of it checked: an edited or foreign file is an ``InputError`` naming its
    field, never a KeyError halfway through."""
    from groundjudge.load.records import json_document

    if path.is_dir():
        candidates = [path / "report.json", path / "metrics.json"]
        path = next((p for p in candidates if p.exists()), candidates[-1])
    doc = json_document(path)
    if not isinstance(doc, dict) or "per_config" not in doc:
        raise InputError.one(path, None, "per_config", "not a groundjudge metrics.json or report.json")
    try:
        run = _Compared.model_validate(doc)
    except ValidationError as exc:
        raise InputError([InputProblem(str(path), None, ".".join(map(str, e["loc"])), e["msg"])
                          for e in exc.errors(include_url=False)[:5]]) from None
    missing = [c for c in run.configs if c not in run.per_config]
    if missing:
        raise InputError.one(path, None, "configs", f"configs without a per_config section: {missing}")
    return doc


def _chunking(versions: Mapping[str, Sequence[str]]) -> set[str]:
    """The chunker versions a config's traces name (its ``versions``)."""
    return set(versions.get("chunking", []))


def compare_run_files(a: Path, b: Path | None, *, config_a: str | None = None, config_b: str | None = None,
                      strict_chunker_version: bool = False, seed: int = 0) -> dict[str, Any]:
    """Compare two runs (or, with ``b`` None, two configs of one run; by default its first two):
    the deterministic part of metrics.json / report.json, which every schema version shares,
    and the judge's per-case values of report.json files (:func:`compare_configs`). When a run
    folder holds a profile's own comparison of the same two configs (``profile-<name>.json``),
    its per-case outcomes are set beside groundjudge's (:func:`profile_agreement`). A config
    that is not there, or differing chunkers under ``strict_chunker_version``, is an
    ``InputError`` naming the file."""
    doc_a = load_run_document(a)
    doc_b = load_run_document(b) if b is not None else doc_a
    if b is None:
        configs = doc_a["configs"]
        config_a = config_a or configs[0]
        config_b = config_b or (configs[1] if len(configs) > 1 else None)
        if config_b is None:
            raise InputError.one(a, None, "configs", "one run with a single config: give a second run to compare")
    config_a = config_a or doc_a["configs"][0]
    config_b = config_b or doc_b["configs"][0]
    for doc, cfg, path in ((doc_a, config_a, a), (doc_b, config_b, b or a)):
        if cfg not in doc["per_config"]:
            raise InputError.one(path, None, "config", f"no config {cfg!r}; have {doc['configs']}")
    side_a, side_b = doc_a["per_config"][config_a], doc_b["per_config"][config_b]
    label_a = f"{a.name}:{config_a}" if b is not None else config_a
    label_b = f"{b.name}:{config_b}" if b is not None else config_b
    (judge_a, trusted_a), (judge_b, trusted_b) = judge_values(doc_a, config_a), judge_values(doc_b, config_b)
    trusted = {name: ok and trusted_b.get(name, False) for name, ok in trusted_a.items()}
    own = profile_comparisons([a] if b is None else [a, b], config_a, config_b)
    try:
        return compare_configs(side_a, side_b, label_a=label_a, label_b=label_b,
                               chunking=(_chunking(side_a.get("versions", {})), _chunking(side_b.get("versions", {}))),
                               strict_chunker_version=strict_chunker_version, seed=seed, judge_a=judge_a,
                               judge_b=judge_b, judge_trusted=trusted, profiles=own)
    except ChunkerMismatch as exc:
        raise InputError.one(b or a, None, "versions.chunking", f"{exc} (--strict-chunker-version is set)") from None


def profile_comparisons(folders: Sequence[Path], config_a: str, config_b: str) -> dict[str, CaseOutcomes]:
    """The profiles' own per-case outcomes for exactly these two configs, from the
    ``profile-<name>.json`` files of the run folders."""
    from groundjudge.load.records import json_document
    from groundjudge.profiles import profile_names, profile_outcomes

    found: dict[str, CaseOutcomes] = {}
    for folder in dict.fromkeys(folders):
        for name in profile_names():
            path = folder / f"profile-{name}.json"
            if not folder.is_dir() or not path.is_file():
                continue
            own = profile_outcomes(name, json_document(path))
            if own is not None and own.configs == (config_a, config_b):
                found[name] = own
    return found


def document_agreement(doc: MetricsDocument, name: str, report: Mapping[str, Any]) -> dict[str, Any] | None:
    """Where profile ``name``'s report (``report``) compared two configs of the run's document
    ``doc`` (its metrics, or its whole report) case by case: its outcomes beside those of
    :func:`compare_configs` on the same two configs, and why they differ
    (:func:`profile_agreement`); None when it compared none, or configs ``doc`` does not have."""
    from groundjudge.profiles import profile_outcomes

    own = profile_outcomes(name, report)
    if own is None or any(cfg not in doc.per_config for cfg in own.configs):
        return None
    side_a, side_b = (doc.per_config[cfg] for cfg in own.configs)
    chunking = (_chunking(side_a.versions), _chunking(side_b.versions))
    return _agreement(side_a.per_case, side_b.per_case, name, own, chunking)


def judge_values(doc: Mapping[str, Any], config: str) -> tuple[dict[str, dict[str, float]], dict[str, bool]]:
    """From a report.json: per judged case of ``config``, its judge values by name (see the module
    doc); and, by name, whether the run's judge is trusted for the criterion behind it."""
    judge = doc.get("judge") or {}
    section = (judge.get("per_config") or {}).get(config)
    if not section:
        return {}, {}
    trust = (doc.get("gates") or {}).get("trust") or {}
    trusted: dict[str, bool] = {}
    for crit in judge.get("criteria") or []:
        ok = bool((trust.get(crit["metric"]) or {}).get("trusted"))
        trusted[crit["name"]] = ok
        if crit["kind"] == "binary":
            trusted[crit["metric"]] = ok
    values: dict[str, dict[str, float]] = {}
    for case_id, case in section["cases"].items():
        if case["status"] != "judged":
            continue
        mine: dict[str, float] = {}
        for crit in judge.get("criteria") or []:
            value = case["criteria"].get(crit["name"]) or {}
            if value.get("label") is not None:
                mine[crit["name"]] = float(value["label"])
            if crit["kind"] == "binary" and value.get("value") is not None:
                mine[crit["metric"]] = float(value["value"])
        values[case_id] = mine
    return values, trusted


def _case_outcome(a: Mapping[str, float | None], b: Mapping[str, float | None]) -> str:
    fa, fb = deterministic_failures(a), deterministic_failures(b)
    if not fa and fb:
        return "regression"
    if len(fb) < len(fa):
        return "win"
    if len(fb) > len(fa):
        return "loss"
    return "draw"


def _pairs(per_a: Mapping[str, Mapping[str, Any]], per_b: Mapping[str, Mapping[str, Any]], cases: Sequence[str],
           name: str) -> list[tuple[float, float]]:
    pairs = [((per_a.get(c) or {}).get(name), (per_b.get(c) or {}).get(name)) for c in cases]
    return [(x, y) for x, y in pairs if x is not None and y is not None]


def _checks(values: Mapping[str, float | None]) -> str:
    failed = deterministic_failures(values)
    return ", ".join(DESCRIPTIONS[m] for m in failed) if failed else "no check"


def profile_agreement(name: str, own: CaseOutcomes, outcomes: Mapping[str, str],
                      per_a: Mapping[str, Mapping[str, float | None]], per_b: Mapping[str, Mapping[str, float | None]],
                      chunkers_differ: bool) -> dict[str, Any]:
    """The profile ``name``'s own per-case outcomes (``own``) beside groundjudge's
    (``outcomes``, decided on ``per_a``/``per_b``): how many agree, and for each case where they
    differ, both outcomes and why the two rules part there."""
    ours = ("groundjudge counts the deterministic checks each side fails (a regression: A failed none, B "
            "fails one; a win: B fails fewer)")
    if chunkers_differ:
        ours += "; retrieval matched by chunk id is left out, the chunker versions differ"
    shared = [c for c in own.outcomes if c in outcomes]
    differ = []
    for case in shared:
        if own.outcomes[case] == outcomes[case]:
            continue
        differ.append({"case_id": case, name: own.outcomes[case], "groundjudge": outcomes[case],
                       "why": f"{name} says {own.outcomes[case]}: {own.seen.get(case, '')}. groundjudge says "
                              f"{outcomes[case]}: A fails {_checks(per_a[case])}; B fails {_checks(per_b[case])}"})
    return {
        "profile": name, "configs": list(own.configs), "compared": len(shared), "agree": len(shared) - len(differ),
        "rules": {name: own.rule, "groundjudge": ours},
        "differ": differ,
        # cases one side decides and the other does not (no expected chunk to rank, no pair of traces)
        f"only_{name}": sorted(c for c in own.outcomes if c not in outcomes),
        "only_groundjudge": sorted(c for c in outcomes if c not in own.outcomes),
    }


PerCase = Mapping[str, Mapping[str, float | None]]  # case id -> metric -> value


def _paired_cases(per_case_a: PerCase, per_case_b: PerCase, chunking: tuple[set[str], set[str]],
                  ) -> tuple[list[str], dict[str, dict[str, Any]], dict[str, dict[str, Any]], bool]:
    """The cases both sides define, each side's values of them (copies), and whether the
    chunker versions differ; when they do, the metrics that match chunks by id are left out."""
    versions_a, versions_b = chunking
    differ = bool(versions_a and versions_b and versions_a != versions_b)
    cases = [c for c in per_case_a if c in per_case_b]
    per_a = {c: dict(per_case_a[c]) for c in cases}
    per_b = {c: dict(per_case_b[c]) for c in cases}
    if differ:
        # Chunk ids of one chunker mean nothing to the other: compare retrieval on the
        # span-matched metrics only, and drop the id-matched ones from both sides.
        for per in (per_a, per_b):
            for values in per.values():
                for name in [m for m in values if m.split("@")[0] in ID_MATCHED]:
                    del values[name]
    return cases, per_a, per_b, differ


def configs_agreement(side_a: Mapping[str, Any], side_b: Mapping[str, Any], name: str, own: CaseOutcomes,
                      chunking: tuple[set[str], set[str]] = (set(), set())) -> dict[str, Any]:
    """:func:`profile_agreement` of two configs (as :func:`compare_configs` takes them), without
    the rest of the comparison."""
    return _agreement(side_a["per_case"], side_b["per_case"], name, own, chunking)


def _agreement(per_case_a: PerCase, per_case_b: PerCase, name: str, own: CaseOutcomes,
               chunking: tuple[set[str], set[str]]) -> dict[str, Any]:
    cases, per_a, per_b, differ = _paired_cases(per_case_a, per_case_b, chunking)
    outcomes = {c: _case_outcome(per_a[c], per_b[c]) for c in cases}
    return profile_agreement(name, own, outcomes, per_a, per_b, differ)


def compare_configs(side_a: Mapping[str, Any], side_b: Mapping[str, Any], *, label_a: str, label_b: str,
                    chunking: tuple[set[str], set[str]] = (set(), set()),
                    strict_chunker_version: bool = False, seed: int = 0,
                    judge_a: Mapping[str, Mapping[str, float]] | None = None,
                    judge_b: Mapping[str, Mapping[str, float]] | None = None,
                    judge_trusted: Mapping[str, bool] | None = None,
                    profiles: Mapping[str, CaseOutcomes] | None = None) -> dict[str, Any]:
    """``side_a``/``side_b``: ``{"aggregate": ..., "per_case": {case: {metric: value}}}`` of one
    config each; ``judge_a``/``judge_b``: per case, its judge values (:func:`judge_values`);
    ``judge_trusted``: judge value name -> whether both runs' judges are trusted for it;
    ``profiles``: a profile's own per-case outcomes for these two configs, by profile name
    (:func:`profile_agreement`)."""
    versions_a, versions_b = chunking
    cases, per_a, per_b, differ = _paired_cases(side_a["per_case"], side_b["per_case"], chunking)
    if differ and strict_chunker_version:
        raise ChunkerMismatch(repr(label_a), versions_a, repr(label_b), versions_b)
    mode = "doc_id+span_overlap>=50%" if differ else "chunk_id"
    metrics: dict[str, Any] = {}
    names = sorted({m for c in cases for m in per_a[c]} & {m for c in cases for m in per_b[c]})
    judge_a, judge_b = judge_a or {}, judge_b or {}
    in_b = {m for v in judge_b.values() for m in v}
    judge_names = [m for m in dict.fromkeys(m for v in judge_a.values() for m in v) if m in in_b]  # criteria order
    for kind, source_a, source_b, keys in (("deterministic", per_a, per_b, names),
                                          ("judge", judge_a, judge_b, judge_names)):
        for name in keys:
            change = paired_change(name, _pairs(source_a, source_b, cases, name), seed=seed)
            if change.n == 0:
                continue
            advisory = kind == "judge" and not (judge_trusted or {}).get(name, False)
            metrics[name] = {"a": change.mean_a, "b": change.mean_b, "delta": change.delta, "n_paired": change.n,
                             "p_value": change.p_value, "verdict": change.verdict, "kind": kind,
                             "regressed": change.regressed, "advisory": advisory}
    outcomes = {c: _case_outcome(per_a[c], per_b[c]) for c in cases}
    counts = {k: sum(1 for v in outcomes.values() if v == k) for k in ("win", "loss", "draw", "regression")}
    regressed = [m for m, row in metrics.items() if row["regressed"]]
    agreement = [profile_agreement(name, own, outcomes, per_a, per_b, differ) for name, own in (profiles or {}).items()]
    return {
        "a": label_a, "b": label_b, "matching_mode": mode,
        "chunker_versions": {"a": sorted(versions_a), "b": sorted(versions_b)},
        "cases_compared": len(cases),
        "only_in_a": sorted(set(side_a["per_case"]) - set(side_b["per_case"])),
        "only_in_b": sorted(set(side_b["per_case"]) - set(side_a["per_case"])),
        "test": {"kind": "paired sign-flip permutation", "reps": REPS, "exact_up_to": EXACT_MAX, "seed": seed,
                 "alpha": ALPHA},
        "metrics": metrics, "per_case": outcomes, "counts": counts,
        # real changes for the worse; an untrusted judge's are listed apart and fail nothing
        "regressions": [m for m in regressed if not metrics[m]["advisory"]],
        "advisory_regressions": [m for m in regressed if metrics[m]["advisory"]],
        **({"profile_agreement": agreement} if agreement else {}),
    }


def _row(name: str, m: Mapping[str, Any]) -> str:
    verdict = m["verdict"] + (" (regression)" if m["regressed"] else "")
    if m["kind"] == "judge" and m["advisory"]:
        verdict += ", advisory: judge not trusted"
    return f"| {markdown(name)} | {m['a']:.4f} | {m['b']:.4f} | {m['delta']:+.4f} | {m['n_paired']} | {m['p_value']:.4f} | {verdict} |"


def render_compare_markdown(result: dict[str, Any], metrics: Sequence[str]) -> str:
    """The comparison: the ``metrics`` asked for, every judge metric, and every metric that
    regressed (a regression is never left out of the table). Names and versions from the runs
    are shown as text, never as markup."""
    test = result["test"]
    out = [f"# Comparison: {markdown_code(result['a'])} → {markdown_code(result['b'])}", "",
           (f"Cases compared: {result['cases_compared']}. Chunk matching: **{result['matching_mode']}** "
           f"(chunker versions {markdown(result['chunker_versions']['a'])} vs "
           f"{markdown(result['chunker_versions']['b'])})."),
           (f"Significance: {test['kind']} (seed {test['seed']}; {test['reps']} resamples up to "
           f"{test.get('exact_up_to', '–')} differing cases, its normal approximation above), alpha {test['alpha']}."),
           "", "| metric | A | B | delta | n | p | verdict |", "|---|---|---|---|---|---|---|"]
    rows = result["metrics"]
    shown = [m for m in metrics if m in rows and rows[m]["kind"] == "deterministic"]
    shown += [m for m in rows if rows[m]["regressed"] and rows[m]["kind"] == "deterministic" and m not in shown]
    out += [_row(name, rows[name]) for name in shown]
    judged = [m for m in rows if rows[m]["kind"] == "judge"]
    if judged:
        out += ["", ("Judge (per judged case: a criterion's verdict under its name, 1 or 0 or the grade; a binary "
                    "criterion's score under its metric's name):"), "",
                "| judge metric | A | B | delta | n | p | verdict |", "|---|---|---|---|---|---|---|"]
        out += [_row(name, rows[name]) for name in judged]
    c = result["counts"]
    out += ["", f"Per case: {c['win']} win, {c['loss']} loss, {c['draw']} draw, {c['regression']} regression.", ""]
    regressions = [cid for cid, o in result["per_case"].items() if o == "regression"]
    if regressions:
        out.append("Cases that regressed (A passed every check, B fails one): "
                   + ", ".join(map(markdown_code, regressions)))
    real = result.get("regressions", [])
    advisory = result.get("advisory_regressions", [])
    out += ["", ("Metrics that regressed for real: " + ", ".join(map(markdown_code, real))) if real
            else "No metric regressed for real."]
    if advisory:
        out.append("Advisory (judge not trusted): " + ", ".join(map(markdown_code, advisory)))
    for agreement in result.get("profile_agreement", []):
        out += ["", render_agreement_markdown(agreement)]
    return "\n".join(out) + "\n"


def render_agreement_markdown(agreement: Mapping[str, Any]) -> str:
    """A profile's per-case outcomes beside groundjudge's: the count that agree, the two rules,
    and a row per case where they differ."""
    name = agreement["profile"]
    out = [f"## Per case: `{markdown(name)}`'s own comparison beside groundjudge's", "",
           (f"{agreement['agree']} of {agreement['compared']} cases get the same outcome. "
           f"The rules differ: {markdown(agreement['rules'][name])}; {markdown(agreement['rules']['groundjudge'])}.")]
    if agreement["differ"]:
        out += ["", f"| case | {markdown(name)} | groundjudge | why they differ |", "|---|---|---|---|"]
        out += [f"| {markdown(row['case_id'])} | {markdown(row[name])} | {markdown(row['groundjudge'])} | "
                f"{markdown(row['why'])} |" for row in agreement["differ"]]
    only_own, only_ours = agreement[f"only_{name}"], agreement["only_groundjudge"]
    if only_ours:
        out += ["", f"Compared by groundjudge only ({markdown(name)} has no outcome for them): "
                + ", ".join(map(markdown_code, only_ours))]
    if only_own:
        out += ["", f"Compared by {markdown(name)} only: " + ", ".join(map(markdown_code, only_own))]
    return "\n".join(out) + "\n"
