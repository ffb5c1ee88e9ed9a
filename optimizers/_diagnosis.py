"""Where a deliberation went wrong, read from its typed record (pure functions).

The record is the teamwork program's `Deliberation`, or a peer system's `PeerRecord`, which has no
tie-break, challenges, trust or leader's review: those parts then read as "did not happen". Each
``*_notes`` function speaks about its part of the deliberation only, so one behaviour's feedback never
mixes in another's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TypeAlias

from teammed.deliberation import Deliberation
from teammed.results import PeerRecord

__all__ = ["scope_of", "diagnose"]

Record: TypeAlias = Deliberation | PeerRecord

# Named predictors (``leader.resolve_tie.predict``) by the part of the deliberation they drive.
_SCOPE_BY_PREFIX = (
    ("leader.resolve_tie.", "tie"),
    ("leader.correct.", "override"),
    ("assessment.", "r2"),
    ("monitoring.", "challenges"),
    ("discussion.", "discussion"),
    ("leader.mediate.", "discussion"),
    ("leader.grade.", "trust"),
)


def scope_of(pred_name: str | None) -> str:
    """The part of the deliberation a named predictor is responsible for ("all" when unnamed)."""
    if not pred_name:
        return "all"
    # recruitment, facts, report, closed loop: they shape context, judged by the outcome
    return next((scope for prefix, scope in _SCOPE_BY_PREFIX if pred_name.startswith(prefix)), "outcome")


def _firsts(record: Record | None, *, final: bool = False) -> dict[str, str]:
    """Each agent's first choice in R2 (``final``: at the end)."""
    if record is None:
        return {}
    if isinstance(record, PeerRecord):
        return {str(v.agent): v.choice or "?" for v in (record.final if final else record.r2)}
    if final:
        return {v.agent: v.first or (v.ranking[0] if v.ranking else "?") for v in record.final}
    return {a.agent: a.ranking[0] if a.ranking else "?" for a in record.r2}


def _plurality(choices: Sequence[str]) -> str | None:
    """The single most common choice, or None when the top is shared."""
    top = Counter(choices).most_common(2)
    if not top or (len(top) == 2 and top[0][1] == top[1][1]):
        return None
    return top[0][0]


def _listing(firsts: Mapping[str, str]) -> str:
    return ", ".join(f"{agent}: {choice}" for agent, choice in firsts.items())


def r2_notes(record: Record, answer: str | None, gold: str) -> list[str]:
    firsts = _firsts(record)
    if not firsts:
        return ["no round-2 assessments were recorded"]
    right = [a for a, c in firsts.items() if c == gold]
    if not right:
        return [f"wrong from the start: no agent ranked the gold {gold} first in R2 ({_listing(firsts)})"]
    if len(right) == len(firsts):
        return [f"every agent ranked the gold {gold} first in R2"]
    return [f"in R2 {len(right)} of {len(firsts)} agents ranked the gold {gold} first ({_listing(firsts)})"]


def discussion_notes(record: Record, answer: str | None, gold: str) -> list[str]:
    if isinstance(record, Deliberation) and record.early_consensus:
        verdict = "right" if answer == gold else f"wrong (gold {gold})"
        return [f"the R2 first choices agreed on {answer}, so the discussion was skipped; that was {verdict}"]
    r2_top = _plurality(list(_firsts(record).values()))
    notes = []
    if answer != gold and r2_top == gold:
        notes.append(f"right at R2 (majority first choice was the gold answer {gold}) but talked out of it "
                     f"in R3 (final answer {answer})")
    elif answer == gold and r2_top != gold:
        notes.append(f"the discussion brought the team round to the gold {gold} "
                     f"(R2 majority: {r2_top or 'split'})")
    elif answer == gold:
        notes.append(f"the team held the gold {gold} through the discussion")
    else:
        notes.append(f"wrong before and after the discussion (R2 majority: {r2_top or 'split'}; "
                     f"final {answer}; gold {gold})")
    for agent, votes in (record.votes_by_turn or {}).items():
        if len(votes) > 1 and votes[0] == gold and votes[-1] != gold:
            notes.append(f"{agent} moved away from the gold {gold} to {votes[-1]} during the discussion")
        elif len(votes) > 1 and votes[0] != gold and votes[-1] == gold:
            notes.append(f"{agent} moved from {votes[0]} to the gold {gold} during the discussion")
    return notes


def challenge_notes(record: Record, answer: str | None, gold: str) -> list[str]:
    challenges = record.challenges if isinstance(record, Deliberation) else []
    if not challenges:
        return ["no challenge was raised on this question"]
    notes = []
    for ch in challenges:
        who, before, after = f"{ch.agent} (turn {ch.turn})", ch.choice_before, ch.choice_after
        verdict = ch.verdict
        if before == gold and after != gold:
            notes.append(f"a challenged agent switched away from the correct answer: {who} moved from "
                         f"the gold {gold} to {after} (verdict {verdict})")
        elif before != gold and after == gold:
            notes.append(f"the challenge moved {who} from {before} to the gold {gold} (verdict {verdict})")
        elif before == gold:
            notes.append(f"{who} held the gold {gold} under challenge (verdict {verdict})")
        else:
            notes.append(f"{who} kept the wrong {after} under challenge (gold {gold}); the concern did "
                         f"not expose the error (verdict {verdict})")
    return notes


def tie_notes(record: Record, answer: str | None, gold: str) -> list[str]:
    tie = record.tie if isinstance(record, Deliberation) else None
    if tie is None:
        return ["the vote was not tied on this question"]
    tied, chose = tie.tied, tie.answer
    breaker = "the leader" if tie.resolved_by == "leader" else "the tie-break rule"
    if gold not in tied:
        return [f"the vote tied between {', '.join(tied)}; the gold {gold} was not among them, so no "
                f"tie-break could be right"]
    if chose == gold:
        return [f"{breaker} broke a tie the right way (tied {', '.join(tied)}; chose the gold {gold})"]
    return [f"{breaker} broke a tie the wrong way (tied {', '.join(tied)}; chose {chose}; gold {gold})"]


def trust_notes(record: Record, answer: str | None, gold: str) -> list[str]:
    trust = (record.trust or {}) if isinstance(record, Deliberation) else {}
    finals = _firsts(record, final=True)
    ranked = sorted((a for a in finals if a in trust), key=lambda a: -trust[a])
    if not ranked:
        return ["trust scores were not used on this question"]
    top, bottom = ranked[0], ranked[-1]
    if finals[top] == gold:
        note = f"the most trusted agent ({top}, {trust[top]:.2f}) finished on the gold {gold}"
    else:
        note = (f"the most trusted agent ({top}, {trust[top]:.2f}) finished on the wrong {finals[top]} "
                f"(gold {gold})")
    if top != bottom and finals[bottom] == gold and finals[top] != gold:
        note += f", while the least trusted ({bottom}, {trust[bottom]:.2f}) had the gold"
    return [note]


def override_notes(record: Record, answer: str | None, gold: str) -> list[str]:
    """The leader's correction authority: did its review keep, spoil or fix the team's answer?"""
    review = record.leader_override if isinstance(record, Deliberation) else None
    if review is None:
        return outcome_notes(record, answer, gold)
    original, new = review.original, review.answer
    if not review.overridden:
        verdict = "right" if original == gold else f"wrong (gold {gold}); a flaw went unnoticed"
        return [f"the leader upheld the team's {original}, which was {verdict}"]
    flaw = review.flaw or "no flaw stated"
    if new == gold:
        return [f"the leader rightly overrode the team's {original} with the gold {gold} ({flaw})"]
    if original == gold:
        return [f"the leader overrode the team's correct {original} with {new}: the stated flaw ({flaw}) was wrong"]
    return [f"the leader overrode the team's wrong {original} with {new}, also wrong (gold {gold}; {flaw})"]


def outcome_notes(record: Record | None, answer: str | None, gold: str) -> list[str]:
    r2, final = _firsts(record), _firsts(record, final=True)
    counts = (f"; gold first for {sum(c == gold for c in r2.values())}/{len(r2)} agents in R2 and "
              f"{sum(c == gold for c in final.values())}/{len(final)} at the end") if r2 else ""
    if answer == gold:
        return [f"correct: the team chose the gold {gold}{counts}"]
    return [f"wrong: the team chose {answer} (gold {gold}){counts}"]


def _all_notes(record: Record | None, answer: str | None, gold: str) -> list[str]:
    """Every diagnosis that applies, most decisive first; just "correct" when it went right."""
    if answer == gold:
        return ["correct"]
    if record is None:
        return [f"wrong: the team chose {answer} (gold {gold}) and left no deliberation record"]
    notes = [n for n in override_notes(record, answer, gold) if "overrode the team's correct" in n]
    notes += [n for n in tie_notes(record, answer, gold) if "wrong way" in n]
    notes += [n for n in challenge_notes(record, answer, gold) if n.startswith("a challenged agent switched")]
    notes += [n for n in discussion_notes(record, answer, gold)
              if n.startswith(("right at R2", "the R2 first"))]
    notes += [n for n in r2_notes(record, answer, gold) if n.startswith("wrong from the start")]
    return notes or outcome_notes(record, answer, gold)


_BY_SCOPE = {
    "all": _all_notes,
    "r2": r2_notes,
    "discussion": discussion_notes,
    "challenges": challenge_notes,
    "tie": tie_notes,
    "trust": trust_notes,
    "override": override_notes,
    "outcome": outcome_notes,
}


def diagnose(record: Record | None, *, answer: str | None, gold: str, scope: str = "all") -> str:
    """Feedback text for one question: what happened in ``scope`` and how it bore on the gold
    (``record`` None: the system left none)."""
    if scope not in _BY_SCOPE:
        raise ValueError(f"unknown feedback scope {scope!r}; use one of {', '.join(_BY_SCOPE)}")
    if record is None:
        return outcome_notes(None, answer, gold)[0] if scope != "all" else _all_notes(None, answer, gold)[0]
    return "; ".join(_BY_SCOPE[scope](record, answer, gold))
