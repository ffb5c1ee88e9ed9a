"""How many LM calls one deliberation makes, derived from the algorithm as built.

With N agents, T discussion turns and the component flags as 0/1:

    calls = AUTO + SMM + L·TO                    (phase 1: count, trick analysis, specialties)
          + N                                    (phase 2: independent assessments)
          + L·SMM + L·TO + L·TR                  (post-round-2: facts, report, quality grades)
          + E·( N·T + L·T                        (phase 3: turns, mediation every turn)
              + 4·MM·(T-1) + 2N·CL·(T-1) )       (between turns: challenge, closed loop)
          + L·TIE + LC                           (phase 4: the leader breaks a tie, reviews the answer)

AUTO is 1 when ``n_agents='auto'``; E is 0 when early consensus skipped the discussion;
TIE is 1 when the final Borda scores tied; LC is 1 when the leader's correction authority
is on (``leader_correction``, on by default with leadership: +L per question). Without
leadership, facts come from a word-overlap intersection, quality from a rule and ties from
a rule, and team orientation keeps the generic experts (spec phase 1): none of them call the LM.
"""

from __future__ import annotations

from typing import Any

from teammed.config import TeamworkConfig

__all__ = ["expected_calls", "expected_calls_per_question", "formula_terms", "TYPICAL_TEAM"]

TYPICAL_TEAM = 3  # n_agents="auto": recruitment picks 2-4 clinicians; 3 is typical


def expected_calls(config: TeamworkConfig, n_agents: int, *, tie: bool = False, early_consensus: bool = False) -> int:
    """The exact number of LM calls of one question under ``config``."""
    c = config
    n, turns = n_agents, c.n_turns
    lead = int(c.leadership)
    phase1 = int(c.n_agents == "auto") + int(c.shared_mental_model) + lead * int(c.team_orientation)
    phase2 = n + lead * (int(c.shared_mental_model) + int(c.team_orientation) + int(c.trust))
    phase3 = 0
    if not early_consensus:
        between = turns - 1
        phase3 = n * turns + lead * turns
        phase3 += 4 * int(c.mutual_monitoring) * between + 2 * n * int(c.closed_loop) * between
    phase4 = lead * int(tie) + int(c.corrects)
    return phase1 + phase2 + phase3 + phase4


def expected_calls_per_question(config: Any, *, system: str) -> float | None:
    """Calls one question is expected to take (teamwork: the formula, a team of `TYPICAL_TEAM` when
    its size is ``auto``, no tie); None when unknown (a peer system). ``run``'s progress bar starts its
    ETA from it."""
    if system != "teamwork" or config is None:
        return None
    n = config.n_agents if isinstance(config.n_agents, int) else TYPICAL_TEAM
    return float(expected_calls(config, n))


def formula_terms() -> dict[str, str]:
    """Each component's contribution, as the README states it."""
    return {
        "base": "AUTO + N + N·T",
        "shared_mental_model": "+1 (trick analysis) + L (leader's facts)",
        "leadership": "+T (mediation) + TIE (tie resolution) + LC (correction authority, on by default)",
        "team_orientation": "+L (specialties) + L (formal report)",
        "trust": "+L (leader grades round 2)",
        "mutual_monitoring": "+4·(T-1)",
        "closed_loop": "+2N·(T-1)",
        "early_consensus (fired)": "-(N·T + L·T + 4·MM·(T-1) + 2N·CL·(T-1))",
    }
