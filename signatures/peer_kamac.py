"""Knowledge-driven team growth: start small, discuss, and recruit when expertise is missing."""

from __future__ import annotations

from typing import Literal

import dspy

from teammed.schema import Choice
from teammed.signatures.assessment import Confidence
from teammed.signatures.case import CaseSignature
from teammed.signatures.recruitment import Specialist


class ExpertRecruitment(CaseSignature):
    """Choose the first `n_experts` specialists to consult on this question: different
    specialties whose knowledge bears most directly on it, most relevant first."""

    n_experts: int = dspy.InputField()
    experts: list[Specialist] = dspy.OutputField(desc="Distinct specialties, most relevant first.")


class ExpertAssessment(CaseSignature):
    """Assess the question as the specialist in `role`. If the team has already discussed it,
    read that discussion first and add what your specialty contributes. Give your reasoning,
    the option you favour and how confident you are."""

    role: str = dspy.InputField(desc="Your specialty and what you focus on.")
    discussion: str = dspy.InputField(desc="The team's discussion so far; empty if you are first.")
    assessment: str = dspy.OutputField(desc="Under 100 words.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    confidence: Confidence = dspy.OutputField(default="Low")


class ViewExchange(CaseSignature):
    """As the specialist in `role`, respond to the team's current views: say which points you
    accept and which you dispute and why, then state the option you favour."""

    role: str = dspy.InputField(desc="Your specialty and what you focus on.")
    own_view: str = dspy.InputField(desc="What you said last.")
    team_views: str = dspy.InputField(desc="What the other specialists said last; may be empty.")
    comment: str = dspy.OutputField(desc="Under 80 words.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]


class ConsensusCheck(CaseSignature):
    """Read the specialists' latest comments. Decide whether they have converged on one option
    for sound, shared reasons (`yes`) or still disagree or rest on guesswork (`no`), and name
    the option the team currently leans to."""

    comments: str = dspy.InputField(desc="Each specialist's latest comment and choice.")
    # an unreadable verdict parses as None (no stand-in verdict); the system counts it as a fallback
    consensus: Literal["yes", "no"] = dspy.OutputField(default=None)
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    reason: str = dspy.OutputField(desc="One sentence.")


class KnowledgeGap(CaseSignature):
    """Judge whether the current team lacks expertise this question needs: a finding, organ
    system or treatment no member can speak to with authority. If so (`yes`), name the missing
    specialties, none of which may already be on the team; otherwise answer `no` and list none."""

    team: list[str] = dspy.InputField(desc="The specialties already on the team.")
    discussion: str = dspy.InputField(desc="The team's discussion so far.")
    # an unreadable verdict parses as None (no stand-in verdict); the system counts it as a fallback
    gap: Literal["yes", "no"] = dspy.OutputField(default=None)
    specialties: list[Specialist] = dspy.OutputField(
        desc="The specialists to add; empty when there is no gap."
    )
    reason: str = dspy.OutputField(desc="One sentence.")


class AnswerUpdate(CaseSignature):
    """As the specialist in `role`, update your view after this round of discussion, including
    anything newly recruited colleagues added. Keep what still holds, revise what does not,
    and state the option you favour and how confident you are."""

    role: str = dspy.InputField(desc="Your specialty and what you focus on.")
    own_view: str = dspy.InputField(desc="What you said last.")
    discussion: str = dspy.InputField(desc="The team's discussion so far.")
    comment: str = dspy.OutputField(desc="Under 80 words.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    confidence: Confidence = dspy.OutputField(default="Low")


class ModeratorVerdict(CaseSignature):
    """As the moderator, decide the question from the specialists' latest comments and the
    last consensus check: the best option, the reason that decided it, and how confident the
    team's arguments let you be."""

    latest_comments: str = dspy.InputField(desc="Each specialist's latest comment and choice.")
    consensus_note: str = dspy.InputField(desc="The last consensus check: verdict, option and reason.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    rationale: str = dspy.OutputField(desc="One or two sentences.")
    confidence: Confidence = dspy.OutputField(default="Low")
