"""``--pilot K``: K questions of each part of a command run for real, so that its price rests on the model.

A dry run fills every answer to a table's lengths (the model family's, `teammed.estimate.verbosity_for`)
and, where a system's path depends on the model's answers, can only bracket it. A pilot sends the first
K questions of each part (each cell of a run or a reproduction; the dearest configuration of a compile,
search or tune) to the real backend, and measures:

- each behaviour's mean completion tokens (the answer lengths the plan then prices every call with);
- each part's billable tokens per question, which place it between the cheapest and the dearest
  path the stand-in finds (its *share*): the expected figure is that share of the way, and its
  interval comes from an exact (Clopper-Pearson) bound on K questions.

The pilot is billed, and the plan says so before it starts and adds its cost as a line of its own. Its
answers go through the response cache, so the real run reads them instead of paying for them again
(unless the cache is off, which the plan then says).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from teammed.errors import WorkFailed

if TYPE_CHECKING:
    from teammed.experiments.specs import BackendSpec
    from teammed.types import Question

__all__ = ["Pilot", "run_pilot", "share_interval"]

logger = logging.getLogger(__name__)


class Pilot(BaseModel):
    """What K real questions per part measured (billable figures; ``failed`` questions count their calls)."""

    model_config = ConfigDict(frozen=True)

    k: int
    questions: int
    failed: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    usd: float | None
    cached: bool  # the answers were written to the response cache, for the real run to read
    lengths: dict[str, float]  # behaviour -> mean completion tokens of its calls
    behaviour_calls: dict[str, int]
    tokens: dict[str, tuple[int, ...]]  # part -> billable tokens of each of its pilot questions

    def lengths_source(self) -> str:
        measured = ", ".join(f"{name} {mean:.0f}" for name, mean in sorted(self.lengths.items()))
        return (f"answer lengths: measured by the pilot ({sum(self.behaviour_calls.values())} calls on "
                f"{self.questions} questions; mean completion tokens {measured}); a behaviour it did not call "
                f"takes the model family's (teammed.estimate.verbosity_for)")

    def cost_line(self) -> str:
        price = "" if self.usd is None else f", ${self.usd:.4f}"
        kept = ("its answers are in the response cache: the run reads them instead of paying again" if self.cached
                else "the response cache is off, so the run pays for these questions again")
        failed = f", {self.failed} failed" if self.failed else ""
        return (f"pilot (already spent): {self.questions} questions{failed}, {self.calls:,} calls, "
                f"{self.prompt_tokens:,}+{self.completion_tokens:,} tokens{price}; {kept}")


class _Lengths:
    """A `teammed.usage` listener: the completion tokens of every call, by behaviour."""

    def __init__(self) -> None:
        self.seen: dict[str, list[int]] = {}
        self.lock = threading.Lock()

    def call_started(self, signature: str) -> None:
        pass

    def call_finished(self, signature: str, *, completion_tokens: int = 0, **_: Any) -> None:
        with self.lock:
            self.seen.setdefault(signature, []).append(int(completion_tokens))


def run_pilot(backend: BackendSpec, parts: Sequence[tuple[str, Callable[[], Any], Sequence[Question]]], k: int,
              *, price: tuple[float, float] | None) -> Pilot:
    """Run the first ``k`` questions of each ``(name, program factory, questions)`` part on ``backend`` for
    real, one at a time, and measure them. Raises `WorkFailed` when every pilot question failed."""
    from teammed import usage
    from teammed.answering import answer
    from teammed.experiments._backend import open_backends

    if k < 1:
        raise WorkFailed(f"--pilot takes a number of questions of at least 1 (got {k})")
    chosen = [(name, factory, list(questions)[:k]) for name, factory, questions in parts]
    total = sum(len(qs) for _, _, qs in chosen)
    model = backend.models[0] if backend.models else "the given LM"
    logger.warning("pilot: %d question(s) of each of %d part(s), %d in all, are sent to %s for real and billed",
                   k, len(chosen), total, model)
    listener = _Lengths()
    tokens: dict[str, tuple[int, ...]] = {}
    calls = prompt = completion = failed = 0
    with open_backends(backend, command="pilot") as deployments, usage.listen(listener):
        lm = deployments[0].lm
        for name, factory, questions in chosen:
            spent = []
            for question in questions:
                row = answer(factory(), question, lm).row
                failed += int(row.failed)
                calls += row.calls
                prompt += row.prompt_tokens
                completion += row.completion_tokens
                spent.append(row.prompt_tokens + row.completion_tokens)
            tokens[name] = tuple(spent)
    if total and failed == total:
        raise WorkFailed(f"every one of the pilot's {total} questions failed, so nothing was measured; run one with "
                         f"`teammed ask` to see why, and fix the backend before pricing")
    usd = None if price is None else prompt * price[0] + completion * price[1]
    return Pilot(k=k, questions=total, failed=failed, calls=calls, prompt_tokens=prompt, completion_tokens=completion,
                 usd=usd, cached=bool(backend.cache),
                 lengths={s: sum(v) / len(v) for s, v in sorted(listener.seen.items()) if v},
                 behaviour_calls={s: len(v) for s, v in sorted(listener.seen.items())}, tokens=tokens)


def share_interval(observed: Sequence[int], low: float, high: float, *, alpha: float = 0.05
                   ) -> tuple[float, float, float]:
    """Where the pilot's questions lie between the cheapest (``low``) and the dearest (``high``) path, in
    billable tokens per question: the mean share and an exact two-sided ``1 - alpha`` interval for it.

    Each question's share is its position in [low, high], clipped; the interval is Clopper-Pearson's on
    their sum rounded outwards (down for the lower bound, up for the upper), a conservative bound for a
    mean of values in [0, 1]."""
    from teammed.optimizers.adaptive import clopper_pearson

    if not observed:
        raise ValueError("no pilot question to place")
    width = high - low
    shares = [0.5 if width <= 0 else min(1.0, max(0.0, (t - low) / width)) for t in observed]
    n, total = len(shares), sum(shares)
    lower = clopper_pearson(math.floor(total + 1e-9), n, alpha / 2)[0]
    upper = clopper_pearson(math.ceil(total - 1e-9), n, alpha / 2)[1]
    return total / n, lower, upper
