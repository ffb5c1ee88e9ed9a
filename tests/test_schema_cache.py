"""The per-call schema work is done once (issue 19: framework CPU per call): an output schema is
built once per signature and the inputs it reads, a non-text value's validator once per annotation.
Each test compares with building afresh, so a cache that kept a stale or shared schema fails."""

from __future__ import annotations

import copy
from typing import Any, Literal

import pytest
from dspy.adapters.utils import parse_value

from teammed import schema
from teammed.signatures import (
    AssessmentQuality,
    ConsensusFacts,
    FinalRanking,
    InitialAssessment,
    Mediation,
    RaiseConcern,
)

SIGNATURES = [InitialAssessment, FinalRanking, Mediation, ConsensusFacts, RaiseConcern, AssessmentQuality]
OPTIONS = [{"A": "a", "B": "b"}, {"A": "a", "B": "b", "C": "c", "D": "d", "E": "e"}, {"B": "x", "A": "y"}]


@pytest.mark.parametrize("signature", SIGNATURES, ids=lambda s: s.__name__)
def test_a_cached_schema_is_the_schema_built_afresh_for_those_inputs(signature: Any) -> None:
    for options in OPTIONS + OPTIONS:  # the second pass is served from the cache
        inputs = {"options": options, "agents": ["agent_1", "agent_2", "agent_3"][: len(options)]}
        built = schema._build_output_schema(signature, inputs, title="t")
        assert schema.output_schema(signature, inputs, title="t") == built


def test_a_returned_schema_is_the_callers_own_copy() -> None:
    inputs = {"options": OPTIONS[1]}
    first = schema.output_schema(InitialAssessment, inputs)
    pristine = copy.deepcopy(first)
    first["properties"].clear()
    first["title"] = "changed"
    assert schema.output_schema(InitialAssessment, inputs) == pristine


@pytest.mark.parametrize(("value", "annotation"), [
    (["A", "B"], list[str]), ([1, 2], list[int]), ({"a": 1.5}, dict[str, float]), (3, int), (0.5, float),
    (True, bool), (None, str | None), ("B", Literal["A", "B"]), (2, Literal[1, 2]), ("x", str), (7, str),
    ('["A"]', list[str]), ("0.25", float),
])
def test_parsing_a_value_matches_dspys_parse_value(value: Any, annotation: Any) -> None:
    assert schema._parse_value(value, annotation) == parse_value(value, annotation)


def test_an_invalid_value_still_raises_as_dspy_does() -> None:
    for value, annotation in ((["A", {}], list[str]), ({"a": "b"}, list[int])):
        with pytest.raises(Exception):  # noqa: B017  (DSPy raises pydantic's ValidationError)
            parse_value(value, annotation)
        with pytest.raises(Exception):  # noqa: B017
            schema._parse_value(value, annotation)
