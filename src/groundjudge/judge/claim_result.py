"""One claim of an answer and what the judge found about it: a frozen msgspec struct.

A nightly run holds a verdict per judged case and a few claims per verdict, hundreds of
thousands in all: as a struct a claim takes a fraction of a pydantic model's memory, and the
garbage collector does not track it (it holds strings, numbers and tuples of strings: no
cycles). Verdicts are pydantic models that hold their claims: pydantic validates a claim from
JSON or a dict as it would a model (errors name ``claims[0].verdict``), takes a claim given as
it is, and writes one as the object report.json has always had (the class under ``"class"``).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Self

import msgspec
from pydantic import ConfigDict, GetCoreSchemaHandler, with_config
from pydantic_core import core_schema
from typing_extensions import TypedDict

# "unchecked": a claim the judge was not asked about because the answer's verdict was already
# decided without it (claim_check grounding ``when_answer_open``); it has no probability.
ClaimVerdict = Literal["supported", "partially_supported", "unsupported", "contradicted", "unchecked"]
ClaimClass = Literal["cited_support", "misattributed", "uncited", "partial", "unsupported", "contradicted",
                     "unchecked"]

_SEQUENCES = ("cited", "support", "unfound_terms")


class ClaimResult(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One claim of an answer and what the judge found about it."""

    claim: str
    cited: tuple[str, ...] = ()
    verdict: ClaimVerdict
    support: tuple[str, ...] = ()  # chunk ids that state it
    klass: ClaimClass = msgspec.field(name="class")
    confidence: float | None = None  # P(supported) where the judge gives a probability
    cited_confidence: float | None = None  # P(supported by what it cites)
    start: int | None = None  # span in the answer, where the claim was split without a model
    end: int | None = None
    # With a rubric's grounding: the claim's terms the context never mentions, and the model's
    # own P(yes) before they lowered it (None where the model was not asked).
    unfound_terms: tuple[str, ...] | None = None
    model_confidence: float | None = None

    def __post_init__(self) -> None:
        # Lists given for the sequences are held as tuples, so that no claim can be changed
        # (one test for the usual claim, whose sequences are tuples already).
        if not (type(self.cited) is tuple and type(self.support) is tuple
                and (self.unfound_terms is None or type(self.unfound_terms) is tuple)):
            for name in _SEQUENCES:
                value = getattr(self, name)
                if type(value) is list:
                    msgspec.structs.force_setattr(self, name, tuple(value))

    @classmethod
    def built(cls, **values: Any) -> Self:
        """A claim made by the judge stage's own code (``klass=`` names its class)."""
        return cls(**values)

    def replaced(self, **values: Any) -> Self:
        """A copy with these fields changed."""
        return msgspec.structs.replace(self, **values)

    def as_json(self) -> dict[str, Any]:
        """The claim as report.json writes it: the class under ``"class"``, sequences as lists."""
        out: dict[str, Any] = msgspec.to_builtins(self)  # in field order, the class under "class"
        for name in _SEQUENCES:
            value = out[name]
            if value is not None:
                out[name] = list(value)
        return out

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        fields = msgspec.structs.fields(cls)
        shape = with_config(ConfigDict(extra="forbid"))(TypedDict(cls.__name__, {  # type: ignore[operator]
            f.encode_name: _validated_type(f) if f.required else NotRequired[_validated_type(f)] for f in fields}))
        python_names = {f.encode_name: f.name for f in fields}

        def build(values: dict[str, Any]) -> ClaimResult:
            return cls(**{python_names[k]: v for k, v in values.items()})

        def field_names_too(value: Any) -> Any:
            # a claim dumped by its field names (``klass``) reads as well as by its JSON names
            if isinstance(value, dict) and "klass" in value and "class" not in value:
                value = {("class" if k == "klass" else k): v for k, v in value.items()}
            return value

        def given_or_built(value: Any, validate: core_schema.ValidatorFunctionWrapHandler) -> Any:
            return value if type(value) is cls else validate(field_names_too(value))

        from_fields = core_schema.no_info_after_validator_function(build, handler.generate_schema(shape))
        return core_schema.json_or_python_schema(
            json_schema=from_fields,
            python_schema=core_schema.no_info_wrap_validator_function(given_or_built, from_fields),
            serialization=core_schema.plain_serializer_function_ser_schema(lambda claim: claim.as_json()))


def _validated_type(field: msgspec.structs.FieldInfo) -> Any:
    """The type a field's value is validated as: a sequence of strings from a JSON array."""
    return {"cited": list[str], "support": list[str], "unfound_terms": list[str] | None}.get(field.name, field.type)
