"""What each speaker reads in the discussion: a compact team context and the history since it last spoke.

A speaker's first turn shows the whole picture once: the round-2 assessments (rankings,
confidence and justification; sharing the facts is the shared mental model's job, so they
reach the discussion as its verified facts when it is on), the shared knowledge, the
reliability scores and the leader's report. Each later turn shows only what changed since
the speaker last spoke: its own last message, what the others said after it, the
closed-loop corrections and challenges in between (a challenged agent also sees its own
reply), the leader's newest mediation, and the current reliability scores (the spec's trust
hints, in every turn). Pure functions over the typed record.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from teammed.deliberation import Turn
from teammed.programs.discussion import format_turn

__all__ = ["History", "first_context", "later_context", "format_trust"]


def format_trust(trust: dict[str, float]) -> str:
    return " ".join(f"{agent}={score:.2f}" for agent, score in trust.items())


def first_context(*, assessments: str, shared: str, trust: str, report: str) -> str:
    parts = [f"Round-2 assessments:\n{assessments}"]
    if shared:
        parts.append(f"Shared knowledge:\n{shared}")
    if trust:
        parts.append(f"Reliability (0.4-1): {trust}")
    if report:
        parts.append(f"Leader's case report:\n{report}")
    return "\n\n".join(parts)


def later_context(*, mediation: str, trust: str) -> str:
    parts = []
    if mediation:
        parts.append(f"Leader's latest mediation:\n{mediation}")
    if trust:
        parts.append(f"Reliability now: {trust}")
    return "\n\n".join(parts)


@dataclass
class History:
    """The discussion as it happened: turns and notes (corrections, challenges) in order."""

    entries: list[tuple[str | None, str]] = field(default_factory=list)
    replies: dict[int, tuple[str, str]] = field(default_factory=dict)  # entry index -> (agent, its own reply)

    def said(self, turn: Turn) -> None:
        self.entries.append((turn.agent, format_turn(turn)))

    def note(self, text: str, *, reply: tuple[str, str] | None = None) -> None:
        """A note for everyone; ``reply`` (agent, text) is shown to that agent only (its answer to a challenge)."""
        if reply is not None:
            self.replies[len(self.entries)] = reply
        self.entries.append((None, text))

    def _seen_by(self, index: int, agent: str) -> str:
        text = self.entries[index][1]
        owner = self.replies.get(index)
        return f"{text} Your reply: {owner[1]}" if owner and owner[0] == agent else text

    def spoken(self, agent: str) -> bool:
        return any(who == agent for who, _ in self.entries)

    def since(self, agent: str) -> str:
        """The speaker's own last message (marked) and everything after it; all of it before its first turn."""
        last = max((i for i, (who, _) in enumerate(self.entries) if who == agent), default=-1)
        lines = [self._seen_by(i, agent) for i in range(last + 1, len(self.entries))]
        if last >= 0:
            lines.insert(0, "(you) " + self.entries[last][1])
        return "\n".join(lines)
