"""Closed-loop communication: each message is acknowledged by the next speaker and verified by its sender."""

from __future__ import annotations

import dspy

from teammed.programs.behaviour import Behaviour
from teammed.programs.team import Agent, Turn
from teammed.signatures import Acknowledge, VerifyUnderstanding

__all__ = ["ClosedLoop"]


class ClosedLoop(dspy.Module):
    """Two calls per message: the receiver restates it, the sender confirms or corrects."""

    def __init__(self) -> None:
        super().__init__()
        self.acknowledge = Behaviour(Acknowledge)
        self.verify = Behaviour(VerifyUnderstanding)

    def forward(self, *, turns: list[Turn], agents: list[Agent], role_of: dict[str, str]) -> list[dict]:
        order = [a.id for a in agents]
        loops = []
        for t in turns:
            receiver = order[(order.index(t.agent) + 1) % len(order)]
            ack = self.acknowledge(role=role_of[receiver], sender=f"{t.agent} ({role_of[t.agent]})", message=t.message)
            check = self.verify(original_message=t.message, restatement=ack.restatement)
            loops.append({
                "turn": t.turn, "sender": t.agent, "receiver": receiver, "restatement": ack.restatement or "",
                "agrees": bool(ack.agrees), "confirmed": bool(check.confirmed),
                "correction": "" if check.confirmed else (check.correction or ""),
            })
        return loops
