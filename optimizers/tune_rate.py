"""What one call costs, for planning a ``tokens=`` or ``usd=`` budget (`teammed.optimizers.tune_plan`).

A ``tokens=``/``usd=`` budget is planned in calls at a *rate*: tokens (and dollars, prompt tokens at the
input price and answers at the output price) per call. Before the first call it is estimated as
``--dry-run`` estimates (`estimate_rate`, `teammed.estimate`: the widest configuration on the longest
questions against a stand-in LM, prompts counted with the model's tokenizer, answers at their measured
lengths); after stage 1's first batch it is measured (`measured_rate`), and the rest of the tune is
planned again with it (docs/commands/tune.md, budgets).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from teammed.errors import ConfigError
from teammed.types import Question

__all__ = ["CallRate", "estimate_rate", "measured_rate"]


@dataclass(frozen=True)
class CallRate:
    """Tokens and dollars per call (``usd`` None: no prices known), and where the figures come from.

    ``longest`` is how much dearer a call is on the longest question of the tune (held-out ones
    included) than on the longest tuning question, by the offline estimate: stage 1 measures the
    rate on tuning questions only, and the held-out proof may ask longer ones."""

    tokens: float
    usd: float | None
    source: str  # "estimated" (before any call) or "measured" (from finished cells)
    detail: str = ""
    longest: float = 1.0
    floor: float | None = None  # estimated: the cheapest a call can be there (no demos, one-token answers)

    def cheapest(self) -> CallRate:
        """This rate at its floor (itself when it has none): what no model's calls can undercut."""
        if self.floor is None:
            return self
        share = self.floor / max(self.tokens, 1e-12)
        return dataclasses.replace(self, tokens=self.floor, usd=None if self.usd is None else self.usd * share)


def estimate_rate(config: Mapping[str, Any], questions: Sequence[Question], *, max_tokens: int, demos: int,
                  prices: tuple[float, float] | None, n_questions: int = 2,
                  held_out: Sequence[Question] = (), model: str = "gpt-4o", api_base: str | None = None) -> CallRate:
    """The estimated rate (module docstring): ``config`` on the ``n_questions`` longest of ``questions`` and
    ``held_out``; ``longest`` compares it with the rate on the longest of ``questions`` alone."""
    if max_tokens <= 0:
        raise ConfigError("a tokens= or usd= budget needs a positive --max-tokens to bound each answer")
    everywhere = _longest([*questions, *held_out], n_questions)
    tuning = _longest(questions, n_questions)
    # each question is rendered once, whichever of the two sets it leads
    per_call = {q.id: _mean_call(config, q, max_tokens=max_tokens, demos=demos, model=model, api_base=api_base)
                for q in [*everywhere, *tuning]}
    worst = max((per_call[q.id] for q in everywhere), key=lambda c: c[0] + c[1])
    worst_tuning = max((per_call[q.id] for q in tuning), key=lambda c: c[0] + c[1])
    usd = worst[0] * prices[0] + worst[1] * prices[1] if prices is not None else None
    cheapest = max(sum(_mean_call(config, q, max_tokens=1, demos=0, model=model, api_base=api_base, lengths=1.0))
                   for q in everywhere)
    detail = (f"{len(everywhere)} longest question(s), the widest configuration rendered offline, prompts counted "
              f"with the model's tokenizer, answers at their measured lengths (max_tokens={max_tokens}), "
              f"{demos} demo(s) a predictor")
    return CallRate(math.ceil(sum(worst)), usd, "estimated", detail,
                    longest=max(1.0, math.ceil(sum(worst)) / math.ceil(sum(worst_tuning))), floor=math.floor(cheapest))


def _longest(questions: Sequence[Question], n: int) -> list[Question]:
    return sorted(questions, key=lambda q: (-_length(q), q.id))[:n]


def _mean_call(config: Mapping[str, Any], question: Any, *, max_tokens: int, demos: int, model: str,
               api_base: str | None, lengths: float | None = None) -> tuple[float, float]:
    """(prompt, answer) tokens of ``config``'s mean call on ``question`` (`teammed.estimate`), with ``demos``, each
    answer ``lengths`` tokens long (default: the model family's)."""
    from teammed.config import TeamworkConfig
    from teammed.estimate import estimate_program
    from teammed.programs.teamwork import TeamworkProgram

    try:
        found = estimate_program(lambda: TeamworkProgram(TeamworkConfig.build(**config)), [question], model=model,
                                 api_base=api_base, max_tokens=max_tokens, lengths=lengths)
    except Exception as exc:  # the program failed against the stand-in
        raise ConfigError(f"cannot estimate a call's tokens: the dry run on {question.id} failed ({exc}); give "
                          f"--budget calls=N instead") from None
    prompt, answer = found.prompt_tokens / found.calls, found.completion_tokens / found.calls
    return (demos + 1) * prompt + demos * answer, answer


def measured_rate(results: Sequence[Mapping[str, Any]], *, fallback: CallRate) -> CallRate:
    """The most tokens and dollars per call of any finished cell, times ``fallback.longest`` (the longest
    question may be a held-out one); ``fallback`` when no cell made a call. A backend that bills $0
    does not measure a price: the estimated dollars per call are kept."""
    billed = [r for r in results if float(r.get("calls", 0) or 0) > 0]
    if not billed:
        return fallback
    tokens = max(float(r.get("tokens", 0) or 0) / float(r["calls"]) for r in billed) * fallback.longest
    usd = (max(float(r.get("cost_usd", 0) or 0) / float(r["calls"]) for r in billed) * fallback.longest
           if fallback.usd is not None else None)
    kept = ""
    if usd is not None and usd <= 0:
        usd, kept = fallback.usd, "; $0 billed, so the estimated dollars a call are kept"
    scaled = f", times {fallback.longest:.2f} for the longest question" if fallback.longest > 1 else ""
    return CallRate(math.ceil(tokens), usd, "measured",
                    f"the most per call of {len(billed)} finished cell(s){scaled}{kept}", fallback.longest)


def _length(q: Question) -> int:
    return len(q.question) + len(q.context or "") + sum(len(v) for v in q.options.values())
