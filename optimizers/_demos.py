"""Demos are built only from outputs the model gave cleanly: never from a fallback or a repair.

Bootstrapping optimizers keep every step of a trace whose final answer was right, and a team reaches the
right answer even when one agent's output was unreadable, which `SchemaAdapter` repairs or fills with
fallback values (counted in the current `Usage`). A demo built from it would teach the model to answer that
way, so compile notes each such call (`NotingAdapter`), drops its step from the trace before DSPy builds
demos (`clean_traces`), and sweeps the compiled program for any demo left (`drop_unsound_demos`). Outputs
the program repairs after the call (a ranking naming a letter twice, a letter that names no option) are
told by the call's own output schema, and dropped the same way.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

import dspy

from teammed import usage
from teammed.adapter import SchemaAdapter
from teammed.schema import output_schema

__all__ = ["DegradedOutputs", "NotingAdapter", "clean_traces", "drop_unsound_demos", "fits_schema"]

logger = logging.getLogger(__name__)


def _key(values: Mapping[str, Any]) -> str:
    """One call's inputs and outputs as text, equal for the trace step and the demo built from it."""
    return json.dumps({k: v for k, v in values.items() if k != "augmented"}, sort_keys=True, default=repr)


class DegradedOutputs:
    """The calls (inputs and outputs) whose output the adapter repaired or filled with fallbacks."""

    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._lock = threading.Lock()

    def note(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> None:
        key = _key({**inputs, **outputs})
        with self._lock:
            self._keys.add(key)

    def __contains__(self, values: object) -> bool:
        if not isinstance(values, Mapping):
            return False
        key = _key(values)
        with self._lock:
            return key in self._keys


def _absorb(outer: usage.Usage, inner: usage.Usage) -> None:
    """Add ``inner``'s counts to ``outer`` (every counter and per-name count, whatever fields `Usage` has)."""
    with outer._lock:
        for name in (f.name for f in fields(usage.Usage) if not f.name.startswith("_")):
            mine, theirs = getattr(inner, name), getattr(outer, name)
            if isinstance(mine, dict):
                theirs.update({key: theirs.get(key, 0) + n for key, n in mine.items()})
            else:
                setattr(outer, name, theirs + mine)


class NotingAdapter(SchemaAdapter):
    """`SchemaAdapter` that notes, in ``degraded``, each call whose output it repaired or let fall back. Each
    call is counted in a `Usage` of its own, then added to the caller's, so a repair on another thread of the
    same question is never taken for this one's."""

    def __init__(self, degraded: DegradedOutputs, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.degraded = degraded

    def _noted(self, outer: usage.Usage | None, mine: usage.Usage, inputs: dict[str, Any],
               values: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if outer is not None:
            _absorb(outer, mine)
        if mine.repaired or mine.parse_failures:
            for outputs in values:
                self.degraded.note(inputs, outputs)
        return values

    def __call__(self, lm, lm_kwargs, signature, demos, inputs):  # type: ignore[no-untyped-def]
        outer = usage.current()
        with usage.track() as mine:
            values = super().__call__(lm, lm_kwargs, signature, demos, inputs)
        return self._noted(outer, mine, inputs, values)

    async def acall(self, lm, lm_kwargs, signature, demos, inputs):  # type: ignore[no-untyped-def]
        outer = usage.current()
        with usage.track() as mine:
            values = await super().acall(lm, lm_kwargs, signature, demos, inputs)
        return self._noted(outer, mine, inputs, values)


def _fits(value: Any, prop: Mapping[str, Any]) -> bool:
    if "enum" in prop:
        return value in prop["enum"]
    if prop.get("type") != "array":
        return True
    if not isinstance(value, list):
        return False
    if len(value) < prop.get("minItems", 0) or len(value) > prop.get("maxItems", len(value)):
        return False
    items = prop.get("items") or {}
    if "enum" in items and len(set(map(str, value))) != len(value):  # a ranking naming a letter twice
        return False
    return all(_fits(item, items) for item in value)


def fits_schema(signature: type[dspy.Signature], values: Mapping[str, Any]) -> bool:
    """Whether the outputs in ``values`` fit the output schema of the call its inputs make: every
    choice one of the call's options, every ranking each option once, every list of the asked size."""
    inputs = {name: values[name] for name in signature.input_fields if name in values}
    properties = output_schema(signature, inputs)["properties"]
    return all(_fits(values[name], properties[name]) for name in signature.output_fields
               if name in values and name in properties)


def _sound(predictor: Any, values: Mapping[str, Any], degraded: DegradedOutputs) -> bool:
    signature = getattr(predictor, "signature", None)
    return values not in degraded and (signature is None or fits_schema(signature, values))


def clean_traces(metric: Callable[..., Any], degraded: DegradedOutputs) -> Callable[..., Any]:
    """``metric`` that first removes from a bootstrapping trace every step whose output was repaired,
    fell back or does not fit its schema: DSPy builds its demos from the steps left in that same
    list. A trace left with no step scores 0, so bootstrapping goes on to another example."""

    def metric_on_clean_steps(example: dspy.Example, pred: Any, trace: Any = None) -> Any:
        if trace is None:  # an evaluation, not bootstrapping
            return metric(example, pred, trace)
        # a step is (predictor, inputs, outputs)
        kept = [step for step in trace if _sound(step[0], {**step[1], **step[2]}, degraded)]
        dropped = len(trace) - len(kept)
        if dropped:
            logger.info("example %s: %d of %d steps needed a repair or fallback; no demo is built from them",
                        example.get("id", "?"), dropped, len(trace))
            trace[:] = kept
            if not kept:
                return 0.0
        return metric(example, pred, trace)

    metric_on_clean_steps.__name__ = getattr(metric, "__name__", "metric")
    return metric_on_clean_steps


def drop_unsound_demos(program: dspy.Module, degraded: DegradedOutputs) -> dict[str, int]:
    """Remove from ``program`` each bootstrapped demo built from a repaired, fallen-back or
    schema-breaking output; returns how many each predictor lost (labelled demos are kept)."""
    dropped: dict[str, int] = {}
    for name, predictor in program.named_predictors():
        kept = [demo for demo in predictor.demos if not _augmented(demo) or _sound(predictor, dict(demo), degraded)]
        if len(kept) < len(predictor.demos):
            dropped[name] = len(predictor.demos) - len(kept)
            predictor.demos = kept
    if dropped:
        logger.warning("dropped %d demos built from outputs that needed a repair or fallback (%s)",
                       sum(dropped.values()), ", ".join(f"{k}: {v}" for k, v in dropped.items()))
    return dropped


def _augmented(demo: Any) -> bool:
    return bool(demo.get("augmented", False)) if hasattr(demo, "get") else False
