"""How many LM calls one deliberation makes, derived from the algorithm as built.

With N agents and T discussion turns, one question's calls are the base deliberation's plus
each component's term (its `Component.calls` in `teammed.components`; L is 1 when leadership is on):

    calls = AUTO + N + E·N·T                     (recruiter's count, assessments, discussion turns)
          + SMM·(1 + L)                          (trick analysis, leader's facts)
          + L·(E·T + TIE + LC)                   (mediation every turn, a tie, the leader's review)
          + TO·2L + TR·L                         (specialties and formal report, quality grades)
          + E·(4·MM·(T-1) + 2N·CL·(T-1))         (between turns: challenge, closed loop)

AUTO is 1 when ``n_agents='auto'``; E is 0 when early consensus skipped the discussion;
TIE is 1 when the final Borda scores tied; LC is 1 when the leader's correction authority
is on (``leader_correction``, on by default with leadership: +L per question). Without
leadership, facts come from a word-overlap intersection, quality from a rule and ties from
a rule, and team orientation keeps the generic experts (spec phase 1): none of them call the LM.
"""

from __future__ import annotations

from typing import Any

from teammed.components import TABLE, CallShape
from teammed.config import TeamworkConfig

__all__ = ["expected_calls", "expected_calls_per_question", "TYPICAL_TEAM"]

TYPICAL_TEAM = 3  # n_agents="auto": recruitment picks 2-4 clinicians; 3 is typical


def expected_calls(config: TeamworkConfig, n_agents: int, *, tie: bool = False, early_consensus: bool = False) -> int:
    """The exact number of LM calls of one question under ``config``."""
    shape = CallShape(n=n_agents, turns=config.n_turns, lead=config.leadership, discussed=not early_consensus,
                      tie=tie, corrects=config.corrects)
    base = int(config.n_agents == "auto") + n_agents + (n_agents * config.n_turns if shape.discussed else 0)
    return base + sum(c.calls(shape) for c in TABLE if getattr(config, c.name))


def expected_calls_per_question(config: Any, *, system: str) -> float | None:
    """Calls one question is expected to take (teamwork: the formula, a team of `TYPICAL_TEAM` when
    its size is ``auto``, no tie); None when unknown (a peer system). ``run``'s progress bar starts its
    ETA from it."""
    if system != "teamwork" or config is None:
        return None
    n = config.n_agents if isinstance(config.n_agents, int) else TYPICAL_TEAM
    return float(expected_calls(config, n))
