"""The Shared Mental Model: what the whole team knows, and how it reads as context."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SharedMentalModel", "intersect_facts"]

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the of in on and or to is are was with for by as at be this that it its".split())


def _tokens(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP)


def _similar(a: frozenset[str], b: frozenset[str], threshold: float) -> bool:
    if not a or not b:
        return False
    return len(a & b) / len(a | b) >= threshold


def intersect_facts(fact_lists: Sequence[Sequence[str]], *, min_agents: int = 2, threshold: float = 0.5) -> list[str]:
    """Facts stated (in similar words) by at least ``min_agents`` different agents.

    Similarity is the Jaccard overlap of content words; each kept fact is the first
    wording seen, and near-duplicates are kept once.
    """
    kept: list[tuple[str, frozenset[str]]] = []
    for index, facts in enumerate(fact_lists):
        for fact in facts:
            words = _tokens(fact)
            if any(_similar(words, seen, threshold) for _, seen in kept):
                continue
            supporters = {index} | {
                other for other, others in enumerate(fact_lists)
                if other != index and any(_similar(words, _tokens(f), threshold) for f in others)
            }
            if len(supporters) >= min_agents:
                kept.append((fact.strip(), words))
    return [fact for fact, _ in kept]


@dataclass
class SharedMentalModel:
    """Question analysis (after recruitment), verified facts (after round 2), debated points (after challenges)."""

    question_analysis: str = ""
    verified_facts: list[str] = field(default_factory=list)
    debated_points: list[dict[str, Any]] = field(default_factory=list)

    def context(self) -> str:
        """The model as prompt text; empty when nothing is known yet."""
        parts = []
        if self.question_analysis:
            parts.append(f"Question analysis: {self.question_analysis}")
        if self.verified_facts:
            parts.append("Verified facts:\n" + "\n".join(f"- {f}" for f in self.verified_facts))
        if self.debated_points:
            lines = [f"- turn {p['turn']}, {p['agent']}: {p['concern']} -> {p['outcome']}" for p in self.debated_points]
            parts.append("Debated points:\n" + "\n".join(lines))
        return "\n".join(parts)
