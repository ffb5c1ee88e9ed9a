"""One DSPy Signature per teamwork behaviour; each docstring is that behaviour's instruction."""

from teammed.signatures.assessment import Confidence, ImageAssessment, InitialAssessment
from teammed.signatures.closed_loop import Acknowledge, VerifyUnderstanding
from teammed.signatures.discussion import DiscussionTurn, FinalRanking
from teammed.signatures.leadership import (
    AssessmentQuality,
    ConsensusFacts,
    CorrectionAuthority,
    FormalReport,
    Mediation,
    TieResolution,
)
from teammed.signatures.monitoring import EvaluateResponse, RaiseConcern, RespondToConcern, WeakestReasoning
from teammed.signatures.recruitment import AgentCount, QuestionTricks, Specialist, SpecialtyRecruitment

__all__ = [
    "AgentCount",
    "SpecialtyRecruitment",
    "Specialist",
    "QuestionTricks",
    "InitialAssessment",
    "ImageAssessment",
    "Confidence",
    "ConsensusFacts",
    "FormalReport",
    "AssessmentQuality",
    "DiscussionTurn",
    "FinalRanking",
    "Mediation",
    "WeakestReasoning",
    "RaiseConcern",
    "RespondToConcern",
    "EvaluateResponse",
    "TieResolution",
    "CorrectionAuthority",
    "Acknowledge",
    "VerifyUnderstanding",
]
