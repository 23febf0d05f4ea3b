"""A frozen model read as the JSON object it dumps to, without building that object.

report.json's judge section holds a verdict per judged pair: at 100,000 cases x 2 configs,
dumped to plain dicts, about 0.7 GB on top of the typed verdicts the run already holds. The
renderers read it as JSON (``case["claims"][0]["class"]``); a :class:`ModelView` answers those
reads from the typed verdict itself, and is dumped (``json_value``) only as report.json is
written, a slice at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel


_ALIASES: dict[type, dict[str, str]] = {}
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _aliases(model: type[BaseModel]) -> dict[str, str]:
    """JSON name -> attribute name, in field order (as ``model_dump(by_alias=True)`` has them)."""
    found = _ALIASES.get(model)
    if found is None:
        found = _ALIASES[model] = {info.alias or name: name for name, info in model.model_fields.items()}
    return found


def _json(value: Any) -> Any:
    if type(value) in _PLAIN:
        return value
    if isinstance(value, BaseModel):
        return ModelView(value)
    if isinstance(value, (list, tuple)):
        if not value or type(value[0]) in _PLAIN:  # a typed list: strings, or numbers, all of one kind
            return list(value)
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    return value


class ModelView(Mapping[str, Any]):
    """``model`` as the mapping ``model.model_dump(mode="json", by_alias=True)`` would be: the
    same keys in the same order, nested models as views, lists as lists. For models whose
    fields are JSON types already (strings, numbers, booleans, None, lists, string-keyed dicts
    and models of those), as the judge's records are."""

    __slots__ = ("_model", "_names")

    def __init__(self, model: BaseModel) -> None:
        self._model = model
        self._names = _aliases(type(model))

    def __getitem__(self, key: str) -> Any:
        return _json(getattr(self._model, self._names[key]))

    def get(self, key: str, default: Any = None) -> Any:
        name = self._names.get(key)
        return default if name is None else _json(getattr(self._model, name))

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def json_value(self) -> dict[str, Any]:
        """The dumped object itself (report.json is written from this)."""
        return self._model.model_dump(mode="json", by_alias=True, exclude_none=False)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self.json_value() == (other.json_value() if isinstance(other, ModelView) else dict(other.items()))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ModelView({self._model!r})"
