"""A self-contained HTML page of every deliberation: one collapsible section per question.

Every piece of run data is HTML-escaped; the page has inline CSS and no scripts.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from teammed.evals._rows import Row, first_choice, is_correct, items, record

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
details{border:1px solid #ccc;border-radius:4px;margin:.4em 0;padding:.3em .6em}
summary{cursor:pointer}
table{border-collapse:collapse;margin:.4em 0}
td,th{border:1px solid #ddd;padding:2px 6px;vertical-align:top;font-size:.9em}
.ok{color:#17803d;font-weight:bold}.bad{color:#b42318;font-weight:bold}
.ev{margin:.3em 0;padding-left:.6em;border-left:3px solid #ccd}
.tag{display:inline-block;background:#eef;border-radius:3px;padding:0 4px;font-size:.8em}
.text{white-space:pre-wrap}
pre{background:#f6f6f6;padding:.4em;overflow-x:auto;font-size:.8em}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _table(header: Sequence[str], body: Iterable[Sequence[Any]]) -> str:
    rows = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>" for cells in body)
    return "<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + f"</tr>{rows}</table>"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _by_agent(entries: list[Any]) -> dict[str, Mapping[str, Any]]:
    return {str(e.get("agent")): e for e in entries if isinstance(e, Mapping)}


def _choice(entry: Mapping[str, Any] | None) -> str:
    if not entry:
        return ""
    confidence = entry.get("confidence")
    return f"{first_choice(entry) or ''}" + (f" ({confidence})" if confidence else "")


def _team(row: Row) -> str:
    rec = record(row)
    agents = [a for a in items(rec, "agents") if isinstance(a, Mapping)]
    if not agents:
        return ""
    r2, final = _by_agent(items(rec, "r2")), _by_agent(items(rec, "final"))
    history = [h for h in items(rec, "trust_history") if isinstance(h, Mapping)]
    stages = [str(h.get("stage")) for h in history]
    body = []
    for agent in agents:
        aid = str(agent.get("id"))
        trust = [_mapping(h.get("scores")).get(aid) for h in history]
        final_trust = _mapping(row.get("trust")).get(aid)
        body.append([aid, agent.get("role"), agent.get("expertise"), agent.get("weight", ""),
                     _choice(r2.get(aid)), _choice(final.get(aid)), *trust, final_trust])
    header = ["Agent", "Role", "Expertise", "Weight", "R2 choice", "Final choice", *stages, "Final trust"]
    return "<h4>Team</h4>" + _table(header, body)


def _event(event: Mapping[str, Any]) -> str:
    where = " ".join(_e(v) for v in (event.get("phase"), event.get("turn") and f"turn {event['turn']}") if v)
    who = _e(event.get("agent") or "")
    if event.get("role"):
        who += f" ({_e(event['role'])})"
    data = event.get("data")
    extra = (
        f"<details><summary>data</summary><pre>{_e(json.dumps(data, indent=1, default=str))}</pre></details>"
        if data else ""
    )
    return (
        f'<div class="ev"><span class="tag">{where}</span> <b>{who}</b> <i>{_e(event.get("kind"))}</i>'
        f'<div class="text">{_e(event.get("text"))}</div>{extra}</div>'
    )


def _transcript(row: Row) -> str:
    events = [e for e in items(row, "transcript") if isinstance(e, Mapping)]
    return "<h4>Deliberation</h4>" + "".join(map(_event, events)) if events else ""


def _challenges(row: Row) -> str:
    challenges = [c for c in items(record(row), "challenges") if isinstance(c, Mapping)]
    if not challenges:
        return ""
    body = [
        [
            *(c.get(k) for k in ("turn", "agent", "concern", "severity", "response", "verdict")),
            f"{c.get('choice_before')} → {c.get('choice_after')}",
            f"{c.get('trust_before')} → {c.get('trust_after')}",
        ]
        for c in challenges
    ]
    header = ["Turn", "Agent", "Concern", "Severity", "Response", "Verdict", "Choice", "Trust"]
    return "<h4>Challenges</h4>" + _table(header, body)


def _vote(row: Row) -> str:
    rec = record(row)
    parts = ["<h4>Vote</h4>"]
    votes = rec.get("votes_by_turn")
    if isinstance(votes, Mapping) and votes:
        width = max(len(items(votes, agent)) for agent in votes)
        header = ["Agent", "After R2", *(f"Turn {i}" for i in range(1, width))]
        parts.append(_table(header, [[agent, *items(votes, agent)] for agent in votes]))
    facts = {
        "aggregation": rec.get("aggregation"),
        "scores": json.dumps(rec["scores"]) if isinstance(rec.get("scores"), Mapping) else None,
        "tie": json.dumps(rec["tie"]) if isinstance(rec.get("tie"), Mapping) else None,
        "early consensus": rec.get("early_consensus"),
        "route": rec.get("route"),
        "prediction": row.get("prediction"),
        "gold": row.get("gold"),
        "correct": is_correct(row),
        "error": row.get("error"),
    }
    parts.append(_table(["", ""], [[k, v] for k, v in facts.items() if v is not None]))
    return "".join(parts)


def _options(row: Row) -> str:
    options = row.get("options")
    if not isinstance(options, Mapping) or not options:
        return ""
    return "<h4>Options</h4>" + _table(["", "Option"], [[k, v] for k, v in options.items()])


def _question(row: Row) -> str:
    ok = is_correct(row)
    mark = '<span class="ok">✓</span>' if ok else '<span class="bad">✗</span>'
    status = " — failed" if row.get("failed") else ""
    summary = (
        f"{mark} {_e(row.get('id'))}: predicted {_e(row.get('prediction'))}, gold {_e(row.get('gold'))}"
        f"{', confidence ' + _e(row['confidence']) if row.get('confidence') else ''}{status}"
    )
    body = _options(row) + _team(row) + _transcript(row) + _challenges(row) + _vote(row)
    return f"<details><summary>{summary}</summary>{body}</details>"


def transcripts_html(runs: Sequence[tuple[str, Sequence[Row]]]) -> str:
    """The page: one section per ``(title, rows)`` run, one collapsible block per question."""
    sections = []
    for title, rows in runs:
        correct = sum(map(is_correct, rows))
        header = f"<h2>{_e(title)}</h2><p>{correct} of {len(rows)} correct.</p>"
        sections.append("<section>" + header + "".join(map(_question, rows)) + "</section>")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>TeamMed transcripts</title>'
        f"<style>{_CSS}</style></head><body><h1>Deliberation transcripts</h1>"
        f"{''.join(sections)}</body></html>\n"
    )
