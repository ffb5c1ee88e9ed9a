"""Adaptive-complexity teams: triage the question, then one clinician, one panel or several teams.

The intermediate route has two variants (`teammed.programs.peers.mdagents`): ``paper``, MDAgents'
own discussion (`PanelOpinion`, `PanelTurn`, `PanelRoundAnswer`, `MajorityDecision`), and
``light`` (`SpecialistOpinion`, `ModeratorReview`, `PanelReply`, `ModeratorDecision`).
"""

from __future__ import annotations

from typing import Literal

import dspy
from pydantic import BaseModel, Field

from teammed.schema import Choice
from teammed.signatures.assessment import Confidence
from teammed.signatures.case import CaseSignature
from teammed.signatures.recruitment import Specialist


class ComplexityCheck(CaseSignature):
    """Before anyone answers, judge how much expertise this medical question needs.
    `basic`: a single generalist can settle it from core knowledge. `intermediate`: several
    specialists should weigh in and talk it over. `advanced`: it spans many disciplines or
    stages of care (work-up, diagnosis, management, complications) and needs several
    coordinated teams."""

    # an unreadable verdict parses as None (no stand-in verdict); the system counts it as a fallback
    complexity: Literal["basic", "intermediate", "advanced"] = dspy.OutputField(default=None)
    reason: str = dspy.OutputField(desc="One sentence.")


class PrimaryCareAnswer(CaseSignature):
    """As a primary care physician, answer the medical question on your own: note the deciding
    findings briefly, give the letter of the best option and say how confident you are."""

    reasoning: str = dspy.OutputField(desc="Under 80 words.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    confidence: Confidence = dspy.OutputField(default="Low")


class TeamRecruitment(CaseSignature):
    """Assemble a multidisciplinary panel for this question: exactly `n_members` different
    specialties whose judgement matters most, most relevant first."""

    n_members: int = dspy.InputField(desc="How many specialists to recruit.")
    members: list[Specialist] = dspy.OutputField(desc="Distinct specialties, most relevant first.")


class CareTeam(BaseModel):
    name: str = Field(description="What the team is for, e.g. 'Initial Assessment Team'.")
    members: list[Specialist] = Field(description="The team's specialists, its lead first.")


class CareTeamsRecruitment(CaseSignature):
    """Organise `n_teams` teams of `team_size` specialists that together cover this case from
    first assessment to final review, for instance a team that assesses the presentation,
    teams for the key organ systems or treatments, and a team that reviews the conclusion.
    Use each specialty once across all teams."""

    n_teams: int = dspy.InputField()
    team_size: int = dspy.InputField()
    teams: list[CareTeam] = dspy.OutputField(desc="In the order the teams should work.")


class SpecialistOpinion(CaseSignature):
    """Give your own opinion on the question as the specialist in `role`: the findings your
    specialty weighs most, the option you favour and how confident you are."""

    role: str = dspy.InputField(desc="Your specialty and what you focus on.")
    earlier_reports: str = dspy.InputField(desc="Reports of teams that worked before yours; may be empty.")
    reasoning: str = dspy.OutputField(desc="Under 80 words.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    confidence: Confidence = dspy.OutputField(default="Low")


class PanelReply(CaseSignature):
    """The panel has not agreed. As the specialist in `role`, answer your colleagues: say whose
    points hold and whose do not, correct any error you see, and state the option you favour
    now."""

    role: str = dspy.InputField(desc="Your specialty and what you focus on.")
    moderator_summary: str = dspy.InputField(desc="The moderator's summary of the disagreement.")
    opinions: str = dspy.InputField(desc="Every panel member's latest opinion.")
    message: str = dspy.OutputField(desc="Under 80 words.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]


class ModeratorReview(CaseSignature):
    """As the panel's moderator, read the members' latest opinions. Summarise where they agree
    and the disagreement that still matters, and say whether the panel has reached consensus
    on one option."""

    opinions: str = dspy.InputField(desc="Every panel member's latest opinion.")
    summary: str = dspy.OutputField(desc="Under 100 words.")
    # an unreadable verdict parses as None (no stand-in verdict); the system counts it as a fallback
    consensus: Literal["yes", "no"] = dspy.OutputField(default=None)


class ModeratorDecision(CaseSignature):
    """As the panel's moderator, make the final decision: weigh the members' latest opinions and
    your summary of the discussion, and give the best option with the reason that decided it."""

    summary: str = dspy.InputField(desc="Your summary of the discussion; may be empty.")
    opinions: str = dspy.InputField(desc="Every panel member's latest opinion.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    rationale: str = dspy.OutputField(desc="One or two sentences.")
    confidence: Confidence = dspy.OutputField(default="Low")


class TeamReport(CaseSignature):
    """As the lead of the team named in `team`, merge your members' opinions into the team's
    report: the findings that matter, the conclusion and the option the team favours."""

    team: str = dspy.InputField(desc="The team's name and purpose.")
    opinions: str = dspy.InputField(desc="The team members' opinions.")
    earlier_reports: str = dspy.InputField(desc="Reports of teams that worked before yours; may be empty.")
    report: str = dspy.OutputField(desc="Under 120 words.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]


class IntegratedDecision(CaseSignature):
    """As the clinician in charge, read every team's report and decide: the best option, the
    reason that decided it, and how confident you are."""

    reports: str = dspy.InputField(desc="Each team's report, in the order the teams worked.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    rationale: str = dspy.OutputField(desc="One or two sentences.")
    confidence: Confidence = dspy.OutputField(default="Low")


# ---------------------------------------------------------------- the paper variant's panel


class PanelOpinion(CaseSignature):
    """As the specialist in `role`, a member of a panel of experts, answer the medical question
    after the worked examples: the findings your specialty weighs most, the option you favour
    and how confident you are."""

    role: str = dspy.InputField(desc="Your specialty and what you focus on.")
    reasoning: str = dspy.OutputField(desc="Under 80 words.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    confidence: Confidence = dspy.OutputField(default="Low")


class PanelMessage(BaseModel):
    to: str = Field(description="The id of the teammate the message is for, as listed in `teammates`.")
    text: str = Field(description="Your opinion for that expert with a short reason; under 60 words.")


class PanelTurn(CaseSignature):
    """You are the specialist in `role` on a panel discussing this question. Given the panel's
    latest answers and this round's messages, say whether you want to talk to any expert of
    the panel (`speak`). If you do, choose the experts you want to talk to (their ids in
    `teammates`) and write each of them one message: deliver your opinion once you are
    confident enough, in a way that could convince that expert, with a short reason. Say
    `no` when you have nothing to add."""

    role: str = dspy.InputField(desc="Your specialty and what you focus on.")
    teammates: str = dspy.InputField(desc="The other experts of the panel: one per line, id and specialty.")
    answers: str = dspy.InputField(desc="Every panel member's latest answer.")
    discussion: str = dspy.InputField(desc="The messages of this round you sent or received; may be empty.")
    # an unreadable verdict parses as None (no stand-in verdict); the system reads it as "no", counted
    speak: Literal["yes", "no"] = dspy.OutputField(default=None)
    messages: list[PanelMessage] = dspy.OutputField(desc="One per expert you chose; empty when you say no.")


class PanelRoundAnswer(CaseSignature):
    """Now that you have talked with the other experts of the panel, recall your expertise as the
    specialist in `role` and what the others told you, and give your final answer to the
    question for this round."""

    role: str = dspy.InputField(desc="Your specialty and what you focus on.")
    answers: str = dspy.InputField(desc="Every panel member's answer before this round.")
    discussion: str = dspy.InputField(desc="The messages of this round you sent or received; may be empty.")
    reasoning: str = dspy.OutputField(desc="Under 80 words.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    confidence: Confidence = dspy.OutputField(default="Low")


class MajorityDecision(CaseSignature):
    """As the final medical decision maker, review each expert's final answer and make the final
    decision by majority vote: the option most experts chose, and why."""

    answers: str = dspy.InputField(desc="Each expert's final answer.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    rationale: str = dspy.OutputField(desc="One or two sentences.")
    confidence: Confidence = dspy.OutputField(default="Low")
