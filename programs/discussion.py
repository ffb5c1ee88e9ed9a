"""Phase 3: round-robin discussion turns and the final ranking turn."""

from __future__ import annotations

import dspy

from teammed.deliberation import Turn
from teammed.programs.behaviour import Behaviour
from teammed.programs.ranking import read_choice, read_ranking
from teammed.programs.team import Agent
from teammed.signatures import DiscussionTurn, FinalRanking

__all__ = ["Discussion", "format_turn"]


def format_turn(t: Turn, role: str | None = None) -> str:
    """One history entry: when, who (and their role when given), what they favour, what they said."""
    who = f"{t.agent} ({role})" if role else t.agent
    return f"[t{t.turn}] {who} favours {t.choice}: {t.message}"


class Discussion(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.discuss = Behaviour(DiscussionTurn)
        self.final = Behaviour(FinalRanking)

    def speak(self, *, agent: Agent, turn: int, final: bool, question: str, options: dict[str, str],
              role: str, team_context: str, history: str, default_choice: str) -> Turn:
        """One turn; ``default_choice`` (the agent's last position) stands in for an unusable choice."""
        common = dict(question=question, options=options, role=role, team_context=team_context, history=history)
        if not final:
            out = self.discuss(**common)
            read = read_choice(out.current_choice, options, default=default_choice)
            return Turn(agent=agent.id, turn=turn, message=out.message or "", choice=read.first,
                        repaired=read.repaired, fell_back=read.fell_back, invalid_letters=read.invalid_letters)
        out = self.final(**common)
        read = read_ranking(out.ranking, options)
        # a ranking naming no option is no vote: the turn shows the agent's last position, never option A
        return Turn(agent=agent.id, turn=turn, message=out.rationale or "",
                    choice=default_choice if read.fell_back else read.first, ranking=read.ranking,
                    confidence=out.confidence or "Low", repaired=read.repaired, fell_back=read.fell_back,
                    invalid_letters=read.invalid_letters)

    def forward(self, **kwargs):  # type: ignore[no-untyped-def]
        return self.speak(**kwargs)
