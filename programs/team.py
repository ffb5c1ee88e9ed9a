"""The team's members (`Agent`, defined with the record) and the readable transcript."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from teammed.deliberation import Agent  # a member of the team is part of the record
from teammed.results import TranscriptEvent

__all__ = ["Agent", "Transcript"]


@dataclass
class Transcript:
    """Who said what, in which phase: the readable trace of one deliberation."""

    events: list[TranscriptEvent] = field(default_factory=list)

    def add(self, phase: str, kind: str, text: str, *, agent: str | None = None, role: str | None = None,
            turn: int | None = None, **data: Any) -> None:
        self.events.append(TranscriptEvent(phase=phase, turn=turn, agent=agent, role=role, kind=kind, text=text,
                                           data=data or None))
