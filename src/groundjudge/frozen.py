"""The base of every typed record: frozen, and cheap to hold by the million.

Kept apart from the data contracts so that a command which needs a record or two (``groundjudge
metrics`` on TREC files, say) does not build every contract model as it starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from frozendict import frozendict
from pydantic import BaseModel, ConfigDict

# how many distinct values a table of shared values keeps: input made to differ on every record
# cannot grow one without bound (the records past it hold their own)
HELD_MAX = 4096


class Frozen(BaseModel):
    """A frozen record whose set of given field names (``model_fields_set``) is the one
    unchangeable set that every record given the same fields shares (:class:`GivenFields`):
    pydantic makes a set per record otherwise, which costs more than most records' values, and
    a nightly run makes millions of records."""

    model_config = ConfigDict(frozen=True)

    def model_post_init(self, context: Any) -> None:
        object.__setattr__(self, "__pydantic_fields_set__", given_fields(self.__pydantic_fields_set__))

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        # pydantic would add the updated names to the copy's set in place: the update is made
        # here instead, and the copy holds the shared set of its own names
        copied = super().model_copy(deep=deep)
        object.__setattr__(copied, "__pydantic_fields_set__", given_fields({*self.__pydantic_fields_set__,
                                                                           *(update or ())}))
        if update:
            declared = type(self).model_fields
            copied.__dict__.update({k: v for k, v in update.items() if k in declared})
            extra = {k: v for k, v in update.items() if k not in declared}
            if extra:  # only a record that keeps unknown fields takes them
                object.__setattr__(copied, "__pydantic_extra__", read_only({**(copied.model_extra or {}), **extra}))
        return copied


class GivenFields(set[str]):
    """The names of the fields a record was given (``model_fields_set``), shared by the records
    given the same ones, so it refuses every change. A set, not a frozenset: pydantic-core's
    ``exclude_unset`` takes nothing else."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("the names of a record's given fields cannot change")

    add = discard = remove = pop = clear = update = _refuse
    difference_update = intersection_update = symmetric_difference_update = _refuse
    __ior__ = __iand__ = __isub__ = __ixor__ = _refuse


_GIVEN: dict[frozenset[str], GivenFields] = {}  # a handful per kind of record, by the names' frozenset


def given_fields(names: set[str]) -> GivenFields:
    """The one unchangeable set of these field names (see :class:`GivenFields`)."""
    key = frozenset(names)
    shared = _GIVEN.get(key)
    if shared is None:
        shared = GivenFields(names)
        if len(_GIVEN) < HELD_MAX:  # unknown fields named differently on every record: no table grows
            _GIVEN[key] = shared
    return shared


def read_only(value: Any) -> Any:
    """A JSON value with its lists as tuples and its objects as read-only mappings, all the way down."""
    if isinstance(value, dict):
        return frozendict({key: read_only(item) for key, item in value.items()}) if value else EMPTY
    if isinstance(value, list):
        return tuple(map(read_only, value))
    return value


EMPTY: frozendict[str, Any] = frozendict()


