"""The systems `--system` runs, registered once: each a program and its record model.

A `System` names its `dspy.Module` class and the pydantic model of the record it writes, as
``"module:attribute"`` paths imported on first use (so checking a name imports no DSPy). The
built-in systems are `BUILTIN`; a package adds its own under the ``teammed.systems`` entry-point
group, each entry point naming a `System`:

    [project.entry-points."teammed.systems"]
    debate = "my_package.debate:SYSTEM"

The names `--system` accepts, the record a result row is typed with, the systems that take
worked examples and the rebuilding of a saved program are all read from `registry()`.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from teammed.errors import ConfigError

__all__ = ["System", "BUILTIN", "ENTRY_POINT_GROUP", "registry", "names", "record_model", "takes_examples"]

ENTRY_POINT_GROUP = "teammed.systems"


@dataclass(frozen=True)
class System:
    """One system: its name, its program class, its record model and the parameter taking worked examples.

    ``record`` None: the system has no model, and a row keeps its record as written (``custom_record``).
    A record model declares ``system: Literal[name]`` and forbids keys it does not declare."""

    name: str
    program: str
    record: str | None = None
    examples: str | None = None  # the parameter that takes worked examples (few_shot's trainset)

    def program_class(self) -> Any:
        return _load(self.program, f"system {self.name!r}'s program")

    def record_model(self) -> Any:
        return None if self.record is None else _load(self.record, f"system {self.name!r}'s record model")


def _load(path: str, what: str) -> Any:
    module, _, attribute = path.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{what} {path!r} cannot be imported ({exc}); check the system's registration") from exc


_PEERS = "teammed.programs.peers"
BUILTIN: tuple[System, ...] = (
    System("teamwork", "teammed.programs.teamwork:TeamworkProgram", "teammed.deliberation:Deliberation"),
    System("zero_shot", f"{_PEERS}.baselines:ZeroShot", "teammed.results:ZeroShotRecord"),
    System("few_shot", f"{_PEERS}.baselines:FewShot", "teammed.results:FewShotRecord", examples="trainset"),
    System("cot", f"{_PEERS}.baselines:SingleAgentCoT", "teammed.results:CotRecord"),
    System("mdagents", f"{_PEERS}.mdagents:AdaptiveComplexity", "teammed.results:MdagentsRecord",
           examples="examples"),
    System("kamac", f"{_PEERS}.kamac:KnowledgeDrivenTeam", "teammed.results:KamacRecord"),
    System("consultation", f"{_PEERS}.consultation:ConsultationTeam", "teammed.results:ConsultationRecord"),
    System("majority_vote", f"{_PEERS}.voting:MajorityVote", "teammed.results:MajorityVoteRecord"),
    System("consensus", f"{_PEERS}.voting:ConsensusVote", "teammed.results:ConsensusRecord"),
    System("adaptive", f"{_PEERS}.adaptive:AdaptiveTeam", "teammed.results:AdaptiveRecord"),
)


@functools.cache
def registry() -> Mapping[str, System]:
    """Every system by name: the built-ins, then those installed packages register (entry points).

    An entry point whose name is taken, or that does not load to a `System` of its own name, is
    refused with a message naming its package."""
    found = {s.name: s for s in BUILTIN}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        owner = ep.dist.name if ep.dist is not None else ep.value
        if ep.name in found:
            raise ConfigError(f"the package {owner!r} registers a system {ep.name!r}, a name already taken; "
                              f"rename its entry point in [project.entry-points.{ENTRY_POINT_GROUP!r}]")
        system = ep.load()
        if not isinstance(system, System) or system.name != ep.name:
            raise ConfigError(f"the entry point {ep.name!r} of {owner!r} ({ep.value}) must name a "
                              f"teammed.systems.System called {ep.name!r} (got {system!r})")
        found[ep.name] = system
    return found


def names() -> tuple[str, ...]:
    return tuple(registry())


def record_model(name: str | None) -> Any:
    """The record model of system ``name``; None for an unknown system or one without a model."""
    system = registry().get(name or "")
    return None if system is None else system.record_model()


def takes_examples(name: str) -> str | None:
    """The parameter through which system ``name`` takes worked examples; None when it takes none."""
    system = registry().get(name)
    return None if system is None else system.examples
