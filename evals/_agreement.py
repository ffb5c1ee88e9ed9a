"""How much the team disagreed before deliberating and how far it converged after."""

from __future__ import annotations

from collections.abc import Iterable

from teammed.evals._facts import RowLike, facts_of
from teammed.evals._rows import mean

__all__ = ["r2_disagreement_rate", "final_convergence"]


def r2_disagreement_rate(rows: Iterable[RowLike]) -> float | None:
    """Share of questions whose independent (R2) first choices are not unanimous.

    Only questions with at least two R2 answers count: one agent cannot disagree.
    """
    return mean(len(set(row.r2)) > 1 for row in facts_of(rows) if len(row.r2) >= 2)


def final_convergence(rows: Iterable[RowLike]) -> dict[str, float] | None:
    """Agreement of the final first choices, over questions with final answers.

    ``agreement_with_team``: mean (over questions) share of agents whose final first choice
    equals the team's prediction; ``unanimous_rate``: share of questions where every
    agent's final first choice is the same.
    """
    voted = [row for row in facts_of(rows) if row.final]
    if not voted:
        return None
    return {
        "agreement_with_team": mean(sum(choice == row.prediction for choice in row.final) / len(row.final)
                                    for row in voted) or 0.0,
        "unanimous_rate": sum(len(set(row.final)) == 1 for row in voted) / len(voted),
        "n": len(voted),
    }
