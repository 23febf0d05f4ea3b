"""The profiles: a replaced system's own report, markdown and gate, registered by the name of
the input format it reads (see :mod:`groundjudge.load.adapters.registry`).

``--profile`` choices come from here; a profile can only be registered for a known format, so
the two registries cannot drift apart.

A profile's knobs (the settings its system's users rely on, such as WFGY's ``--k``) are the
fields of its :class:`ProfileSettings` model. That one declaration gives both ways to set them:
a ``[profile.<name>]`` table in the config file and a flag on ``metrics`` and ``run``
(``--field-name``, or the spellings a :class:`Flag` names). Nothing else lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo

from groundjudge.errors import InputError, InputProblem
from groundjudge.load.adapters import format_names

__all__ = [
    "CaseOutcomes",
    "Flag",
    "JudgeFindings",
    "JudgedCase",
    "Knob",
    "NoSettings",
    "Profile",
    "ProfileResult",
    "ProfileSettings",
    "evidence_overlap",
    "get_profile",
    "profile_knobs",
    "profile_names",
    "profile_outcomes",
    "profile_rubric",
    "profile_settings",
    "register_profile",
    "relative_to_config",
    "run_profile",
    "unregister_profile",
]


@dataclass(frozen=True)
class ProfileResult:
    name: str
    report: dict[str, Any]
    markdown: str
    passed: bool | None  # the system's own gate verdict; None where it has no gate
    _: KW_ONLY  # what a profile may add, by name
    notes: tuple[str, ...] = ()  # why a metric of its own is null, what it wrote besides the report
    status: str | None = None  # the system's own word for it where it has more than two (PASS_WITH_RISK)


@dataclass(frozen=True)
class CaseOutcomes:
    """A profile's own verdict per case when it compares two runs: the two configs it compared
    (A, then B), each case's outcome in groundjudge compare's words (``win``, ``loss``,
    ``draw``, ``regression``), what the profile saw in that case, and its rule in one phrase.
    ``groundjudge compare`` puts them beside its own outcomes and says why they differ."""

    configs: tuple[str, str]
    outcomes: Mapping[str, str]
    seen: Mapping[str, str]
    rule: str


class ProfileSettings(BaseModel):
    """A profile's knobs, one field each (subclass it; ``Field(description=...)`` is the help).

    A field is set by ``[profile.<name>] field = value`` in the config file and by a flag on
    ``metrics`` and ``run``: ``--field-name`` unless a :class:`Flag` in its ``Annotated``
    metadata names other spellings. A ``bool`` field is a switch, a ``list`` field a flag that
    may be repeated; any other field takes one value (a tuple too). Unknown keys are refused.
    A validator that reads a path from a config file resolves it with
    :func:`relative_to_config`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class NoSettings(ProfileSettings):
    """The settings of a profile that has no knobs."""


@dataclass(frozen=True)
class Flag:
    """A knob's command-line spellings (``Annotated[int, Flag("--k")]``); the first names it in
    messages. With ``words``, the flag also takes the ``name=value`` words that follow it, so
    ``--gates precision=0.80 chr=0.75`` reads as one value (as the seed's own command line is
    written)."""

    names: tuple[str, ...]
    words: bool = False

    def __init__(self, *names: str, words: bool = False) -> None:
        if not names or not all(n.startswith("--") and len(n) > 2 for n in names):
            raise ValueError(f"flag spellings start with '--': {names!r}")
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "words", words)


@dataclass(frozen=True)
class Knob:
    """One knob of a profile, as the command line offers it."""

    profile: str
    name: str  # the settings field, and the key in ``[profile.<name>]``
    flags: tuple[str, ...]
    switch: bool  # a bool field: the flag takes no value
    many: bool  # a list field: the flag may be repeated, each time one value
    words: bool
    help: str


def _kinds(annotation: Any) -> set[Any]:
    """The types an annotation allows, None aside: ``int | None`` -> {int}, ``list[str]`` -> {list}."""
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        return set().union(*(_kinds(arg) for arg in get_args(annotation))) - {type(None)}
    return {origin or annotation}


def _knobs_of(profile: str, settings: type[ProfileSettings]) -> tuple[Knob, ...]:
    knobs = []
    for name, info in settings.model_fields.items():
        flag = next((m for m in info.metadata if isinstance(m, Flag)), None)
        kinds = _kinds(info.annotation)
        knobs.append(Knob(profile, name, flag.names if flag else ("--" + name.replace("_", "-"),),
                          switch=kinds == {bool}, many=list in kinds, words=bool(flag and flag.words),
                          help=info.description or ""))
    return tuple(knobs)


@dataclass(frozen=True)
class JudgedCase:
    """The judge's word on one (config, case) pair: ``status`` is ``judged``, ``judge_error``,
    ``skipped`` (its budget ran out) or ``not_sent`` (decided without a judge: a refusal, an
    empty answer, a context without text...), with the reason; labels and values by criterion
    name (only when judged)."""

    status: str
    reason: str | None = None
    labels: Mapping[str, bool | int | None] = field(default_factory=dict)
    values: Mapping[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class JudgeFindings:
    """What a run's judge found, as plain values, for a profile that reports judge criteria
    (profiles come before the judge stage, so they read this, never the judge's own records).

    ``criteria``: criterion name -> the metric it feeds (``faithful`` -> ``faithfulness``);
    ``kinds``: criterion name -> ``binary`` or ``ordinal``; ``cases``: (config id, case id) ->
    :class:`JudgedCase`; ``trust``: metric -> (trusted, why), as the run's gates decided it."""

    rubric: str
    model: str
    criteria: Mapping[str, str]
    kinds: Mapping[str, str]
    cases: Mapping[tuple[str, str], JudgedCase]
    trust: Mapping[str, tuple[bool, str]]


@dataclass(frozen=True)
class Profile:
    """``from_files(golden, traces, live)`` reads files in the format ``name`` and returns the
    system's own report; it raises :class:`InputError` for anything it cannot read. ``live`` is
    a second set of traces for systems that compare two indexes (empty otherwise).

    ``settings`` is the model of its knobs; a profile that declares some gets them as the
    keyword ``settings`` (an instance of that model): ``from_files(golden, traces, live,
    settings=...)``.
    """

    name: str
    from_files: Callable[..., ProfileResult]
    settings: type[ProfileSettings] = NoSettings
    uses_corpus: bool = False  # from_files also takes the run's corpus file (keyword ``corpus``, or None)
    # its own per-case outcomes, read from its report (see CaseOutcomes); None: it compares none
    case_outcomes: Callable[[Mapping[str, Any]], CaseOutcomes | None] | None = None
    # (rubric id, version) whose criteria the report needs; a run with the profile uses that
    # version unless the config names a version of that rubric (None: the config's rubric)
    rubric: tuple[str, int] | None = None
    # whether ``from_files`` takes the keyword ``judge``: what a run's judge found
    # (:class:`JudgeFindings`), None in a run without a judge (``metrics``)
    reads_judge: bool = False

    @property
    def knobs(self) -> tuple[Knob, ...]:
        return _knobs_of(self.name, self.settings)


def profile_outcomes(name: str, report: Mapping[str, Any]) -> CaseOutcomes | None:
    """The per-case outcomes of profile ``name``'s ``report`` (as written in profile-<name>.json),
    or None: an unknown profile, one that compares nothing per case, a report of one run."""
    profile = _PROFILES.get(name)
    if profile is None or profile.case_outcomes is None:
        return None
    return profile.case_outcomes(report)


_PROFILES: dict[str, Profile] = {}


def evidence_overlap(path: Path, ids: Sequence[str], gold: Path, gold_ids: Collection[str]) -> int:
    """How many of the question ids in the evidence file ``path`` are in the gold set; raises
    :class:`InputError` when none is. A file that shares no id with the gold set is no evidence
    about it (another format, another gold set, a mismatched export): scored as it is, every
    question would look unanswered, and a gate comparing two runs would compare nothing."""
    known = set(gold_ids)
    mine = set(ids)
    shared = len(mine & known)
    if not shared:
        raise InputError.one(path, None, "qid", f"shares no question id with the gold set {gold} (0 of its "
                                                f"{len(mine)} ids are among the gold's {len(known)}): is it a file "
                                                f"of another format, or of another gold set?")
    return shared


def register_profile(profile: Profile) -> Profile:
    """Add ``profile``. Raises ValueError when its name is not a registered input format or
    already has a profile, or when a knob's flag clashes with another profile's: two profiles
    may share a flag (``--gates``) only with the same spellings and the same kind (switch or
    value), since the command line offers it once."""
    if profile.name not in format_names():
        raise ValueError(f"no input format named {profile.name!r}: register the format first "
                         f"(known: {', '.join(format_names())})")
    if profile.name in _PROFILES:
        raise ValueError(f"format {profile.name!r} already has a profile")
    for knob in profile.knobs:
        for other in (k for p in _PROFILES.values() for k in p.knobs):
            shared = set(knob.flags) & set(other.flags)
            if shared and (set(knob.flags) != set(other.flags) or knob.switch != other.switch
                           or knob.words != other.words):
                raise ValueError(f"profile {profile.name!r}: knob {knob.name!r} spells {', '.join(sorted(shared))} "
                                 f"as the {other.profile!r} profile's {other.name!r} does, but not the same way "
                                 "(same spellings, and both switches or both values)")
    _PROFILES[profile.name] = profile
    return profile


def unregister_profile(name: str) -> None:
    """Remove a registered profile (a test or notebook that registered one cleans up)."""
    _PROFILES.pop(name, None)


def profile_names() -> tuple[str, ...]:
    """The registered profiles, in registration order."""
    return tuple(_PROFILES)


def get_profile(name: str) -> Profile:
    """The registered profile ``name``; KeyError naming the known ones otherwise."""
    try:
        return _PROFILES[name]
    except KeyError:
        raise KeyError(f"unknown profile {name!r}; known: {', '.join(_PROFILES)}") from None


def profile_knobs() -> tuple[Knob, ...]:
    """Every registered profile's knobs, profile by profile in registration order."""
    return tuple(knob for profile in _PROFILES.values() for knob in profile.knobs)


def relative_to_config(value: str | Path, info: ValidationInfo) -> Path:
    """``value`` as a path: relative to the config file's folder when the settings come from a
    config file (:func:`profile_settings` with ``base``), else as given (relative to the
    working directory, as a flag's path is)."""
    path = Path(value)
    base = (info.context or {}).get("base")
    return path if base is None or path.is_absolute() else Path(base) / path


def profile_settings(name: str, values: Mapping[str, Any], *, source: str = "command line",
                     base: Path | None = None, flags: bool = False) -> ProfileSettings:
    """``values`` validated as the settings of profile ``name``.

    ``source`` names where they come from (the config file, or the command line); ``base`` is
    the folder relative paths in them resolve against (the config file's). Raises
    :class:`InputError` with one line per problem: ``profile.<name>.<knob>: ...`` or, with
    ``flags``, the knob's flag (``--k: ...``), and for an unknown profile the known ones.
    """
    profile = _PROFILES.get(name)
    if profile is None:
        raise InputError.one(source, None, f"profile.{name}",
                             f"unknown profile {name!r}; known: {', '.join(_PROFILES) or 'none'}")
    spelled = {k.name: k.flags[0] for k in profile.knobs}
    try:
        return profile.settings.model_validate(dict(values), context={"base": base})
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            knob = str(err["loc"][0]) if err["loc"] else ""
            where = spelled.get(knob, knob) if flags else ".".join(["profile", name, *map(str, err["loc"])])
            if err["type"] == "extra_forbidden":
                known = ", ".join(spelled) or "none"
                problems.append(InputProblem(source, None, where, f"unknown setting of the {name} profile (its "
                                                                  f"settings: {known})"))
            else:
                problems.append(InputProblem(source, None, where, str(err["msg"]).removeprefix("Value error, ")))
        raise InputError(problems) from None


def profile_rubric(name: str) -> tuple[str, int] | None:
    """The rubric version profile ``name`` reports judge criteria of, if any (None for an
    unknown profile: :func:`run_profile` says so)."""
    profile = _PROFILES.get(name)
    return profile.rubric if profile is not None else None


def run_profile(name: str, golden: Path, traces: Sequence[Path], live: Sequence[Path] = (),
                settings: ProfileSettings | None = None, judge: JudgeFindings | None = None, *,
                corpus: Path | None = None) -> ProfileResult:
    """The system's own report from files in its own format (``name`` is also the format),
    with ``settings`` (default: the profile's defaults) when the profile has knobs, ``judge``,
    what the run's judge found, when it reads that (``reads_judge``), and the run's ``corpus``
    file when the profile uses one (``uses_corpus``)."""
    if name not in _PROFILES:
        raise InputError.one(golden, None, "profile",
                             f"unknown profile {name!r}; known: {', '.join(_PROFILES)}")
    profile = _PROFILES[name]
    args = (Path(golden), [Path(t) for t in traces], [Path(p) for p in live])
    extra: dict[str, Any] = {"corpus": Path(corpus) if corpus else None} if profile.uses_corpus else {}
    if profile.reads_judge:
        extra["judge"] = judge
    if not profile.settings.model_fields:
        return profile.from_files(*args, **extra)
    return profile.from_files(*args, settings=settings if settings is not None else profile.settings(), **extra)
