"""`AdaptiveTeam`: a single agent answers; the team deliberates only when its signal is low.

Stage 1 is the zero-shot single agent (one call). Its *signal* is its stated confidence (High
1.0, Medium 0.5, Low 0.0), or, with ``samples`` k > 1, the share of k answers (distinct
rollouts) that agree with the most common one. When the signal is below ``threshold`` the
question escalates to stage 2, the teamwork program in ``team``'s configuration, whose answer
stands. ``threshold=0`` never escalates (the single agent alone); ``threshold`` above 1 always
does (the static team plus one single-agent call).

The record names the stage that answered, the signal, and each stage's calls and tokens (as
the current `teammed.usage.Usage` counted them). A stage that fails fails the question: a
failed single agent is never replaced by the team's answer or the other way round.
`teammed.optimizers.adaptive` tunes ``threshold`` and ``team`` on the accuracy-cost front.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator
from typing import Any

import dspy
from pydantic import Field

from teammed import usage
from teammed.config import TeamworkConfig, preset
from teammed.programs.behaviour import Behaviour
from teammed.programs.peers._shared import PeerSystem, Settings, answer_letter, as_confidence, prediction, question_text
from teammed.programs.team import Transcript
from teammed.signatures.peer_single import DirectAnswer

__all__ = ["AdaptiveTeam", "SIGNAL_OF_CONFIDENCE", "signal_of"]

SIGNAL_OF_CONFIDENCE = {"High": 1.0, "Medium": 0.5, "Low": 0.0}


def signal_of(answers: list[str], confidences: list[str]) -> float:
    """Stage 1's signal: one answer's stated confidence, or the agreement share of several."""
    if len(answers) == 1:
        return SIGNAL_OF_CONFIDENCE[as_confidence(confidences[0])]
    return collections.Counter(answers).most_common(1)[0][1] / len(answers)


class AdaptiveSettings(Settings):
    threshold: float = Field(default=1.0, ge=0.0, le=1.01)
    samples: int = Field(default=1, ge=1, le=16)


class _Spent:
    """One stage's calls and tokens: the difference of the current usage across the stage."""

    def __init__(self) -> None:
        self.calls = self.prompt_tokens = self.completion_tokens = 0
        self.cost_usd = 0.0

    def as_dict(self, stage: str, answer: str) -> dict[str, Any]:
        return {"stage": stage, "answer": answer, "calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost_usd": round(self.cost_usd, 8)}


@contextlib.contextmanager
def _counted(counter: usage.Usage) -> Iterator[_Spent]:
    spent = _Spent()
    before = (counter.calls, counter.prompt_tokens, counter.completion_tokens, counter.cost_usd)
    yield spent
    spent.calls = counter.calls - before[0]
    spent.prompt_tokens = counter.prompt_tokens - before[1]
    spent.completion_tokens = counter.completion_tokens - before[2]
    spent.cost_usd = counter.cost_usd - before[3]


class AdaptiveTeam(PeerSystem):
    """A single agent, escalating to a team when its signal is below ``threshold`` (see the module)."""

    system_name = "adaptive"

    def __init__(self, team: TeamworkConfig | str | dspy.Module | None = None, threshold: float = 1.0,
                 samples: int = 1):
        """``team``: a configuration, a preset's name, or a teamwork program (a compiled one keeps its prompts)."""
        super().__init__()
        from teammed.programs.teamwork import TeamworkProgram

        settings = AdaptiveSettings.build("adaptive", threshold=threshold, samples=samples)
        self.threshold, self.samples = settings.threshold, settings.samples
        self.answer = Behaviour(DirectAnswer)
        if isinstance(team, TeamworkProgram):
            self.team = team
        else:
            self.team = TeamworkProgram(preset(team) if isinstance(team, str) else team or preset("all"))

    def forward(self, question: str, options: dict[str, str], context: str | None = None) -> dspy.Prediction:
        options = dict(options)
        counter = usage.current()
        with contextlib.ExitStack() as stack:
            if counter is None:  # called from Python without a tracked usage: count the stages here
                counter = stack.enter_context(usage.track())
            return self._deliberate(question, options, context, counter)

    def _deliberate(self, question: str, options: dict[str, str], context: str | None,
                    counter: usage.Usage) -> dspy.Prediction:
        text = question_text(question, context)
        with _counted(counter) as single:
            outs = [self.answer(question=text, options=options,
                                **({"config": {"rollout_id": i, "temperature": 1.0}} if self.samples > 1 else {}))
                    for i in range(self.samples)]
            letters = [answer_letter(o.answer, options, system="adaptive", behaviour=self.answer.name) for o in outs]
        confidences = [as_confidence(o.confidence) for o in outs]
        signal = signal_of(letters, confidences)
        first = collections.Counter(letters).most_common(1)[0][0]
        transcript = Transcript()
        for i, (letter, confidence) in enumerate(zip(letters, confidences, strict=True)):
            transcript.add("stage1", "answer", "", agent=f"single_{i + 1}", role="Medical Expert", choice=letter,
                           confidence=confidence)
        stages = [single.as_dict("single", first)]
        if signal >= self.threshold:
            transcript.add("stage1", "kept", f"signal {signal:g} >= threshold {self.threshold:g}: the single "
                           "agent's answer stands", signal=signal)
            return self._prediction(first, confidences[0], signal, stages, transcript, rationale=f"Answer {first}.")
        transcript.add("stage1", "escalated", f"signal {signal:g} < threshold {self.threshold:g}: the team "
                       "deliberates", signal=signal)
        with _counted(counter) as team:
            verdict = self.team(question=question, options=options, context=context)
        stages.append(team.as_dict("team", verdict.answer))
        transcript.events.extend(verdict.transcript)
        return self._prediction(verdict.answer, verdict.confidence, signal, stages, transcript,
                                rationale=verdict.rationale)

    def _prediction(self, answer: str, confidence: str, signal: float, stages: list[dict[str, Any]],
                    transcript: Transcript, *, rationale: str) -> dspy.Prediction:
        record = {"stage": stages[-1]["stage"], "signal": signal, "threshold": self.threshold,
                  "samples": self.samples, "stages": stages, "team": self.team.config.label()}
        return prediction(answer, rationale, confidence, record, transcript)
