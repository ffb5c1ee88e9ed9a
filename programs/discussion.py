"""Phase 3: round-robin discussion turns and the final ranking turn."""

from __future__ import annotations

import dspy

from teammed.programs.behaviour import Behaviour
from teammed.programs.ranking import repair_ranking
from teammed.programs.team import Agent, Turn
from teammed.signatures import DiscussionTurn, FinalRanking

__all__ = ["Discussion", "format_history"]


def format_history(turns: list[Turn], agents: list[Agent], notes: list[str]) -> str:
    """The discussion so far, in speaking order, with the leader's and verification notes."""
    roles = {a.id: a.role for a in agents}
    lines = [f"[turn {t.turn}] {t.agent} ({roles.get(t.agent, '?')}): {t.message} (favours {t.choice})" for t in turns]
    return "\n".join(lines + notes)


class Discussion(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.discuss = Behaviour(DiscussionTurn)
        self.final = Behaviour(FinalRanking)

    def speak(self, *, agent: Agent, turn: int, final: bool, question: str, options: dict[str, str],
              role: str, team_context: str, history: str) -> Turn:
        common = dict(question=question, options=options, role=role, team_context=team_context, history=history)
        if not final:
            out = self.discuss(**common)
            choice = out.current_choice if out.current_choice in options else next(iter(options))
            return Turn(agent.id, turn, out.message or "", choice, repaired=out.current_choice not in options)
        out = self.final(**common)
        ranking, repaired = repair_ranking(out.ranking, list(options))
        return Turn(agent.id, turn, out.rationale or "", ranking[0], ranking, out.confidence or "Low", repaired)

    def forward(self, **kwargs):  # type: ignore[no-untyped-def]
        return self.speak(**kwargs)
