"""Readable text of a deliberation, for the terminal."""

from __future__ import annotations

import textwrap
from typing import Any

from teammed.deliberation import Deliberation
from teammed.results import PeerRecord, TranscriptEvent, read_record

__all__ = ["render_transcript"]

_PHASES = {"R1": "Phase 1 - recruitment", "R2": "Phase 2 - independent assessment",
           "R3": "Phase 3 - discussion", "CL": "Phase 3 - closed-loop checks", "MM": "Phase 3 - mutual monitoring",
           "AGG": "Phase 4 - decision"}


def _wrap(text: str, indent: str = "    ") -> str:
    return "\n".join(textwrap.fill(line, width=100, initial_indent=indent, subsequent_indent=indent)
                     for line in (text or "").splitlines() or [""])


def _who(event: TranscriptEvent) -> str:
    agent, role = event.agent, event.role
    if agent and role and role != agent:
        return f"{agent} ({role})"
    return agent or role or "team"


def _team(record: Deliberation | PeerRecord | None) -> list[str]:
    if record is None or not record.agents:
        return []
    return ["Team (weights are hidden from the agents):",
            *(f"  {a.id}: {a.role} - {a.expertise or ''} (weight {a.weight or 0:.2f})" for a in record.agents)]


def _event(event: TranscriptEvent) -> list[str]:
    """The head line of one event (who, what, their choice) and its text; a challenge in full."""
    data = event.payload
    turn = f"[turn {event.turn}] " if event.turn else ""
    head = f"  {turn}{_who(event)} - {(event.kind or '').replace('_', ' ')}"
    if data.ranking:
        head += f": ranking {' > '.join(data.ranking)}"
    elif data.choice:
        head += f": favours {data.choice}"
    if data.confidence:
        head += f", confidence {data.confidence}"
    lines = [head]
    if event.kind == "challenge":
        lines.append(_wrap(f"Concern ({data.severity}): {event.text}"))
        lines.append(_wrap(f"Reply: {data.response}"))
        trust = ""
        if data.trust_before is not None and data.trust_after is not None:
            trust = f"; trust {data.trust_before:.2f} -> {data.trust_after:.2f}"
        lines.append(_wrap(f"Verdict: {data.verdict}; answer {data.choice_before} -> {data.choice_after}{trust}"))
    elif event.text:
        lines.append(_wrap(event.text))
    return lines


def _decision(record: Deliberation | PeerRecord | None) -> list[str]:
    """Trust over the deliberation and the final vote (a teamwork record only)."""
    if not isinstance(record, Deliberation):
        return []
    lines = []
    if record.trust and record.trust_history:
        lines.append("\n== Trust over the deliberation ==")
        for stage in record.trust_history:
            lines.append("  " + stage.stage.ljust(12) + " " +
                         ", ".join(f"{k}={v:.2f}" for k, v in stage.scores.items()))
    if record.scores:
        lines.append(f"\nVote ({record.aggregation}): " +
                     ", ".join(f"{k}={v:.2f}" for k, v in record.scores.items()))
    return lines


def render_transcript(prediction: Any) -> str:
    """The team, the phases (who said what), trust before and after, challenges, and the vote."""
    record = read_record(getattr(prediction, "record", None))
    lines = _team(record)
    phase = None
    for event in map(TranscriptEvent.model_validate, getattr(prediction, "transcript", []) or []):
        if event.phase != phase:
            phase = event.phase
            lines.append(f"\n== {_PHASES.get(phase or '', phase)} ==")
        lines += _event(event)
    lines += _decision(record)
    return "\n".join(lines)
