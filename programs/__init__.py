"""teammed's programs for Python users: the teamwork program, its configs and presets, the peer systems.

Every system is a plain `dspy.Module`: call it with ``question=``, ``options=`` (letters A, B,
... to texts), optionally ``context=`` and ``image=``; it returns a `dspy.Prediction` with
``answer`` (a letter), ``rationale``, ``confidence``, ``record`` and ``transcript``. It runs
under any DSPy LM (a plain ``dspy.LM`` works); when no adapter is configured it uses
teammed's `SchemaAdapter` (schema-constrained JSON that never fails a question on parsing),
and `teammed.usage.track()` counts its calls and tokens.

    import dspy
    from teammed.programs import TeamworkProgram, preset

    program = TeamworkProgram(preset("leadership"))
    with dspy.context(lm=dspy.LM("openai/gpt-4o-mini")):
        print(program(question="...", options={"A": "...", "B": "..."}).answer)

Save with ``program.save("p.json")`` (DSPy's state plus the config; ``teammed run --program
p.json`` reads it) and load with ``program.load("p.json")`` or `load_program`.
"""

from __future__ import annotations

import importlib
from typing import Any

from teammed.lazy import lazy_exports

__all__ = [
    # the teamwork program and how to configure it
    "TeamworkProgram",
    "TeamworkConfig",
    "PRESETS",
    "COMPONENTS",
    "preset",
    "config_from_components",
    # peer systems (every system by name: teammed.systems.registry())
    "SYSTEMS",
    "build_system",
    "ZeroShot",
    "FewShot",
    "SingleAgentCoT",
    "AdaptiveComplexity",
    "KnowledgeDrivenTeam",
    "ConsultationTeam",
    "MajorityVote",
    "ConsensusVote",
    "AdaptiveTeam",
    # building blocks
    "Behaviour",
    "SchemaAdapter",
    "validated_options",
    "save_program",
    "load_program",
    # the typed deliberation record (``prediction.record`` of the teamwork program)
    "Deliberation",
]

# Lazy: ``import teammed.programs.x`` stays cheap and free of import cycles.
_WHERE = {
    "TeamworkProgram": "teammed.programs.teamwork",
    "TeamworkConfig": "teammed.config",
    "PRESETS": "teammed.config",
    "COMPONENTS": "teammed.config",
    "preset": "teammed.config",
    "config_from_components": "teammed.config",
    "Behaviour": "teammed.programs.behaviour",
    "SchemaAdapter": "teammed.adapter",
    "validated_options": "teammed.programs.options",
    "save_program": "teammed.programs.persist",
    "load_program": "teammed.programs.load",
    "Deliberation": "teammed.deliberation",
    **{name: "teammed.programs.peers" for name in __all__[6:17]},
}


_exported, __dir__ = lazy_exports(__name__, _WHERE, globals())


def __getattr__(name: str) -> Any:
    if name == "ChainOfThought":  # deprecated (one release): not cached, so every use warns
        return importlib.import_module("teammed.programs.peers.baselines").deprecated_alias(__name__, name)
    return _exported(name)
