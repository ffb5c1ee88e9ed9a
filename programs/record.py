"""The typed record of one deliberation (`Deliberation` and its parts), built phase by phase.

Defined in the core, `teammed.deliberation`, with the rest of the results schema, so that
reading results never imports the programs; re-exported here for the programs that build it.
"""

from __future__ import annotations

from teammed.deliberation import (
    RECORD_VERSION,
    Assessment,
    Challenge,
    DebatedPoint,
    Decision,
    Deliberation,
    DiscussionLog,
    FinalVote,
    LeaderOverride,
    LoopExchange,
    RoundTwo,
    SmmRecord,
    Team,
    TieBreak,
    TrustSnapshot,
    Turn,
    tally_fallbacks,
)

__all__ = [
    "RECORD_VERSION",
    "Assessment",
    "Turn",
    "FinalVote",
    "Challenge",
    "LoopExchange",
    "DebatedPoint",
    "SmmRecord",
    "TrustSnapshot",
    "TieBreak",
    "LeaderOverride",
    "Team",
    "RoundTwo",
    "DiscussionLog",
    "Decision",
    "Deliberation",
    "tally_fallbacks",
]
