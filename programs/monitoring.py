"""Mutual monitoring between turns: select the weakest reasoning, challenge it, judge the reply."""

from __future__ import annotations

import dspy

from teammed.deliberation import Challenge, Turn
from teammed.programs.behaviour import Behaviour
from teammed.programs.ranking import read_choice
from teammed.programs.team import Agent
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
        case = dict(question=question, options=options)  # every step reads the case first
        messages = "\n".join(f"{t.agent} favours {t.choice} ({options[t.choice]}): {t.message}" for t in turns)
        picked = self.select(**case, turn_messages=messages, agents=ids)
        target_fell_back = picked.agent not in said
        target = ids[0] if target_fell_back else picked.agent
        own = said[target]
        raised = self.raise_concern(**case, agent_message=f"favours {own.choice} ({options[own.choice]}): "
                                                          f"{own.message}")
        reply = self.respond(**case, role=role_of[target], own_message=own.message, concern=raised.concern)
        judged = self.evaluate(**case, concern=raised.concern, response=reply.response)
        verdict = judged.verdict if judged.verdict in ("strong", "weak", "disputed") else "disputed"
        after = read_choice(reply.revised_choice, options, default=own.choice)
        return Challenge(turn=turn, agent=target, reason=picked.reason or "", concern=raised.concern or "",
                         severity=raised.severity or "medium", response=reply.response or "", verdict=verdict,
                         verdict_reason=judged.reason or "", choice_before=own.choice, choice_after=after.first,
                         target_fell_back=target_fell_back, choice_fell_back=after.fell_back)
