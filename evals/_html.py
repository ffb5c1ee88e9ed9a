"""A self-contained HTML viewer of every deliberation: one collapsible block per question.

The page carries its CSS and a small script inline (no network): filters by outcome
(correct / wrong / failed) and by run or system, a text search over everything a block
holds, and a link (anchor) per question. Filters and search live in the URL
(``?status=wrong&run=2&q=chest#r2-medqa-17``; ``&expand=1`` opens every shown question), so a
view can be shared. Every piece of
run data is HTML-escaped; numbers are rounded for reading (the JSON files keep them exact).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from importlib import resources
from typing import Any

from teammed.deliberation import Assessment, Deliberation, FinalVote, TieBreak
from teammed.evals._facts import RowLike
from teammed.evals._rows import (
    deliberation,
    first_choice,
    stage_name,
    team_record,
    votes_by_turn,
)
from teammed.evals.stats import natural_key
from teammed.results import AdaptiveRecord, PeerRecord, PeerVote, ResultRow, TranscriptEvent

__all__ = ["paged_transcripts", "fmt"]

# The viewer's style and script, shipped beside this module (package data).
_CSS = "\n" + resources.files(__package__).joinpath("viewer.css").read_text(encoding="utf-8")
_JS = "\n" + resources.files(__package__).joinpath("viewer.js").read_text(encoding="utf-8")


def fmt(value: Any) -> str:
    """A value for reading: floats to at most 3 decimals (0.7729999999999999 -> 0.773), None empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value:
            return "–"
        text = f"{value:.3f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    return str(value)


def _rounded(value: Any) -> Any:
    """Floats rounded to 3 decimals, recursively (for the JSON shown in the page)."""
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, Mapping):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def _e(value: Any) -> str:
    return html.escape(fmt(value), quote=True)


def _table(header: Sequence[str], body: Iterable[Sequence[Any]], *, row_class: Sequence[str] = ()) -> str:
    rows = []
    for i, cells in enumerate(body):
        cls = f' class="{row_class[i]}"' if i < len(row_class) and row_class[i] else ""
        tds = "".join(f'<td class="n">{_e(c)}</td>' if isinstance(c, int | float) and not isinstance(c, bool)
                      else f"<td>{_e(c)}</td>" for c in cells)
        rows.append(f"<tr{cls}>{tds}</tr>")
    head = "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>" if any(header) else ""
    return "<table>" + head + "".join(rows) + "</table>"


def _choice(vote: Assessment | FinalVote | PeerVote | None) -> str:
    if vote is None:
        return ""
    return f"{first_choice(vote) or ''}" + (f" ({fmt(vote.confidence)})" if vote.confidence not in (None, "") else "")


def _team(row: ResultRow) -> str:
    rec = team_record(row)
    if rec is None or not rec.agents:
        return ""
    r2: dict[str, Assessment | PeerVote] = {str(v.agent): v for v in rec.r2}
    final: dict[str, FinalVote | PeerVote] = {str(v.agent): v for v in rec.final}
    history = rec.trust_history if isinstance(rec, Deliberation) else []
    stages = [f"trust {stage_name(h.stage)}" for h in history]
    has_expertise = any(a.expertise for a in rec.agents)
    trust = row.trust if isinstance(row.trust, Mapping) else {}  # untyped: agent -> final trust, or null
    body = []
    for agent in rec.agents:
        aid = str(agent.id)
        by_stage = [h.scores.get(aid) for h in history]
        final_trust = trust.get(aid)
        cells = [aid, agent.role, *([agent.expertise] if has_expertise else []), agent.weight,
                 _choice(r2.get(aid)), _choice(final.get(aid)), *by_stage]
        body.append([*cells, *([final_trust] if final_trust is not None or row.trust else [])])
    header = ["Agent", "Role", *(["Expertise"] if has_expertise else []), "Weight", "Round 2 choice",
              "Final choice", *stages, *(["Final trust"] if row.trust else [])]
    return "<h4>Team</h4>" + _table(header, body)


def _event(event: TranscriptEvent) -> str:
    where = " ".join(_e(v) for v in (event.phase, event.turn and f"turn {event.turn}") if v)
    who = _e(event.agent or "")
    if event.role:
        who += f" ({_e(event.role)})"
    data = json.dumps(_rounded(event.data), ensure_ascii=False, default=str) if event.data else ""
    extra = f"<details><summary>data</summary><pre>{html.escape(data)}</pre></details>" if data else ""
    return (f'<div class="ev"><span class="tag">{where}</span> <b>{who}</b> <i>{_e(event.kind)}</i>'
            f'<div class="text">{_e(event.text)}</div>{extra}</div>')


def _challenges(row: ResultRow) -> str:
    found = deliberation(row)
    if found is None or not found.challenges:
        return ""
    body = [
        [c.turn, c.agent, c.concern, c.severity, c.response, c.verdict,
         f"{fmt(c.choice_before)} → {fmt(c.choice_after)}",
         f"{fmt(c.trust_before)} → {fmt(c.trust_after)}"]
        for c in found.challenges
    ]
    header = ["Turn", "Agent", "Concern", "Severity", "Response", "Verdict", "Choice", "Trust"]
    return "<h4>Challenges</h4>" + _table(header, body)


def _tie(tie: TieBreak | None) -> str | None:
    """``A, C tied → A (rule: first-place votes, then ...)``."""
    if tie is None:
        return None
    tied = ", ".join(str(x) for x in tie.tied)
    how = " · ".join(value for value in (tie.resolved_by, tie.reason) if value)
    return f"{tied} tied → {fmt(tie.answer)}" + (f" ({how})" if how else "")


def _outcome(rec: Deliberation | PeerRecord | None) -> dict[str, Any]:
    """What the record says about the decision: the vote of a teamwork row, the route of a peer's."""
    if isinstance(rec, Deliberation):
        scores = ", ".join(f"{k}: {fmt(v)}" for k, v in rec.scores.items()) or None
        return {"aggregation": rec.aggregation, "scores": scores, "tie": _tie(rec.tie),
                "early consensus": rec.early_consensus, "route": None}
    route = rec.route if rec is not None else None
    answered = (f"{'the team' if rec.stage == 'team' else 'the single agent'} (signal {rec.signal:g}, "
                f"threshold {rec.threshold:g})" if isinstance(rec, AdaptiveRecord) else None)
    return {"aggregation": None, "scores": None, "tie": None, "early consensus": None, "route": route,
            "answered by": answered}


def _vote(row: ResultRow) -> str:
    parts = ["<h4>Outcome</h4>"]
    votes = votes_by_turn(row)
    if votes:
        width = max(len(turns) for turns in votes.values())
        header = ["Agent", "After round 2", *(f"Turn {i}" for i in range(1, width))]
        parts.append(_table(header, [[agent, *turns] for agent, turns in votes.items()]))
    facts = {
        **_outcome(team_record(row)),
        "prediction": row.prediction,
        "gold": row.gold,
        "confidence": row.confidence,
        "LM calls": row.calls,
        "tokens": (row.prompt_tokens or 0) + (row.completion_tokens or 0) or None,
        "seconds": row.latency_s,
    }
    shown = [[k, fmt(v)] for k, v in facts.items() if v is not None]
    parts.append(_table(["", ""], shown).replace("<table>", '<table class="facts">', 1))
    if row.error:
        parts.append(f'<p class="error"><b>Failed:</b> {_e(row.error)}</p>')
    if row.rationale:
        parts.append(f'<h4>Rationale</h4><div class="text">{_e(row.rationale)}</div>')
    return "".join(parts)


def _options(row: ResultRow) -> str:
    if not row.options:
        return ""
    gold, predicted = row.gold, row.prediction
    classes = ["gold" if k == gold else "picked-wrong" if k == predicted else "" for k in row.options]
    marks = [("gold" if k == gold else "") + (" · predicted" if k == predicted else "") for k in row.options]
    body = [[k, v, m.strip(" ·")] for (k, v), m in zip(row.options.items(), marks, strict=True)]
    return _table(["", "Option", ""], body, row_class=classes)


def _stem(row: ResultRow) -> str:
    context = f'<div class="context">{_e(row.context)}</div>' if row.context else ""
    if row.question:
        return f'{context}<div class="stem">{_e(row.question)}</div>'
    return context + '<p class="run">(this run did not record the question text; rerun it to see it here)</p>'


def anchor_id(run_index: int, question_id: Any) -> str:
    """A stable, URL-safe anchor for one question of one run."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(question_id)).strip("-") or "q"
    return f"r{run_index}-{slug}"


def _repairs(row: ResultRow) -> str:
    """Badges for what was not answered cleanly: unparseable outputs, repaired outputs and rankings, and
    fallbacks (a behaviour's output replaced by its rule); nothing for a clean question."""
    marks = [(row.parse_failures, "unparsed", "outputs that could not be parsed (dropped, never counted as a choice)"),
             (row.repaired, "repaired", "outputs repaired into the schema"),
             (row.ranking_repairs, "ranking repaired", "rankings completed or de-duplicated"),
             (row.fallbacks, "fallback", "behaviours whose output was replaced by their rule")]
    return "".join(f' <span class="badge b-repair" title="{_e(why)}">{n} {_e(what)}</span>'
                   for n, what, why in marks if n)


def _question(row: ResultRow, *, run_index: int, run_title: str) -> str:
    state = status_of(row)
    anchor = anchor_id(run_index, row.id)
    stem = str(row.question or "")
    short = stem if len(stem) <= 140 else stem[:137] + "…"
    confidence = f", confidence {fmt(row.confidence)}" if row.confidence not in (None, "") else ""
    pick = f"predicted {fmt(row.prediction) or '—'} · gold {fmt(row.gold) or '—'}{confidence}"
    if isinstance(row.record, AdaptiveRecord):  # which stage answered, at a glance
        pick += " · by the team" if row.record.stage == "team" else " · by the single agent"
    if state == "failed":
        error = str(row.error or "no answer")
        pick = f"gold {fmt(row.gold) or '—'} · {error if len(error) <= 60 else error[:57] + '…'}"
    summary = (f'<span class="badge b-{state}">{state}</span>{_repairs(row)} <b>{_e(row.id)}</b>'
               f'<span class="run">{_e(run_title)}</span><span class="stem-short">{_e(short)}</span>'
               f'<span class="pick">{_e(pick)}</span>'
               f'<a class="anchor" href="#{anchor}" title="link to this question">#</a>')
    said = "<h4>Deliberation</h4>" + "".join(map(_event, row.transcript)) if row.transcript else ""
    body = _stem(row) + _options(row) + _vote(row) + _team(row) + _challenges(row) + said
    system = _e(row.system or "")
    return (f'<article class="q" id="{anchor}" data-status="{state}" data-run="{run_index}" data-system="{system}">'
            f'<details><summary>{summary}</summary><div class="body">{body}</div></details></article>')


def status_of(row: RowLike) -> str:
    """``correct``, ``wrong`` or ``failed`` (a failed question is never correct)."""
    return "failed" if row.failed else "correct" if row.correct else "wrong"


def _overview(runs: Sequence[tuple[str, Sequence[RowLike]]]) -> str:
    body = []
    for i, (title, rows) in enumerate(runs):
        states = [status_of(r) for r in rows]
        n = len(rows)
        accuracy = f"{100 * states.count('correct') / n:.1f}%" if n else "–"
        systems = ", ".join(dict.fromkeys(str(r.system or "") for r in rows)) or "–"
        body.append(f'<tr><td><a href="#run{i}">{_e(title)}</a></td><td>{_e(systems)}</td><td class="n">{n}</td>'
                    f'<td class="n">{states.count("correct")}</td><td class="n">{states.count("wrong")}</td>'
                    f'<td class="n">{states.count("failed")}</td><td class="n">{accuracy}</td></tr>')
    header = "".join(f"<th>{h}</th>" for h in ("Run", "System", "Questions", "Correct", "Wrong", "Failed",
                                                "Accuracy"))
    return f'<table class="runs"><tr>{header}</tr>{"".join(body)}</table>'


def _toolbar(runs: Sequence[tuple[str, Sequence[RowLike]]]) -> str:
    statuses = "".join(
        f'<label><input type="radio" name="status" value="{v}"{" checked" if v == "all" else ""}><span>{t}</span>'
        f"</label>" for v, t in (("all", "All"), ("correct", "Correct"), ("wrong", "Wrong"), ("failed", "Failed"))
    )
    systems = sorted({str(r.system) for _, rows in runs for r in rows if r.system})
    run_options = "".join(f'<option value="{i}">{_e(title)}</option>' for i, (title, _) in enumerate(runs))
    system_options = "".join(f'<option value="{_e(s)}">system: {_e(s)}</option>' for s in systems)
    return (f'<div class="toolbar"><span class="seg">{statuses}</span>'
            f'<select id="run" aria-label="run or system"><option value="all">All runs and systems</option>'
            f'<optgroup label="Systems">{system_options}</optgroup><optgroup label="Runs">{run_options}</optgroup>'
            f'</select><input type="search" id="search" placeholder="Search questions, options, transcripts…" '
            f'aria-label="search"><button id="expand" type="button">Expand shown</button>'
            f'<button id="collapse" type="button">Collapse all</button><span id="count"></span></div>')


# Beyond this many questions a viewer page gets slow to open and search: the transcripts are split.
PAGE_QUESTIONS = 1000


def page_name(k: int) -> str:
    """The file of page ``k`` (1-based): ``transcripts.html``, ``transcripts-2.html``, ..."""
    return "transcripts.html" if k == 1 else f"transcripts-{k}.html"


RowsOf = Callable[[int, set[str]], Iterable[ResultRow]]
"""``rows_of(run_index, ids)``: the rows of one run whose ids are among ``ids``, in any order."""


def paged_transcripts(runs: Sequence[tuple[str, Sequence[RowLike]]], rows_of: RowsOf, *,
                      page_size: int = PAGE_QUESTIONS) -> list[Iterator[str]]:
    """The viewer split into pages of at most ``page_size`` question ids (in natural id order, the
    same ids for every run, so a question's runs stay side by side); every page shows the whole
    runs' overview and links to the other pages (`page_name`).

    ``runs`` pairs each title with what the overview reads of its rows (rows or their facts); the
    full rows of a page are asked of ``rows_of`` while the page is written, one run at a time, so
    a report never holds more than one page of one run's transcripts. Each page is an iterator of
    text chunks, for `teammed.records.write_atomic`.
    """
    if page_size < 1:
        raise ValueError("page_size must be at least 1")
    ids = sorted({r.id for _, rows in runs for r in rows}, key=natural_key)
    chunks = [ids[i:i + page_size] for i in range(0, len(ids), page_size)] or [[]]
    return [_page(runs, rows_of, set(chunk), _pager(k, chunks) if len(chunks) > 1 else "")
            for k, chunk in enumerate(chunks, start=1)]


def _pager(k: int, chunks: Sequence[Sequence[str]]) -> str:
    links = " ".join(f"<b>{i}</b>" if i == k else f'<a href="{page_name(i)}">{i}</a>'
                     for i in range(1, len(chunks) + 1))
    chunk = chunks[k - 1]
    return (f'<nav class="pages">Questions {_e(chunk[0])} to {_e(chunk[-1])} ({len(chunk)} ids) · page {k} of '
            f"{len(chunks)}: {links}</nav>")


def _page(runs: Sequence[tuple[str, Sequence[RowLike]]], rows_of: RowsOf, keep: set[str], pager: str) -> Iterator[str]:
    yield ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
           '<meta name="viewport" content="width=device-width, initial-scale=1">'
           f"<title>TeamMed transcripts</title><style>{_CSS}</style></head><body>{_toolbar(runs)}<main>"
           f"<h1>Deliberation transcripts</h1>{pager}{_overview(runs)}")
    for i, (title, rows) in enumerate(runs):
        states = [status_of(r) for r in rows]
        yield (f'<section class="runsec"><h2 id="run{i}">{_e(title)}</h2><p class="run">{states.count("correct")} '
               f'of {len(rows)} correct, {states.count("failed")} failed</p>')
        shown = sorted(rows_of(i, keep), key=lambda r: natural_key(r.id))  # the same order in every run
        for row in shown:
            yield _question(row, run_index=i, run_title=title)
        yield "</section>"
    yield f"{pager}</main><script>{_JS}</script></body></html>\n"
