"""Rubrics: versioned prompt files, strictly validated and pinned by content hash.

A rubric lives in ``rubrics/<id>/v<version>.yaml``. Its hash is the SHA-256 of its canonical
JSON form, so comments and layout may change but meaning may not: a published version whose
hash differs from the lock file is an error, and a change means a new version.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.resources
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import jinja2
import jinja2.meta
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from groundjudge.errors import InputError, InputProblem
from groundjudge.judge.alignment import Aligned

LOCK_NAME = "rubrics.lock"
USER_VARIABLES = frozenset({"question", "contexts", "answer", "expected_answer", "citations"})
REPAIR_VARIABLES = frozenset({"problem"})

_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)


ScoreKind = Literal["claim_share", "cited_claim_share", "field", "claim_support", "cited_claim_support",
                   "nugget_grade", "nugget_share", "answer_relevance"]

# Rubrics published before criteria named their metric and score (grounded_answer v1): what
# their three criteria mean. Only used where a rubric leaves these fields out, so the published
# file, and with it its hash, its cache entries and its calibration record, stay as they were.
LEGACY_CRITERIA: dict[str, tuple[str, ScoreKind, str | None]] = {
    "faithful": ("faithfulness", "claim_share", None),
    "correct": ("correctness", "field", "correctness"),
    "citations_supported": ("citation_support", "cited_claim_share", None),
}


class Criterion(BaseModel):
    """One thing the judge decides per case, as the rubric declares it.

    ``name`` is the label people give (``faithful``) and the key of human label files; ``metric``
    is the per-case value averaged in reports and named in ``[gates.metrics]``
    (``faithfulness``); ``score`` says how the value comes from the reply:

    - ``claim_share`` / ``cited_claim_share``: share of (cited) claims the judge calls supported
      (by their citations); the label is true when the share is 1.
    - ``claim_support`` / ``cited_claim_support``: mean support probability of the (cited)
      claims; the label is true when every claim's support is at least ``threshold``.
    - ``field``: the reply's field ``field`` (default: the criterion's name), on the label scale.
    - ``nugget_grade``: the share of expected-answer nuggets the answer states, mapped to the
      label scale by ``cut_points`` (ascending; grade = how many cut points the share reaches).
    - ``nugget_share``: that share itself; the label is true when the answer states every
      nugget (nothing the expected answer holds is missing).
    - ``answer_relevance``: the support of the one question whether the answer responds to
      what was asked (``claim_questions.relevance``); the label is true when it reaches
      ``threshold``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    kind: Literal["binary", "ordinal"]
    labels: list[bool | int]
    description: str
    metric: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]*$")
    score: ScoreKind | None = None
    field: str | None = None
    threshold: float | None = Field(default=None, ge=0, le=1)
    cut_points: list[float] | None = None
    needs_expected_answer: bool | None = None

    @model_validator(mode="after")
    def _complete(self) -> Criterion:
        if self.score is None and self.name not in LEGACY_CRITERIA:
            raise ValueError(f"criterion {self.name!r} must say how it is scored (score: one of "
                             f"{', '.join(ScoreKind.__args__)})")  # type: ignore[attr-defined]
        if self.kind == "binary" and sorted(map(str, self.labels)) != ["False", "True"]:
            raise ValueError(f"binary criterion {self.name!r} must have labels [true, false]")
        if self.kind == "ordinal" and not all(isinstance(v, int) and not isinstance(v, bool) for v in self.labels):
            raise ValueError(f"ordinal criterion {self.name!r} must have integer labels")
        if self.score_kind == "nugget_grade" and len(self.cut_points or []) != len(self.labels) - 1:
            raise ValueError(f"criterion {self.name!r}: nugget_grade needs one cut point per grade above the lowest")
        return self

    @property
    def metric_name(self) -> str:
        return self.metric or LEGACY_CRITERIA.get(self.name, (self.name, "field", None))[0]

    @property
    def score_kind(self) -> ScoreKind:
        return self.score or LEGACY_CRITERIA[self.name][1]

    @property
    def reply_field(self) -> str:
        return self.field or LEGACY_CRITERIA.get(self.name, (None, None, None))[2] or self.name

    @property
    def ordinal(self) -> bool:
        return self.kind == "ordinal"

    @property
    def cut(self) -> float:
        """Support at or above which a claim counts as supported (probabilistic scores)."""
        return 0.5 if self.threshold is None else self.threshold

    @property
    def uses_expected_answer(self) -> bool:
        if self.needs_expected_answer is not None:
            return self.needs_expected_answer
        return self.score_kind in ("nugget_grade", "nugget_share") or (self.name == "correct" and self.score is None)


@functools.lru_cache(maxsize=64)
def _compiled(source: str) -> jinja2.Template:
    # Compiling costs ~1 ms, rendering ~20 us: compile each template once, not once per case.
    return _ENV.from_string(source)


def _template_variables(source: str) -> set[str]:
    return set(jinja2.meta.find_undeclared_variables(_ENV.parse(source)))


class Grounding(BaseModel):
    """The exact term check beside the model (groundjudge.judge.grounding): a claim's support is
    the model's P(yes) times ``term_factor`` for every term of the claim that the passages never
    mention. ``ask_model``: ``when_unfound`` asks the model only about claims that bring in a
    term the passages lack (a claim whose every term is in the passages is supported by that
    rule, with no call); ``when_decisive`` also skips claims whose unfound terms alone put them
    below the threshold (the model's answer could not save them: their support is recorded as
    the most they could have had, ``term_factor`` to the number of unfound terms);
    ``when_answer_open`` is ``when_decisive`` that, once one claim is below the threshold by its
    unfound terms alone (the answer is unfaithful whatever the model says), asks nothing more
    about the answer's uncited claims and reports them as unchecked; ``always`` asks about
    every claim.

    ``terms`` says what a term is: ``legacy`` (English function words typed into the code,
    long words matched on their first five letters; every version published before
    ``claim_check`` v6) or ``snowball`` (per language: a maintained stop-word list and a
    Snowball stemmer). ``language`` (``snowball`` only) declares the answers' language as an
    ISO 639-1 code instead of detecting it per case."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    term_factor: float = Field(gt=0, le=1)
    ask_model: Literal["always", "when_unfound", "when_decisive", "when_answer_open"] = "when_unfound"
    # Defaults leave the published versions' hashes as they were (see Rubric.content_hash).
    terms: Literal["legacy", "snowball"] = "legacy"
    language: str | None = Field(default=None, pattern=r"^[a-z]{2}$")

    @model_validator(mode="after")
    def _language_needs_snowball(self) -> Grounding:
        if self.language is not None and self.terms != "snowball":
            raise ValueError("grounding.language applies only to terms: snowball")
        return self


class ClaimQuestions(BaseModel):
    """How the ``claim_check`` family asks: one short yes/no question per claim (or all claims
    of a case in one call), answered with one token whose probability is the claim's support.

    Every question is the system prompt plus one user message that starts with ``context``
    (question, the chunks, the answer: byte-identical for every question about the same case
    and chunks, so a server's prefix cache processes it once) and ends with ``claim`` (the only
    part that changes).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    context: str  # variables: question, contexts, answer
    claim: str  # variables: claim
    nugget_context: str  # variables: question, answer (the answer is what nuggets are checked against)
    nugget: str  # variables: nugget
    contradiction: str | None = None  # variables: claim; asked for claims below `contradiction_below`
    # variables: question, answer; asked once per answer: does it respond to what was asked?
    # (a rubric with an ``answer_relevance`` criterion needs it)
    relevance: str | None = None
    contradiction_below: float = Field(default=0.5, ge=0, le=1)
    yes_tokens: list[str] = Field(min_length=1)  # answers that mean yes (compared case- and space-insensitively)
    no_tokens: list[str] = Field(min_length=1)
    top_logprobs: int = Field(default=10, ge=1, le=20)
    grounding: Grounding | None = None

    @model_validator(mode="after")
    def _variables(self) -> ClaimQuestions:
        allowed = {"context": {"question", "contexts", "answer"}, "claim": {"claim"},
                   "nugget_context": {"question", "answer"}, "nugget": {"nugget"}, "contradiction": {"claim"},
                   "relevance": {"question", "answer"}}
        for name, names in allowed.items():
            source = getattr(self, name)
            if source is None:
                continue
            unknown = _template_variables(source) - names
            if unknown:
                raise ValueError(f"claim_questions.{name} uses unknown variables {sorted(unknown)}; "
                                 f"allowed: {sorted(names)}")
        needed = {"context": {"contexts"}, "claim": {"claim"}, "nugget_context": {"answer"}, "nugget": {"nugget"},
                  "relevance": {"question", "answer"}}
        for name, names in needed.items():
            if getattr(self, name) is None:
                continue
            missing = names - _template_variables(getattr(self, name))
            if missing:
                raise ValueError(f"claim_questions.{name} must show {sorted(missing)}")
        return self

    def render(self, template: str, **values: Any) -> str:
        return _compiled(getattr(self, template)).render(**values)


class Demonstrations(BaseModel):
    """What ``groundjudge align --demos`` placed in the system prompt and why it was kept: the
    questions the examples came from (never measured on), and agreement with people on the
    answers to the other questions without and with them."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    count: int = Field(ge=1)
    from_questions: list[str]
    labels_sha256: list[str]  # of each label file, in the order given
    seed: int
    trial: dict[str, Any]  # items, questions, kappa_base, kappa_demos, ci_demos, ci_gain, half_width


class Rubric(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(pattern=r"^[a-z0-9_]+$")
    version: int = Field(ge=1)
    # chosen only when named (``rubric_version``, or a profile that needs it), never as the
    # family's newest: a version that costs more than its predecessor for criteria most runs
    # do not report
    opt_in: bool = False
    description: str
    criteria: list[Criterion] = Field(min_length=1)
    system_prompt: str
    # one_call_json: one call per case, a JSON verdict (grounded_answer); claim_questions: one
    # yes/no question per claim, its answer token's probability as the support (claim_check).
    protocol: Literal["one_call_json", "claim_questions"] = "one_call_json"
    user_template: str | None = None
    repair_prompt: str | None = None
    output_schema: dict[str, Any] | None = None
    claim_questions: ClaimQuestions | None = None
    # A rubric fitted to human labels (``groundjudge align``): the rubric it was derived from
    # (``<id>/v<version>@<hash>``) and what was fitted. Absent from every published base rubric,
    # whose hash therefore stays as it was.
    derived_from: str | None = Field(default=None, pattern=r"^[a-z0-9_]+/v[0-9]+@[0-9a-f]{64}$")
    aligned: Aligned | None = None
    # Worked examples in the system prompt (``groundjudge align --demos``) and the trial that kept them.
    demonstrations: Demonstrations | None = None

    @model_validator(mode="after")
    def _aligned_fits_its_rubric(self) -> Rubric:
        derived = self.aligned is not None or self.demonstrations is not None
        if derived != (self.derived_from is not None):
            raise ValueError("a derived rubric needs derived_from and what was fitted (aligned or demonstrations)")
        if self.demonstrations is not None and self.claim_questions is None:
            raise ValueError("demonstrations: only a claim_questions rubric takes them")
        if self.aligned is None:
            return self
        if self.claim_questions is None or self.claim_questions.grounding is None:
            raise ValueError("aligned: only a claim_questions rubric with grounding can be aligned")
        if not any(c.name == self.aligned.criterion and c.score_kind == "claim_support" for c in self.criteria):
            raise ValueError(f"aligned.criterion {self.aligned.criterion!r} is not a claim_support criterion")
        for name, fitted in self.aligned.criteria.items():
            criterion = next((c for c in self.criteria if c.name == name), None)
            if criterion is None:
                raise ValueError(f"aligned.criteria: the rubric has no criterion {name!r}")
            if (fitted.cut_points is not None) != criterion.ordinal or (
                    fitted.cut_points is not None and len(fitted.cut_points) != len(criterion.labels) - 1):
                raise ValueError(f"aligned.criteria.{name}: a binary criterion takes a threshold, an ordinal one "
                                 "a cut point per grade above the lowest")
        return self

    @model_validator(mode="after")
    def _templates_use_known_variables(self) -> Rubric:
        if _template_variables(self.system_prompt):
            raise ValueError("system_prompt must not use template variables: it is shared by every case")
        if self.protocol == "claim_questions":
            if self.claim_questions is None:
                raise ValueError("protocol claim_questions needs a claim_questions section")
            if self.claim_questions.relevance is None and any(c.score_kind == "answer_relevance"
                                                              for c in self.criteria):
                raise ValueError("an answer_relevance criterion needs claim_questions.relevance, the question asked")
            return self
        if any(c.score_kind in ("answer_relevance", "nugget_share") for c in self.criteria):
            raise ValueError("answer_relevance and nugget_share criteria are scored from claim_questions answers")
        if self.user_template is None or self.repair_prompt is None or self.output_schema is None:
            raise ValueError("protocol one_call_json needs user_template, repair_prompt and output_schema")
        unknown = _template_variables(self.user_template) - USER_VARIABLES
        if unknown:
            raise ValueError(f"user_template uses unknown variables {sorted(unknown)}; "
                             f"allowed: {sorted(USER_VARIABLES)}")
        missing = {"question", "contexts", "answer"} - _template_variables(self.user_template)
        if missing:
            raise ValueError(f"user_template must show {sorted(missing)}")
        if _template_variables(self.repair_prompt) - REPAIR_VARIABLES:
            raise ValueError("repair_prompt may only use {{ problem }}")
        return self

    @property
    def content_hash(self) -> str:
        # Fields left at their defaults are left out, so a published rubric keeps its hash when
        # the rubric format gains optional fields.
        canonical = json.dumps(self.model_dump(mode="json", exclude_defaults=True), sort_keys=True,
                               ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def criterion(self, name: str) -> Criterion:
        return next(c for c in self.criteria if c.name == name)

    def criterion_for_metric(self, metric: str) -> Criterion | None:
        return next((c for c in self.criteria if c.metric_name == metric), None)

    @property
    def key(self) -> str:
        return f"{self.id}/v{self.version}"

    def render_user(self, **values: Any) -> str:
        return _compiled(self.user_template or "").render(**values)

    def render_repair(self, problem: str) -> str:
        return _compiled(self.repair_prompt or "").render(problem=problem)


def _problem(path: Path, field: str | None, text: str) -> InputError:
    return InputError([InputProblem(str(path), None, field, text)])


def parse_rubric_file(path: Path) -> Rubric:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _problem(path, None, "rubric file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _problem(path, None, f"cannot read the rubric file: {getattr(exc, 'strerror', None) or exc}") from None
    except RecursionError:
        raise _problem(path, None, "nested too deeply to read") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        raise InputError([InputProblem(str(path), line, None, f"invalid YAML: {exc}")]) from None
    if not isinstance(raw, dict):
        raise _problem(path, None, "a rubric file must be a mapping")
    try:
        rubric = Rubric.model_validate(raw)
    except ValidationError as exc:
        raise InputError([
            InputProblem(str(path), None, ".".join(str(p) for p in err["loc"]) or None,
                         "unknown key" if err["type"] == "extra_forbidden" else err["msg"])
            for err in exc.errors(include_url=False)
        ]) from None
    expected = path.parent.name, path.stem
    if expected != (rubric.id, f"v{rubric.version}"):
        raise _problem(path, "id/version",
                       f"file is at {expected[0]}/{expected[1]} but declares {rubric.id}/v{rubric.version}")
    return rubric


def read_lock(rubrics_dir: Path) -> dict[str, str]:
    path = rubrics_dir / LOCK_NAME
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError([InputProblem(str(path), exc.lineno, None, f"invalid JSON: {exc.msg}")]) from None
    except (OSError, UnicodeDecodeError, RecursionError) as exc:
        raise _problem(path, None, f"cannot read the lock file: {getattr(exc, 'strerror', None) or exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("rubrics", {}), dict):
        raise _problem(path, "rubrics", "expected an object with a `rubrics` object of key -> hash")
    return dict(data.get("rubrics", {}))


@contextlib.contextmanager
def packaged_rubrics() -> Iterator[Path]:
    """The rubrics installed with groundjudge (package data), as a folder."""
    with importlib.resources.as_file(importlib.resources.files("groundjudge") / "rubrics") as folder:
        yield Path(folder)


def rubric_files(rubrics_dir: Path) -> list[Path]:
    return sorted(rubrics_dir.glob("*/v*.yaml"))


def load_rubric(rubrics_dir: Path, rubric_id: str, version: int | None = None) -> Rubric:
    """Load a rubric (by default its newest version that is not ``opt_in``) and check it
    against the lock file."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", rubric_id) or ".." in rubric_id:
        raise _problem(rubrics_dir, "rubric", f"{rubric_id!r} is not a rubric id (letters, digits, '_', '-', '.')")
    candidates = sorted(rubrics_dir.glob(f"{rubric_id}/v*.yaml"), key=lambda p: int(p.stem[1:]))
    if version is not None:
        candidates = [p for p in candidates if p.stem == f"v{version}"]
    if not candidates:
        wanted = f"{rubric_id}/v{version}" if version else rubric_id
        raise _problem(rubrics_dir, "rubric", f"no rubric {wanted} under {rubrics_dir}")
    path = candidates[-1]
    rubric = parse_rubric_file(path)
    if version is None:  # the newest version that is not opt-in (the newest, if all are)
        for older in reversed(candidates[:-1]):
            if not rubric.opt_in:
                break
            path, rubric = older, parse_rubric_file(older)
    pinned = read_lock(rubrics_dir).get(rubric.key)
    if pinned is None:
        raise _problem(path, None, f"rubric {rubric.key} is not published in {LOCK_NAME}; "
                                   "run `groundjudge rubrics lock` once it is final")
    if pinned != rubric.content_hash:
        raise _problem(path, None, f"published rubric {rubric.key} was edited (hash {rubric.content_hash[:12]} "
                                   f"!= locked {pinned[:12]}); restore it and put the change in a new version")
    return rubric


def lock_rubrics(rubrics_dir: Path) -> tuple[dict[str, str], list[str]]:
    """Pin every rubric not yet in the lock file; never re-pin an edited one.

    Returns the new lock and the keys that were added. An edited published version raises.
    """
    lock = read_lock(rubrics_dir)
    added = []
    for path in rubric_files(rubrics_dir):
        rubric = parse_rubric_file(path)
        if rubric.key in lock:
            if lock[rubric.key] != rubric.content_hash:
                raise _problem(path, None, f"published rubric {rubric.key} was edited; "
                                           "restore it and put the change in a new version")
            continue
        lock[rubric.key] = rubric.content_hash
        added.append(rubric.key)
    text = json.dumps({"rubrics": dict(sorted(lock.items()))}, indent=2) + "\n"
    (rubrics_dir / LOCK_NAME).write_text(text, encoding="utf-8")
    return lock, added
