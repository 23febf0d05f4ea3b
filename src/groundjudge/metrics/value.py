"""A metric's value over many cases: the mean with its denominator."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ConfigDict, SerializerFunctionWrapHandler, model_serializer

from groundjudge.frozen import Frozen


class MetricValue(Frozen):
    """A mean with its denominator: ``value`` is None when ``n`` is 0. ``reason`` says why cases
    were left out because an input they read was not recorded (written only when there is one)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float | None
    n: int
    reason: str | None = None

    @model_serializer(mode="wrap")
    def _reason_only_when_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("reason") is None:
            data.pop("reason", None)
        return data

    @staticmethod
    def mean(values: Iterable[float | None]) -> MetricValue:
        kept = [v for v in values if v is not None]
        return MetricValue(value=sum(kept) / len(kept) if kept else None, n=len(kept))
