"""A frozen model read as the JSON object it dumps to, without building that object.

report.json's judge section holds a verdict per judged pair: on a nightly run, dumped to plain
dicts, a second copy of the typed verdicts the run already holds. The
renderers read it as JSON (``case["claims"][0]["class"]``); a :class:`ModelView` answers those
reads from the typed verdict itself, and is dumped (``json_value``) only as report.json is
written, a slice at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from operator import attrgetter
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from groundjudge.judge.claim_result import ClaimResult

_PLAIN = frozenset({str, int, float, bool, type(None)})
# model class -> JSON name -> how to read it from an instance, in field order
_READERS: dict[type, dict[str, Callable[[Any], Any]]] = {}


def _plain(annotation: Any) -> bool:
    """Whether a field of this type holds a JSON scalar as is (a string, number, bool or None,
    a Literal of those, or a union of such types)."""
    if annotation in _PLAIN:
        return True
    origin = get_origin(annotation)
    if origin is Literal:
        return all(type(arg) in _PLAIN for arg in get_args(annotation))
    if origin in (Union, UnionType):
        return all(_plain(arg) for arg in get_args(annotation))
    return False


def _models_list(annotation: Any) -> bool:
    """Whether a field of this type is a list of models (never None)."""
    args = get_args(annotation)
    return (get_origin(annotation) is list and len(args) == 1 and isinstance(args[0], type)
            and issubclass(args[0], BaseModel))


def _readers(model: type[BaseModel]) -> dict[str, Callable[[Any], Any]]:
    """JSON name -> reader, in field order (as ``model_dump(by_alias=True)`` has them): a field
    that holds a scalar is read as it is, any other through ``_json``."""
    found = _READERS.get(model)
    if found is None:
        found = {}
        for name, info in model.model_fields.items():
            get = attrgetter(name)
            if _plain(info.annotation):
                found[info.alias or name] = get
            elif _models_list(info.annotation):  # claims, nuggets: a view of each
                found[info.alias or name] = _views_of(get)
            else:
                found[info.alias or name] = _json_of(get)
        _READERS[model] = found
    return found


def _json(value: Any) -> Any:
    if type(value) in _PLAIN:
        return value
    if isinstance(value, BaseModel):
        return ModelView(value)
    if isinstance(value, ClaimResult):  # the object report.json writes for it
        return value.as_json()
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

    __slots__ = ("_model", "_read")

    def __init__(self, model: BaseModel) -> None:
        self._model = model
        self._read = _READERS.get(type(model)) or _readers(type(model))

    def __getitem__(self, key: str) -> Any:
        return self._read[key](self._model)

    def get(self, key: str, default: Any = None) -> Any:
        read = self._read.get(key)
        return default if read is None else read(self._model)

    def __iter__(self) -> Iterator[str]:
        return iter(self._read)

    def __len__(self) -> int:
        return len(self._read)

    def __contains__(self, key: object) -> bool:
        return key in self._read

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


def _views_of(get: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda m: [ModelView(x) for x in get(m)]


def _json_of(get: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda m: _json(get(m))
