"""`SimulatedTeamLM`: a fake LM whose team accuracy follows a planted table of component effects.

For proving searches (tests and benchmarks), never a default. It answers every call with a
schema-valid output, like `ScriptedLM`, leaving a trace of each behaviour in its answers. A final
ranking reads, *from that request alone*, which components shaped its prompt (`infer_components`),
and puts the gold letter first when ``u_q < p(config) + noise(q, config)`` (a fixed wrong letter
otherwise): ``u_q`` is the question's latent difficulty, common to all configurations (so
comparisons are paired), and ``p`` comes from the `PlantedTable`. A single agent is right when
``v_q < single + noise``, where ``v_q`` is ``u_q`` with probability ``shared_difficulty`` and an
independent difficulty otherwise (fitted to published outcomes: `FITTED_SHARED_DIFFICULTY`; 1 is the
nested best case, ``strong_single_nested``), and tells the truth about its confidence with probability
``calibration`` (`CALIBRATIONS`), else says High, Medium or Low at random. Answers are a pure
function of the request and the seed, so no memo or cache can change a figure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from teammed.backends.scripted import ScriptedCall, ScriptedLM
from teammed.components import COMPONENTS, TABLE

__all__ = ["PlantedTable", "PLANTED_TABLES", "SimulatedTeamLM", "DEFAULT_TABLE", "FITTED_SHARED_DIFFICULTY",
           "infer_components",
           "simulated_questions", "answer_key", "CALIBRATIONS"]

_SMM_SAID = "(shared knowledge considered)"  # shared_mental_model's evidence in the history
_SINGLE = {"DirectAnswer", "ReasonedAnswer"}


def _unit(*parts: object) -> float:
    """A number in [0, 1) that depends only on ``parts`` (stable across processes and machines)."""
    digest = hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


# MedAgentsBench gpt-4o, MedQA test_hard, CoT vs MDAgents: CoT alone right on 13% (benchmarks/fit_simulated_world.py)
FITTED_SHARED_DIFFICULTY = 0.54


@dataclass(frozen=True)
class PlantedTable:
    """Accuracy of a configuration: ``base + sum(main) + sum(interactions whose parts are all on)``.

    ``noise`` is the half-width of the per-(question, configuration) uniform noise added to it.
    ``single`` is the single-agent baseline's accuracy; ``shared_difficulty`` the probability that a
    question's difficulty for the single agent is the team's (1: nested, the best case for a team).
    """

    base: float = 0.50
    main: Mapping[str, float] = field(default_factory=lambda: {
        "shared_mental_model": 0.06, "leadership": 0.05, "team_orientation": 0.0,
        "trust": -0.10, "mutual_monitoring": 0.06, "closed_loop": -0.05})
    interactions: Mapping[tuple[str, ...], float] = field(default_factory=lambda: {
        ("leadership", "team_orientation"): 0.12})
    noise: float = 0.04
    single: float = 0.45
    shared_difficulty: float = FITTED_SHARED_DIFFICULTY

    def accuracy(self, components: Iterable[str]) -> float:
        on = set(components)
        p = self.base + sum(v for k, v in self.main.items() if k in on)
        p += sum(v for parts, v in self.interactions.items() if set(parts) <= on)
        return min(1.0, max(0.0, p))

    def best(self, subsets: Sequence[Sequence[str]]) -> tuple[str, ...]:
        """The planted best of ``subsets`` (ties: fewer components, then canonical order)."""
        def rank(s: tuple[str, ...]) -> tuple[float, int, list[int]]:
            return round(self.accuracy(s), 9), -len(s), [-COMPONENTS.index(c) for c in s]

        return max((tuple(s) for s in subsets), key=rank)

    def describe(self) -> dict[str, Any]:
        return {"base": self.base, "main": dict(self.main), "noise": self.noise, "single": self.single,
                "shared_difficulty": self.shared_difficulty,
                "interactions": {"+".join(k): v for k, v in self.interactions.items()}}


DEFAULT_TABLE = PlantedTable()

# Harder worlds for `benchmarks/tune_simulated.py --table`: what a tuner can miss.
PLANTED_TABLES: dict[str, PlantedTable] = {
    "default": DEFAULT_TABLE,
    # shared mental model and mutual monitoring help only together, and stage 1 never runs them together
    "hidden_interaction": PlantedTable(
        main={"shared_mental_model": 0.0, "leadership": 0.02, "team_orientation": -0.03, "trust": -0.05,
              "mutual_monitoring": 0.0, "closed_loop": -0.05},
        interactions={("shared_mental_model", "mutual_monitoring"): 0.12}),
    # the default effects under noise of +-0.15 per question and configuration
    "noisy": PlantedTable(noise=0.15),
    # a strong single agent (right on 70%), the team's default effects on top: a team is worth
    # calling only for the questions the single agent gets wrong (`benchmarks/adaptive_simulated.py`)
    "strong_single": PlantedTable(single=0.70),
    # the same, nested: the single agent right only where the team is (a best case for escalating)
    "strong_single_nested": PlantedTable(single=0.70, shared_difficulty=1.0),
    # effects of about 2 points, the size of Table 1's differences between components
    "small_effects": PlantedTable(
        main={"shared_mental_model": 0.02, "leadership": 0.02, "team_orientation": 0.0, "trust": -0.02,
              "mutual_monitoring": 0.02, "closed_loop": -0.02},
        interactions={("leadership", "team_orientation"): 0.03}),
}


# How often a single agent's stated confidence tells the truth, by name (`SimulatedTeamLM`).
CALIBRATIONS: dict[str, float] = {"informative": 0.95, "weak": 0.5, "none": 0.0}


def infer_components(inputs: Mapping[str, Any]) -> tuple[str, ...]:
    """The components that shaped a final-ranking request, read from its inputs only: each component's
    `evidence` in the table (the team context holds "Shared knowledge:", the role a "; focus:" brief, the
    history "leader challenged", ...). A component without evidence is never inferred."""
    return tuple(c.name for c in TABLE if any(text in str(inputs.get(field, "")) for field, text in c.evidence))


class SimulatedTeamLM(ScriptedLM):
    """A `ScriptedLM` answering like a team whose accuracy is ``table`` (see the module docstring).

    ``answers`` maps a question's text (as the program sends it) to its gold letter; questions
    it does not know are answered with a fixed pseudo-random letter. ``seed`` draws the
    questions' difficulties and the noise. ``seen`` counts final rankings per inferred
    configuration (for tests; never read by a search).
    """

    def __init__(self, answers: Mapping[str, str], *, table: PlantedTable = DEFAULT_TABLE, seed: int = 0,
                 model: str = "simulated", keep_calls: bool = False, calibration: float = 0.0):
        super().__init__(self._respond, model=model, keep_calls=keep_calls)  # a benchmark: tens of thousands of calls
        if not 0.0 <= calibration <= 1.0:
            raise ValueError(f"calibration is a probability in [0, 1], got {calibration}")
        self.answers = dict(answers)
        self.table, self.seed, self.calibration = table, seed, calibration
        self.seen: dict[str, int] = {}
        self.n_calls = 0

    def complete(self, messages, **kwargs):  # type: ignore[no-untyped-def]
        response = super().complete(messages, **kwargs)
        with self._lock:
            self.n_calls += 1
        return response

    def _gold(self, question: str, letters: list[str]) -> str | None:
        gold = self.answers.get(question)
        if gold is None:
            gold = next((g for text, g in self.answers.items() if text and text in question), None)
        return gold if gold in letters else None

    def correct(self, question: str, components: Iterable[str], *, p: float | None = None) -> bool:
        """Whether the team (or a single agent, with ``p``) gets ``question`` right under ``components``."""
        key = "+".join(sorted(components)) if p is None else "single"
        own = p is not None and _unit(self.seed, "shared", question) >= self.table.shared_difficulty
        p = self.table.accuracy(components) if p is None else p
        u = _unit(self.seed, "single difficulty" if own else "difficulty", question)
        noise = (2 * _unit(self.seed, "noise", question, key) - 1) * self.table.noise
        return u < p + noise

    def confidence(self, question: str, right: bool) -> str:
        """A single agent's stated confidence: the truth with probability ``calibration``, else random."""
        if _unit(self.seed, "truthful", question) < self.calibration:
            return "High" if right else "Low"
        return ("High", "Medium", "Low")[int(_unit(self.seed, "stated", question) * 3)]

    def _ranking(self, question: str, letters: list[str], right: bool) -> list[str]:
        gold = self._gold(question, letters)
        if gold is None:
            first = letters[int(_unit(self.seed, "unknown", question) * len(letters))]
        elif right:
            first = gold
        else:
            wrong = [x for x in letters if x != gold]
            first = wrong[int(_unit(self.seed, "wrong", question) * len(wrong))] if wrong else gold
        return [first] + [x for x in letters if x != first]

    def _respond(self, call: ScriptedCall) -> dict[str, Any] | None:
        name, inputs = call.signature, call.inputs
        question = str(inputs.get("question", ""))
        if name == "FinalRanking":
            components = infer_components(inputs)
            with self._lock:
                label = "+".join(components) or "base"
                self.seen[label] = self.seen.get(label, 0) + 1
            ranking = self._ranking(question, call.choices("ranking"), self.correct(question, components))
            return {"ranking": ranking, "confidence": "High", "rationale": "Simulated."}
        if name in _SINGLE:
            letters = call.choices("answer")
            right = self.correct(question, (), p=self.table.single)
            return {"answer": self._ranking(question, letters, right)[0],
                    "confidence": self.confidence(question, right), "reasoning": "Simulated."}
        if name == "DiscussionTurn":  # an agent's words reflect what it read (shared knowledge, if any)
            seen = "Shared knowledge:" in str(inputs.get("team_context", ""))
            return {"message": "Simulated view" + (f" {_SMM_SAID}" if seen else "") + "."}
        return _TRACES.get(name)


# Answers that leave each behaviour's trace in later prompts (see `infer_components`).
_TRACES: dict[str, dict[str, Any]] = {
    "AgentCount": {"n_agents": 3, "reason": "Simulated team of three."},
    "QuestionTricks": {"analysis": "Simulated analysis of the question."},
    "ConsensusFacts": {"facts": ["Simulated verified fact."]},
    "Mediation": {"synthesis": "Simulated synthesis."},
    "VerifyUnderstanding": {"confirmed": False, "correction": "Simulated correction."},
    "Acknowledge": {"restatement": "Simulated restatement.", "agrees": True},
    "InitialAssessment": {"facts": ["Simulated fact one.", "Simulated fact two."], "justification": "Simulated."},
}


def simulated_questions(n: int, *, seed: int = 0, prefix: str = "sim") -> list[Any]:
    """``n`` labelled four-option questions for the simulated team (ids ``<prefix>-<seed>-<i>``)."""
    from teammed.types import Question

    return [Question(id=f"{prefix}-{seed}-{i}", question=f"Simulated case {prefix}-{seed}-{i}: what next?",
                     options={x: f"Option {x} of case {i}" for x in "ABCD"},
                     answer_idx="ABCD"[int(_unit(seed, "gold", prefix, i) * 4)]) for i in range(n)]


def answer_key(questions: Iterable[Any]) -> dict[str, str]:
    """The gold letters by question text as programs send it (context included)."""
    return {q.full_text(): q.answer_idx for q in questions if q.answer_idx}
