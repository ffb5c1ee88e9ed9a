"""Mutual monitoring between turns: select the weakest reasoning, challenge it, judge the reply."""

from __future__ import annotations

import dspy

from teammed.programs.behaviour import Behaviour
from teammed.programs.team import Agent, Challenge, Turn
from teammed.signatures import EvaluateResponse, RaiseConcern, RespondToConcern, WeakestReasoning

__all__ = ["MutualMonitoring"]


class MutualMonitoring(dspy.Module):
    """Four calls: the leader selects, raises, the agent responds, the leader evaluates."""

    def __init__(self) -> None:
        super().__init__()
        self.select = Behaviour(WeakestReasoning)
        self.raise_concern = Behaviour(RaiseConcern)
        self.respond = Behaviour(RespondToConcern)
        self.evaluate = Behaviour(EvaluateResponse)

    def forward(self, *, turn: int, question: str, options: dict[str, str], turns: list[Turn],
                agents: list[Agent], role_of: dict[str, str]) -> Challenge:
        ids = [a.id for a in agents]
        said = {t.agent: t for t in turns}
        messages = "\n".join(f"{t.agent}: {t.message} (favours {t.choice})" for t in turns)
        picked = self.select(question=question, turn_messages=messages, agents=ids)
        target = picked.agent if picked.agent in said else ids[0]
        own = said[target]
        raised = self.raise_concern(question=question, options=options, agent_message=own.message)
        reply = self.respond(question=question, options=options, role=role_of[target], own_message=own.message,
                             concern=raised.concern)
        judged = self.evaluate(concern=raised.concern, response=reply.response)
        verdict = judged.verdict if judged.verdict in ("strong", "weak", "disputed") else "disputed"
        after = reply.revised_choice if reply.revised_choice in options else own.choice
        return Challenge(turn, target, picked.reason or "", raised.concern or "", raised.severity or "medium",
                         reply.response or "", verdict, judged.reason or "", own.choice, after)
