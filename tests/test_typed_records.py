"""Typed all the way: every system's prediction carries its record model and typed transcript events, from
Python as in the rows; a record that breaks its model fails loudly, never as an untyped dict."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from teammed.answering import answer
from teammed.backends.scripted import ScriptedLM
from teammed.config import preset
from teammed.programs.peers import SYSTEMS, AdaptiveComplexity, build_system
from teammed.programs.teamwork import TeamworkProgram
from teammed.results import Deliberation, TranscriptEvent
from teammed.systems import record_model
from teammed.types import Question

from .helpers import run

QUESTION = "A 58-year-old man has crushing chest pain radiating to his left arm. What is the most likely diagnosis?"
OPTIONS = {"A": "Myocardial infarction", "B": "Reflux", "C": "Pulmonary embolism", "D": "Costochondritis"}


@pytest.mark.parametrize("name", ["teamwork", *SYSTEMS, "mdagents-light"])
def test_every_system_returns_its_record_model_and_typed_events(name):
    if name == "teamwork":
        program, model = TeamworkProgram(preset("all", n_agents=3)), Deliberation
    elif name == "mdagents-light":
        program, model = AdaptiveComplexity(variant="light"), record_model("mdagents")
    else:
        program, model = build_system(name), record_model(name)
    prediction, _, _ = run(program, lambda call: None, question=QUESTION, options=OPTIONS)
    assert type(prediction.record) is model and isinstance(prediction.record, BaseModel)
    assert prediction.transcript and all(isinstance(e, TranscriptEvent) for e in prediction.transcript)
    # the row holds the very record, not a copy rebuilt from a dict
    row = answer(program, Question(id="q", question=QUESTION, options=OPTIONS, answer_idx="A"), ScriptedLM()).row
    assert not row.failed and type(row.record) is model and row.custom_record is None


def test_a_record_that_breaks_its_model_fails_the_question_loudly():
    """A peer system writing a key its model does not declare is a bug: the question fails naming it."""
    from teammed.programs.peers.baselines import ZeroShot

    class Careless(ZeroShot):
        def forward(self, question, options, context=None):  # type: ignore[no-untyped-def]
            prediction = super().forward(question, options, context)
            prediction.record = {"route": None, "undeclared": 1}
            return prediction

    row = answer(Careless(), Question(id="q", question=QUESTION, options=OPTIONS, answer_idx="A"), ScriptedLM()).row
    assert row.failed and row.prediction is None and "undeclared" in row.error and row.error_type == "ValidationError"


def test_a_users_own_program_keeps_its_dict_as_custom_record():
    import dspy

    class Mine(dspy.Module):
        def forward(self, question, options, context=None):  # type: ignore[no-untyped-def]
            return dspy.Prediction(answer="A", rationale="r", confidence="High",
                                   record={"agents": [{"role": "Cardiology"}], "fallbacks": 2, "mine": True})

    row = answer(Mine(), Question(id="q", question=QUESTION, options=OPTIONS, answer_idx="A"), ScriptedLM()).row
    assert not row.failed and row.record is None and row.custom_record["mine"] is True
    assert (row.roles, row.n_agents, row.fallbacks) == (["Cardiology"], 1, 2)


def test_a_dict_record_of_a_known_system_that_breaks_its_model_fails_the_row():
    """A program naming a system with a model (here a plain module calling itself ``consensus``) whose dict
    record that model refuses fails its row as `RecordMismatch`; it is never kept as ``custom_record``."""
    import dspy

    class Pretender(dspy.Module):
        system_name = "consensus"

        def forward(self, question, options, context=None):  # type: ignore[no-untyped-def]
            return dspy.Prediction(answer="A", rationale="r", confidence="High", record={"undeclared": 1})

    row = answer(Pretender(), Question(id="q", question=QUESTION, options=OPTIONS, answer_idx="A"), ScriptedLM()).row
    assert row.failed and row.prediction is None and row.error_type == "RecordMismatch"
    assert "undeclared" in row.error and row.custom_record is None and row.record is None
