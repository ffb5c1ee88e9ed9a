"""Closed-loop communication: each message is acknowledged by the next speaker and verified by its sender."""

from __future__ import annotations

import dspy

from teammed.deliberation import LoopExchange, Turn
from teammed.programs.behaviour import Behaviour
from teammed.signatures import Acknowledge, VerifyUnderstanding

__all__ = ["ClosedLoop", "receiver_of"]


def receiver_of(sender: str, order: list[str]) -> str:
    """The next speaker in round-robin order (the first, after the last) acknowledges a message.

    The next speaker is the teammate who builds on the message at once, and each agent
    receives exactly one message per turn. The sources have the sender address a teammate;
    a discussion turn here names no addressee, so the receiver is this fixed rule.
    """
    return order[(order.index(sender) + 1) % len(order)]


class ClosedLoop(dspy.Module):
    """Two calls per message: the receiver restates it, the sender confirms or corrects.

    Exchanges of different messages are independent, so the program runs each one as
    soon as its message is spoken, beside the rest of the turn.
    """

    def __init__(self) -> None:
        super().__init__()
        self.acknowledge = Behaviour(Acknowledge)
        self.verify = Behaviour(VerifyUnderstanding)

    def forward(self, *, said: Turn, receiver: str, role_of: dict[str, str], question: str,
                options: dict[str, str]) -> LoopExchange:
        ack = self.acknowledge(question=question, options=options, role=role_of[receiver],
                               sender=f"{said.agent} ({role_of[said.agent]})", message=said.message)
        check = self.verify(question=question, options=options, original_message=said.message,
                            restatement=ack.restatement)
        return LoopExchange(turn=said.turn, sender=said.agent, receiver=receiver, restatement=ack.restatement or "",
                            agrees=bool(ack.agrees), confirmed=bool(check.confirmed),
                            correction="" if check.confirmed else (check.correction or ""))
