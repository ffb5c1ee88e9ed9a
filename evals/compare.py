"""Two configurations on the same questions, question by question: what one fixed and what it broke.

`paired_comparison_of` counts the 2x2 table and the exact McNemar test on the pairs of `pair_once` (each
question once: McNemar needs independent pairs); `compare_html` writes the page with both deliberations
side by side. What each shows, and that a failed question counts as wrong: docs/commands/report.md.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from teammed.evals._html import _CSS, _challenges, _e, _options, _stem, _table, _team, _vote
from teammed.evals._rows import deliberation, votes_by_turn
from teammed.evals._runs import Group
from teammed.evals.stats import Key, mcnemar, outcomes_of, pair_once
from teammed.results import ResultRow

__all__ = ["PairedView", "paired_comparison_of", "compare_markdown", "compare_html", "COMPARE_PAGE"]

COMPARE_PAGE = "compare.html"


@dataclass(frozen=True)
class PairedView:
    """The 2x2 table of ``second`` against ``first`` on the questions both answered (labelled ones)."""

    dataset: str
    first: str
    second: str
    both_right: list[Key]
    fixed: list[Key]  # only ``second`` right
    broken: list[Key]  # only ``first`` right
    both_wrong: list[Key]
    unpaired: int  # questions only one of them answered
    repeats: int = 0  # answers of a question already paired at an earlier seed (left out: pairs are independent)

    @property
    def n(self) -> int:
        return len(self.both_right) + len(self.fixed) + len(self.broken) + len(self.both_wrong)

    @property
    def p_mcnemar(self) -> float:
        return mcnemar(len(self.fixed), len(self.broken))

    def as_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "first": self.first, "second": self.second, "n": self.n,
                "both_right": len(self.both_right), "fixed": len(self.fixed), "broken": len(self.broken),
                "both_wrong": len(self.both_wrong), "unpaired": self.unpaired, "repeats": self.repeats,
                "p_mcnemar": self.p_mcnemar,
                "fixed_ids": [f"{s}:{i}" for s, i in self.fixed], "broken_ids": [f"{s}:{i}" for s, i in self.broken]}


def paired_comparison_of(first: Group, second: Group) -> PairedView:
    """``second`` against ``first`` on the same data set, each question once (`pair_once`)."""
    a, b = outcomes_of(first.rows), outcomes_of(second.rows)
    pairing = pair_once(a, b)
    keys = pairing.keys
    return PairedView(
        dataset=first.dataset, first=first.config, second=second.config,
        both_right=[k for k in keys if a[k] and b[k]], fixed=[k for k in keys if b[k] and not a[k]],
        broken=[k for k in keys if a[k] and not b[k]], both_wrong=[k for k in keys if not a[k] and not b[k]],
        unpaired=pairing.unpaired, repeats=pairing.repeats)


def compare_markdown(view: PairedView) -> list[str]:
    """The report's section: the 2x2 table, fixed N and broken M, McNemar, and the link to the page."""
    table = ["| | " + f"`{view.second}` right | `{view.second}` wrong |", "|---|---|---|",
             f"| `{view.first}` right | both right: {len(view.both_right)} | broken: {len(view.broken)} |",
             f"| `{view.first}` wrong | fixed: {len(view.fixed)} | both wrong: {len(view.both_wrong)} |"]
    unpaired = f" ({view.unpaired} answered by only one of them are left out)" if view.unpaired else ""
    if view.repeats:
        unpaired += (f" ({view.repeats} answers of questions another seed also drew are left out: each question "
                     f"counts once, at its first seed)")
    return [f"## Paired comparison on {view.dataset}: `{view.second}` against `{view.first}`", "",
            f"On the {view.n} questions both answered{unpaired}: **fixed {len(view.fixed)}** (only "
            f"`{view.second}` right) and **broken {len(view.broken)}** (only `{view.first}` right); exact McNemar "
            f"p = {view.p_mcnemar:.3f} on the {len(view.fixed) + len(view.broken)} discordant questions. A failed "
            f"question counts as wrong.", "", *table, "",
            f"Each fixed and broken question, with both deliberations side by side: [{COMPARE_PAGE}]({COMPARE_PAGE}).",
            ""]


def _changes(row: ResultRow) -> str:
    """Who changed their mind, turn by turn (``agent_2: B → C → C``), from the row's votes per turn."""
    moved = [(agent, turns) for agent, turns in (votes_by_turn(row) or {}).items() if len({t for t in turns if t}) > 1]
    if not moved:
        return "<p>No one changed their mind.</p>"
    return "<ul>" + "".join(f"<li>{_e(agent)}: {' → '.join(_e(t or '—') for t in turns)}</li>"
                            for agent, turns in moved) + "</ul>"


def _leader(row: ResultRow) -> str:
    """The leader's interventions the record holds: its tie-break and its correction."""
    found = deliberation(row)
    if found is None:
        return ""
    said = []
    if found.tie is not None:
        said.append(f"tie {', '.join(map(str, found.tie.tied))} resolved by the {found.tie.resolved_by}: "
                    f"{found.tie.answer}" + (f" ({found.tie.reason})" if found.tie.reason else ""))
    if found.leader_override is not None:
        o = found.leader_override
        said.append(f"correction: {o.original} → {o.answer}" + (f" ({o.flaw})" if o.overridden else " (upheld)"))
    return ("<h4>Leader</h4><ul>" + "".join(f"<li>{_e(s)}</li>" for s in said) + "</ul>") if said else ""


def _side(label: str, row: ResultRow | None) -> str:
    if row is None:
        return f'<div class="side"><h3>{_e(label)}</h3><p>not answered</p></div>'
    verdict = "failed" if row.failed else "right" if row.correct else "wrong"
    return (f'<div class="side"><h3>{_e(label)}: {_e(row.prediction or "no answer")} ({verdict})</h3>'
            f"{_vote(row)}<h4>Who changed their mind</h4>{_changes(row)}{_challenges(row)}{_leader(row)}"
            f"{_team(row)}</div>")


_PAIR_CSS = (".pair{display:flex;gap:1em;align-items:flex-start}.side{flex:1;min-width:0;border:1px solid #ccc;"
             "padding:.5em;border-radius:4px}.side h3{margin-top:0}")


def compare_html(view: PairedView, rows_of: Callable[[str, set[Key]], Iterable[ResultRow]]) -> Iterator[str]:
    """The page, chunk by chunk: the 2x2 table, then each fixed and each broken question with both
    deliberations side by side. ``rows_of(label, keys)`` reads the full rows of one configuration."""
    wanted = set(view.fixed) | set(view.broken)
    rows = {label: {(str(r.seed), r.id): r for r in rows_of(label, wanted)} for label in (view.first, view.second)}
    yield ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
           '<meta name="viewport" content="width=device-width, initial-scale=1">'
           f"<title>{_e(view.second)} against {_e(view.first)}</title><style>{_CSS}{_PAIR_CSS}</style></head><body>"
           f"<main><h1>{_e(view.second)} against {_e(view.first)} on {_e(view.dataset)}</h1>"
           f"<p>On the {view.n} questions both answered: fixed {len(view.fixed)}, broken {len(view.broken)}; exact "
           f"McNemar p = {view.p_mcnemar:.3f}.</p>")
    yield _table(["", f"{view.second} right", f"{view.second} wrong"],
                 [[f"{view.first} right", f"both right: {len(view.both_right)}", f"broken: {len(view.broken)}"],
                  [f"{view.first} wrong", f"fixed: {len(view.fixed)}", f"both wrong: {len(view.both_wrong)}"]])
    for title, keys in ((f"Fixed: only {view.second} right", view.fixed),
                        (f"Broken: only {view.first} right", view.broken)):
        yield f"<h2>{_e(title)} ({len(keys)})</h2>"
        for key in keys:
            first, second = rows[view.first].get(key), rows[view.second].get(key)
            shown = second or first
            head = (f'<details open id="{html.escape(f"{key[0]}-{key[1]}")}"><summary>question {_e(key[1])} '
                    f"· seed {_e(key[0])}</summary>")
            # the options with the gold marked; each side says what it predicted
            stem = (_stem(shown) + _options(shown.model_copy(update={"prediction": None}))) if shown is not None else ""
            yield (f'{head}{stem}<div class="pair">{_side(view.first, first)}{_side(view.second, second)}</div>'
                   "</details>")
    yield "</main></body></html>\n"
