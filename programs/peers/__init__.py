"""Peer systems: the baselines and published team designs teamwork is compared against.

Every system is a `dspy.Module` with the `TeamworkProgram` contract: ``forward(question,
options, context=None)`` returns a `dspy.Prediction` with ``answer`` (always a valid
letter), ``rationale``, ``confidence`` (High/Medium/Low), ``record`` and ``transcript``.
Build one by name with `build_system`; the names are those of `teammed.systems.registry()`.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import dspy

from teammed.errors import ConfigError
from teammed.programs.peers.adaptive import AdaptiveTeam
from teammed.programs.peers.baselines import FewShot, SingleAgentCoT, ZeroShot
from teammed.programs.peers.consultation import ConsultationTeam
from teammed.programs.peers.kamac import KnowledgeDrivenTeam
from teammed.programs.peers.mdagents import AdaptiveComplexity
from teammed.programs.peers.voting import ConsensusVote, MajorityVote
from teammed.systems import registry, takes_examples

__all__ = [
    "SYSTEMS",
    "build_system",
    "build_with_examples",
    "ZeroShot",
    "FewShot",
    "SingleAgentCoT",
    "AdaptiveComplexity",
    "KnowledgeDrivenTeam",
    "ConsultationTeam",
    "MajorityVote",
    "ConsensusVote",
    "AdaptiveTeam",
]

# Each peer system's class by name, read from the registry (teammed.systems): the built-ins and any a
# package registers.
SYSTEMS: dict[str, Callable[..., dspy.Module]] = {
    name: system.program_class() for name, system in registry().items() if name != "teamwork"}


def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return f"{hint} Available: {', '.join(choices) or 'none'}."


def build_system(name: str, **kwargs: Any) -> dspy.Module:
    """The peer system registered as ``name``, built with ``kwargs``.

    Raises `ConfigError` for an unknown name or a parameter the system does not take, naming
    the closest match and the alternatives, and for a parameter value out of bounds.
    """
    systems = registry()
    if name not in systems:
        raise ConfigError(f"unknown system {name!r}.{_suggest(name, list(systems))}")
    factory = systems[name].program_class()
    # dspy's metaclass hides a class's own signature: read it from __init__.
    target = vars(factory).get("__init__", factory) if isinstance(factory, type) else factory
    accepted = [p for p in inspect.signature(target).parameters if p != "self"]
    for key in kwargs:
        if key not in accepted:
            raise ConfigError(f"system {name!r} takes no parameter {key!r}.{_suggest(key, accepted)}")
    return factory(**kwargs)


def build_with_examples(name: str, pool: Sequence[Any], *, seed: int = 0, **kwargs: Any) -> dspy.Module:
    """`build_system`, given the labelled questions of ``pool`` (`teammed.types.Question`) as worked examples,
    drawn by ``seed``, when the system takes them (its registration's ``examples``)."""
    parameter = takes_examples(name)
    if parameter is None:
        return build_system(name, **kwargs)
    examples = [{"question": q.question, "options": dict(q.options), "answer": q.answer_idx, "context": q.context}
                for q in pool if q.answer_idx]
    return build_system(name, **{parameter: examples, "seed": seed}, **kwargs)


def __getattr__(name: str) -> Any:
    from teammed.programs.peers import baselines

    if name in baselines.DEPRECATED:  # ChainOfThought -> SingleAgentCoT, warned
        return baselines.deprecated_alias(__name__, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
