"""Settings: defaults < TOML config file < environment (``GROUNDJUDGE_*``) < command-line flags.

Relative paths in a config file resolve against the file's folder.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from groundjudge.config_file import DEFAULT_KS, ENVIRONMENT, config_file, environment_settings, read_config_file
from groundjudge.errors import InputError, InputProblem


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InputsConfig(_Section):
    golden: Path | None = None
    traces: list[Path] = Field(default_factory=list)
    live: list[Path] = Field(default_factory=list)  # wfgy-chunking: the live index's traces
    format: str = "auto"  # one of format_choices(): the registry decides, so new systems count
    corpus: Path | None = None
    labels: list[Path] = Field(default_factory=list)
    qrels: Path | None = None
    run: Path | None = None
    # trace exports (the otel format): the resource attribute naming the config, and the span
    # attribute naming the golden case when a golden set is given
    config_attribute: str = "service.version"
    case_attribute: str = "groundjudge.case_id"

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value in ("auto", "native"):
            return value
        from groundjudge.load.adapters import format_choices  # the adapters load only when named

        if value not in format_choices():
            raise ValueError(f"unknown format {value!r}; known: {', '.join(format_choices())}")
        return value


class MetricsConfig(_Section):
    ks: list[int] = Field(default_factory=lambda: list(DEFAULT_KS))

    @field_validator("ks")
    @classmethod
    def _ranks(cls, value: list[int]) -> list[int]:
        bad = [k for k in value if k < 1]
        if bad:
            # k is a rank cut-off (the first k retrieved chunks): 0 or less selects nothing
            raise ValueError(f"every k is a rank cut-off and must be at least 1; got {bad[0]} in {value}")
        return value
    offset_window_bytes: int = Field(default=30, ge=0)
    stability_k: int = Field(default=5, ge=1)
    refusal_token: str | None = None
    refusal_phrases: dict[str, dict[str, list[str]]] | None = None


class OutputConfig(_Section):
    out: Path | None = None
    history: Path | None = None  # run history (SQLite); unset: history.sqlite beside the run folder
    keep_history: bool = True
    trend_runs: int = Field(default=20, ge=2)  # runs shown in the report's trend chart


def _http_url(value: str | None) -> str | None:
    """A judge base URL: http or https, with a host and a numeric port if any. The value is not
    repeated in the message: it may hold credentials."""
    if value is None:
        return value
    try:
        parts = urlsplit(value)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 -- a port that is not a number (or out of range) raises
    except ValueError:
        ok = False
    if not ok:
        raise ValueError("not an http:// or https:// URL with a host (e.g. http://host:8000/v1)")
    return value


class EscalateConfig(_Section):
    """The judge that abstained verdicts go to next (any OpenAI-compatible endpoint)."""

    base_url: str
    model: str
    rubric: str | None = None  # default: the first judge's rubric

    _url = field_validator("base_url")(_http_url)


class JudgeConfig(_Section):
    base_url: str | None = None  # unset: the embedded local judge
    model: str | None = None
    model_snapshots: list[str] = Field(default_factory=list)
    rubric: str = "claim_check"  # the family with the higher measured agreement (docs/rubrics.md)
    rubric_version: int | None = None
    rubrics_dir: Path | None = None
    concurrency: int = Field(default=4, ge=1, le=256)
    requests_per_minute: float | None = Field(default=None, gt=0)
    timeout_s: float = Field(default=120.0, gt=0)
    max_attempts: int = Field(default=4, ge=1, le=20)
    temperature: float = 0.0
    seed: int | None = 1234
    max_output_tokens: int = Field(default=1024, ge=16)
    output_mode: Literal["json_schema", "json_object_schema", "json"] = "json_schema"
    smoke: bool = False
    smoke_per_tag: int = Field(default=2, ge=1)
    max_cases: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=0)
    max_cost_usd: float | None = Field(default=None, ge=0)
    price_prompt_per_mtok: float = Field(default=0.0, ge=0)
    price_completion_per_mtok: float = Field(default=0.0, ge=0)
    baseline_config: str | None = None
    retry_errors: bool = True  # ask again, on a re-run, a case whose cached replies were invalid
    escalate: EscalateConfig | None = None
    batch_discount: float = Field(default=0.5, ge=0, le=1)  # batch price = this x the prices above

    _url = field_validator("base_url")(_http_url)


class LocalJudgeConfig(_Section):
    """The embedded judge (used when no judge base URL is set)."""

    models_dir: Path = Path("cache/models")
    threads: int | None = Field(default=None, ge=1)  # default: every core
    context_size: int = Field(default=4096, ge=512)
    port: int = Field(default=0, ge=0, le=65535)  # 0: a free port
    startup_timeout_s: float = Field(default=180.0, gt=0)


OnMissing = Literal["fail", "skip"]


class Threshold(_Section):
    """One gate's bound(s). ``on_missing``: what a gate whose metric has no data does: ``fail``
    (the default: a gate that could not be evaluated never passes) or ``skip`` (reported, not
    blocking)."""

    min: float | None = None
    max: float | None = None
    on_missing: OnMissing = "fail"

    @model_validator(mode="after")
    def _a_finite_bound(self) -> Threshold:
        if self.min is None and self.max is None:
            raise ValueError("a gate needs a bound: min, max or both (for example { min = 0.9 })")
        for name, bound in (("min", self.min), ("max", self.max)):
            if bound is not None and not math.isfinite(bound):
                raise ValueError(f"{name} = {bound} is not a finite number: no value can be compared with it")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}: no value can pass")
        return self


class RegressionGate(_Section):
    """A regression gate: ``metric`` of ``candidate`` against ``baseline`` (two configs of the
    run), over the cases both scored. It fails when the mean worsens by more than ``max_drop``
    (in the metric's own units, in its bad direction) and the paired sign-flip test says the
    change is real."""

    metric: str
    baseline: str
    candidate: str
    max_drop: float
    on_missing: OnMissing = "fail"

    @field_validator("max_drop")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"max_drop = {value} is not a finite number >= 0 (the largest drop allowed, "
                             f"in the metric's own units)")
        return value

    @model_validator(mode="after")
    def _two_configs(self) -> RegressionGate:
        if self.baseline == self.candidate:
            raise ValueError(f"baseline and candidate are the same config ({self.baseline!r})")
        return self


class GatesConfig(_Section):
    """Release gates (SPEC 7). Deterministic gates always apply; judge gates only when trusted."""

    configs: list[str] = Field(default_factory=list)  # which configs must pass; default: the last
    metrics: dict[str, Threshold] = Field(default_factory=dict)
    tags: dict[str, dict[str, Threshold]] = Field(default_factory=dict)
    regression: list[RegressionGate] = Field(default_factory=list)
    # the judge_error-rate gate's bound (unset: 0.1); or gate judge_error_rate in [gates.metrics]
    max_judge_error_rate: float | None = Field(default=None, ge=0, le=1)
    acl_leaks_block: bool = True


class TrustConfig(_Section):
    min_items: int = Field(default=50, ge=1)
    min_kappa: float = 0.6
    min_kappa_lower: float = 0.4
    records_dir: Path = Path("calibration/records")
    # selective trust: verdicts at or above the cut-off agree with people at least
    # target_agreement (1 - alpha) of the time, with probability at least 1 - risk (delta)
    target_agreement: float = Field(default=0.9, gt=0, lt=1)
    risk: float = Field(default=0.1, gt=0, lt=1)
    # a judge gate counts only when trusted, escalated and human-labelled verdicts together
    # cover at least this share of the config's judged items
    min_coverage: float = Field(default=0.8, ge=0, le=1)


class CacheConfig(_Section):
    dir: Path = Path("cache")
    enabled: bool = True


class Config(_Section):
    inputs: InputsConfig = Field(default_factory=InputsConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    local: LocalJudgeConfig = Field(default_factory=LocalJudgeConfig)
    gates: GatesConfig = Field(default_factory=GatesConfig)
    trust: TrustConfig = Field(default_factory=TrustConfig)
    # [profile.<name>]: a replaced system's knobs, checked against that profile's own settings
    # model by ``groundjudge.api.resolve_config`` (profiles are a later stage than settings)
    profile: dict[str, dict[str, Any]] = Field(default_factory=dict)
    source: Path | None = None


def _holds_path(annotation: Any) -> bool:
    return annotation is Path or any(_holds_path(arg) for arg in get_args(annotation))


PATH_FIELDS = {("inputs", name) for name, field in InputsConfig.model_fields.items() if _holds_path(field.annotation)} | {
    ("output", "out"), ("output", "history"), ("judge", "rubrics_dir"), ("cache", "dir"), ("local", "models_dir"),
    ("trust", "records_dir")}


def load_config(path: str | Path | None) -> Config:
    """Read a TOML config; with ``None``, use ``groundjudge.toml`` in the working directory if any."""
    path = config_file(path)
    if path is None:
        return Config()
    raw = read_config_file(path, PATH_FIELDS)
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        problems = [
            InputProblem(str(path), None, dotted_key(err["loc"]),
                         "unknown setting" if err["type"] == "extra_forbidden" else _message(err["msg"]))
            for err in exc.errors(include_url=False)
        ]
        raise InputError(problems) from None
    return config.model_copy(update={"source": path})


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def dotted_key(loc: Any) -> str:
    """A setting's place as a TOML dotted key: ``gates.metrics."recal@10".min``; list items by
    index (``gates.regression[0].metric``)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + (str(part) if _BARE_KEY.match(str(part)) else f'"{part}"')
    return out


def _message(text: str) -> str:
    # pydantic prefixes the messages of our own validators; the user needs only ours
    return text.removeprefix("Value error, ")


def apply_environment(config: Config, environ: dict[str, str] | None = None) -> Config:
    """Environment variables override the config file (and are overridden by flags)."""
    environ = dict(os.environ) if environ is None else environ
    data = config.model_dump()
    for (section, name), value in environment_settings(environ).items():
        data[section][name] = value
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        var = next(v for v, loc in ENVIRONMENT.items() if loc == tuple(err["loc"][:2]))
        raise InputError.one("environment", None, var, err["msg"]) from None


def api_key(environ: dict[str, str] | None = None) -> str | None:
    """The judge's API key: from the environment only, never from a file or a flag."""
    environ = dict(os.environ) if environ is None else environ
    return environ.get("GROUNDJUDGE_API_KEY") or environ.get("OPENAI_API_KEY")
