"""The knobs of the ``wfgy-chunking`` profile: what WFGY's chunking page lets its users set (the k
values, every threshold, the offset window, the ΔS zones), as one settings model.

Each field is a knob: a key of ``[profile.wfgy-chunking]`` in the config file and a flag of
``metrics`` and ``run`` (``--k`` for the cut-offs, ``--gates`` for the thresholds, else
``--field-name``). :meth:`ChunkingSettings.report_options` turns them into the keywords of
:func:`groundjudge.profiles.wfgy_chunking.report`.

Gate thresholds are written as the report names its gates, or in ASCII for a command line
(``delta_s_med``, ``delta_s_p90``, ``lambda_convergent``, ``cited_delta_s``,
``recall_drop_points``): ``--gates coverage=0.75 cited_delta_s=0.50``, or a table
``[profile.wfgy-chunking.gates]``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from groundjudge.profiles.registry import Flag, ProfileSettings
from groundjudge.profiles.wfgy_chunking.definitions import (
    BAD_DELTA_S,
    DEFAULT_GATES,
    KS,
    LIVE_RECALL_K,
    OFFSET_WINDOW,
    PARAPHRASES,
)

__all__ = ["GATE_ALIASES", "ChunkingSettings", "gate_thresholds"]

# ASCII spellings of the gates, for command lines and TOML keys without quotes.
GATE_ALIASES = {
    "delta_s_med": "ΔS_med",
    "delta_s_p90": "ΔS_p90",
    "lambda_convergent": "λ_convergent",
    "cited_delta_s": "cited_ΔS",
}
_RECALL_GATE = re.compile(r"recall@(\d+)_drop_points")


def gate_thresholds(spec: str | Mapping[str, Any]) -> dict[str, float]:
    """Gate thresholds by gate name (the live recall gate as ``recall_drop_points``, or as
    ``recall@K_drop_points`` when written with its k), from ``name=value`` words (separated by
    spaces or commas) or a mapping. Raises ValueError for an unknown gate, a value that is not a
    finite number, or a word without ``=``."""
    if isinstance(spec, str):
        pairs: list[tuple[str, Any]] = []
        for word in re.split(r"[,\s]+", spec.strip()):
            if not word:
                continue
            name, sep, value = word.partition("=")
            if not sep:
                raise ValueError(f"{word!r} is not name=value (write e.g. coverage=0.75 cited_delta_s=0.50)")
            pairs.append((name, value))
    else:
        pairs = list(spec.items())
    known = [*DEFAULT_GATES, *GATE_ALIASES, "recall_drop_points"]
    out: dict[str, float] = {}
    for name, value in pairs:
        canonical = "recall_drop_points" if name == "recall_drop_points" else GATE_ALIASES.get(name, name)
        if canonical != "recall_drop_points" and not _RECALL_GATE.fullmatch(canonical) \
                and canonical not in DEFAULT_GATES:
            raise ValueError(f"unknown gate {name!r}; known: {', '.join(known)}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"gate {name}: {value!r} is not a number") from None
        if isinstance(value, bool) or not math.isfinite(number):
            raise ValueError(f"gate {name}: {value!r} is not a finite number")
        out[canonical] = number
    return out


class ChunkingSettings(ProfileSettings):
    """WFGY chunking's knobs and their defaults, the values its page states."""

    # --k is also the command's own option (the native cut-offs): one flag sets both
    # a list, so that the flag may be repeated (--k 5 --k 10); report_options hands on a tuple
    ks: Annotated[list[int], Flag("--k"), Field(min_length=1, description=(
        "The k of P@k and R@k (repeatable; default 1 3 5 10)."))] = list(KS)
    top_k: Annotated[int, Field(ge=1, description=(
        "The top k the ΔS figures, the per-type breakdown and flagged questions read (default 5)."))] = 5
    recall_k: Annotated[int, Field(ge=1, description=(
        "The k of the shadow-vs-live recall gate (default 5: 'Recall@5 does not drop more than 2 points')."))] = \
        LIVE_RECALL_K
    window: Annotated[int, Field(ge=0, description=(
        "Bytes a citation's offsets may lie from the gold span and still match (default 30)."))] = OFFSET_WINDOW
    citation_policy: Annotated[Literal["any", "first"], Field(description=(
        "Which citations count for coverage and citation accuracy: any (the page's definition, "
        "default) or first (its evaluator)."))] = "any"
    paraphrases: Annotated[int, Field(ge=2, description=(
        "Distinct queries of a question that make a λ triplet (default 3)."))] = PARAPHRASES
    seeds: Annotated[int, Field(ge=1, description=(
        "Distinct seed values each of those queries must have been run with (default 1: the seed is not read; "
        "the acceptance target asks for two)."))] = 1
    flag_above: Annotated[float, Field(description=(
        "A cited snippet with ΔS above this flags its question (default 0.60)."))] = BAD_DELTA_S
    # the page's zones (definitions.DELTA_S_ZONES), bounds inclusive
    stable_max: Annotated[float, Field(description="Upper bound of the stable ΔS zone (default 0.45).")] = 0.45
    transitional_min: Annotated[float, Field(description="Lower bound of the transitional ΔS zone (default 0.40).")] \
        = 0.40
    transitional_max: Annotated[float, Field(description="Upper bound of the transitional ΔS zone (default 0.60).")] \
        = 0.60
    risk_min: Annotated[float, Field(description="Lower bound of the risk ΔS zone (default 0.60).")] = 0.60
    gates: Annotated[dict[str, float], Flag("--gates", words=True), Field(description=(
        "Gate thresholds as name=value words or a table (coverage, citation_accuracy, delta_s_med, delta_s_p90, "
        "recall_drop_points, lambda_convergent, cited_delta_s); unnamed gates keep WFGY's values."))] = \
        Field(default_factory=dict)

    @field_validator("ks")
    @classmethod
    def _cut_offs(cls, value: list[int]) -> list[int]:
        bad = [k for k in value if k < 1]
        if bad:
            raise ValueError(f"every k is a rank cut-off and must be at least 1; got {bad[0]}")
        return list(dict.fromkeys(value))

    @field_validator("gates", mode="before")
    @classmethod
    def _gates(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, (str, Mapping)):
            return gate_thresholds(value)
        if isinstance(value, (list, tuple)):  # a flag given more than once
            return gate_thresholds(" ".join(map(str, value)))
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ChunkingSettings:
        for name in self.gates:
            match = _RECALL_GATE.fullmatch(name)
            if match and int(match.group(1)) != self.recall_k:
                raise ValueError(f"gate {name}: the live recall gate is at recall_k = {self.recall_k}; set recall_k = "
                                 f"{match.group(1)}, or name the gate recall_drop_points")
        if self.transitional_min > self.transitional_max:
            raise ValueError(f"transitional_min {self.transitional_min} is above transitional_max "
                             f"{self.transitional_max}")
        return self

    def zones(self) -> dict[str, tuple[float | None, float | None]]:
        return {"stable": (None, self.stable_max), "transitional": (self.transitional_min, self.transitional_max),
                "risk": (self.risk_min, None)}

    def report_options(self) -> dict[str, Any]:
        """The keywords of :func:`~groundjudge.profiles.wfgy_chunking.report` these settings give."""
        recall_gate = f"recall@{self.recall_k}_drop_points"
        gates = {recall_gate if name in ("recall_drop_points", recall_gate) else name: value
                 for name, value in self.gates.items()}
        return {"k": self.top_k, "ks": tuple(self.ks), "window": self.window, "citation_policy": self.citation_policy,
                "gates": gates, "zones": self.zones(), "flag_above": self.flag_above,
                "paraphrases": self.paraphrases, "seeds": self.seeds, "recall_k": self.recall_k}
