"""Readable text of a deliberation, for the terminal."""

from __future__ import annotations

import textwrap
from typing import Any

from pydantic import BaseModel

__all__ = ["render_transcript"]

_PHASES = {"R1": "Phase 1 - recruitment", "R2": "Phase 2 - independent assessment",
           "R3": "Phase 3 - discussion", "CL": "Phase 3 - closed-loop checks", "MM": "Phase 3 - mutual monitoring",
           "AGG": "Phase 4 - decision"}


def _wrap(text: str, indent: str = "    ") -> str:
    return "\n".join(textwrap.fill(line, width=100, initial_indent=indent, subsequent_indent=indent)
                     for line in (text or "").splitlines() or [""])


def _who(event: dict[str, Any]) -> str:
    agent, role = event.get("agent"), event.get("role")
    if agent and role and role != agent:
        return f"{agent} ({role})"
    return agent or role or "team"


def render_transcript(prediction: Any) -> str:
    """The team, the phases (who said what), trust before and after, challenges, and the vote."""
    record = getattr(prediction, "record", {}) or {}
    if isinstance(record, BaseModel):  # the typed `Deliberation`: read its stored form
        record = record.model_dump(mode="json")
    lines = []
    agents = record.get("agents") or []
    if agents:
        lines.append("Team (weights are hidden from the agents):")
        for a in agents:
            lines.append(f"  {a['id']}: {a['role']} - {a.get('expertise', '')} (weight {a.get('weight', 0):.2f})")
    phase = None
    for event in getattr(prediction, "transcript", []) or []:
        if event["phase"] != phase:
            phase = event["phase"]
            lines.append(f"\n== {_PHASES.get(phase, phase)} ==")
        data = event.get("data") or {}
        turn = f"[turn {event['turn']}] " if event.get("turn") else ""
        head = f"  {turn}{_who(event)} - {event['kind'].replace('_', ' ')}"
        if data.get("ranking"):
            head += f": ranking {' > '.join(data['ranking'])}"
        elif data.get("choice"):
            head += f": favours {data['choice']}"
        if data.get("confidence"):
            head += f", confidence {data['confidence']}"
        lines.append(head)
        if event["kind"] == "challenge":
            lines.append(_wrap(f"Concern ({data.get('severity')}): {event['text']}"))
            lines.append(_wrap(f"Reply: {data.get('response')}"))
            trust = ""
            if data.get("trust_before") is not None:
                trust = f"; trust {data['trust_before']:.2f} -> {data['trust_after']:.2f}"
            lines.append(_wrap(f"Verdict: {data.get('verdict')}; answer {data.get('choice_before')} -> "
                               f"{data.get('choice_after')}{trust}"))
        elif event["text"]:
            lines.append(_wrap(event["text"]))
    history = record.get("trust_history") or []
    if record.get("trust") and history:
        lines.append("\n== Trust over the deliberation ==")
        for stage in history:
            lines.append("  " + stage["stage"].ljust(12) + " " +
                         ", ".join(f"{k}={v:.2f}" for k, v in stage["scores"].items()))
    if record.get("scores"):
        lines.append(f"\nVote ({record.get('aggregation')}): " +
                     ", ".join(f"{k}={v:.2f}" for k, v in record["scores"].items()))
    return "\n".join(lines)
