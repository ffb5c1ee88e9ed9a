"""Clinical consultation: a manager staffs a specialist team that debates towards consensus."""

from __future__ import annotations

import dspy

from teammed.schema import Choice
from teammed.signatures.assessment import Confidence
from teammed.signatures.recruitment import Specialist


class ConsultSpecialties(dspy.Signature):
    """As the manager of a clinical consultation, read the case and the question and name
    exactly `n_specialists` different medical specialties best placed to answer it. When a
    previous team failed to agree, prefer perspectives it lacked."""

    question: str = dspy.InputField(desc="The case notes and the question.")
    options: dict[str, str] = dspy.InputField(desc="Answer options keyed by letter.")
    n_specialists: int = dspy.InputField()
    previous_specialties: list[str] = dspy.InputField(
        desc="The last team's specialties; empty for the first team."
    )
    specialties: list[str] = dspy.OutputField(desc="Distinct specialties, most relevant first.")


class ConsultExpertise(dspy.Signature):
    """As the manager, for each specialty on the team state in a few words the expertise it
    should bring to this particular case."""

    question: str = dspy.InputField(desc="The case notes and the question.")
    specialties: list[str] = dspy.InputField()
    expertise: list[Specialist] = dspy.OutputField(desc="One entry per specialty, same names.")


class SpecialistAnalysis(dspy.Signature):
    """Analyse the case on your own as the specialist in `role`, reasoning as that specialist
    would in practice from the findings in the notes. Give your reasoning and your choice."""

    question: str = dspy.InputField(desc="The case notes and the question.")
    options: dict[str, str] = dspy.InputField(desc="Answer options keyed by letter.")
    role: str = dspy.InputField(desc="Your specialty and the expertise you bring.")
    previous_team: str = dspy.InputField(desc="Summary of an earlier team's arguments; may be empty.")
    reasoning: str = dspy.OutputField(desc="Under 120 words.")
    choice: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]


class SpecialistDebate(dspy.Signature):
    """Debate round. As the specialist in `role`, weigh your colleagues' reasoning from the last
    round against your own: hold your position where your evidence is stronger, change it
    where theirs is. Give your updated reasoning and choice."""

    question: str = dspy.InputField(desc="The case notes and the question.")
    options: dict[str, str] = dspy.InputField(desc="Answer options keyed by letter.")
    role: str = dspy.InputField(desc="Your specialty and the expertise you bring.")
    own_previous: str = dspy.InputField(desc="Your reasoning and choice last round.")
    peers: str = dspy.InputField(desc="The other specialists' reasoning and choices last round.")
    history: str = dspy.InputField(desc="Earlier rounds and any earlier team's summary; may be empty.")
    reasoning: str = dspy.OutputField(desc="Under 120 words.")
    choice: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]


class DevilsAdvocate(dspy.Signature):
    """This round you are the team's devil's advocate. As the specialist in `role`, build the
    strongest honest case against the option most of the team holds (`majority`): findings it
    does not explain, the alternative that fits better, the error the majority may share.
    Then, separately, give the choice you actually believe after making that case."""

    question: str = dspy.InputField(desc="The case notes and the question.")
    options: dict[str, str] = dspy.InputField(desc="Answer options keyed by letter.")
    role: str = dspy.InputField(desc="Your specialty and the expertise you bring.")
    majority: str = dspy.InputField(desc="The option most of the team chose last round.")
    own_previous: str = dspy.InputField(desc="Your reasoning and choice last round.")
    peers: str = dspy.InputField(desc="The other specialists' reasoning and choices last round.")
    history: str = dspy.InputField(desc="Earlier rounds and any earlier team's summary; may be empty.")
    counter_case: str = dspy.OutputField(desc="Under 120 words.")
    choice: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]


class CompressMessage(dspy.Signature):
    """Shorten one message of a clinical team's discussion so the discussion fits in memory.
    Keep every finding, number, argument and the stated choice; drop repetition and filler."""

    question: str = dspy.InputField(desc="The case notes and the question.")
    message: str = dspy.InputField()
    summary: str = dspy.OutputField(desc="Much shorter than the message.")


class TeamHandoff(dspy.Signature):
    """The team could not agree and is being replaced. As the manager, summarise its final
    arguments for the new team: the positions taken, the evidence for each, and the point the
    disagreement turned on. Do not take a side."""

    question: str = dspy.InputField(desc="The case notes and the question.")
    options: dict[str, str] = dspy.InputField(desc="Answer options keyed by letter.")
    debate: str = dspy.InputField(desc="The departing team's discussion.")
    summary: str = dspy.OutputField(desc="Under 150 words.")


class ManagerAggregate(dspy.Signature):
    """No team reached consensus. As the manager, review the debates of every team and the vote
    counts, and decide the answer yourself: the best-supported option, the reason, and how
    confident you are."""

    question: str = dspy.InputField(desc="The case notes and the question.")
    options: dict[str, str] = dspy.InputField(desc="Answer options keyed by letter.")
    debates: str = dspy.InputField(desc="Each team's arguments, earliest team first.")
    votes: str = dspy.InputField(desc="Each team's vote counts by round.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    rationale: str = dspy.OutputField(desc="One or two sentences.")
    confidence: Confidence = dspy.OutputField(default="Low")
