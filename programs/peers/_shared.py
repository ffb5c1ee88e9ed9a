"""What every peer system shares: letter reading, distinct roles, demos, statements, settings.

Pure functions over plain data, plus `PeerSystem` (the base module) and `Settings` (the
frozen, validated constructor arguments of a system).

No invented answers: an agent's vote, choice or final answer that names none of the
question's options is *dropped* (`read_letter` returns None), never read as some option;
letters are read by `teammed.programs.letters.letter_of`, the reader the teamwork program uses too.
Every drop, and every unreadable non-answer decision a system replaces by a documented
default (`note_fallback`: an MDAgents route, a consensus or knowledge-gap verdict), is a
*fallback* of the behaviour that produced it, counted in the question's `teammed.usage`
(the row's ``fallbacks`` and ``fallbacks_by_behaviour``) and in the prediction's record.
A system decides from the valid votes only; with none it raises `NoAnswerError`.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import random
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import dspy
from pydantic import BaseModel, ConfigDict, ValidationError

from teammed import usage
from teammed.errors import ConfigError, NoAnswerError
from teammed.programs.behaviour import showing_image
from teammed.programs.letters import letter_of
from teammed.programs.options import validated_options
from teammed.programs.parallel import AsyncForward
from teammed.programs.persist import SavesConfig
from teammed.programs.team import Agent, Transcript
from teammed.systems import record_model

__all__ = [
    "CONFIDENCE",
    "PeerSystem",
    "Settings",
    "Statement",
    "as_confidence",
    "as_demos",
    "read_letter",
    "answer_letter",
    "letter_of",
    "note_fallback",
    "distinct_roles",
    "format_statements",
    "question_text",
    "select_examples",
    "staff",
]

CONFIDENCE = ("High", "Medium", "Low")


class Settings(BaseModel):
    """A system's constructor arguments as one frozen value; `build` raises `ConfigError`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def build(cls, system: str, **values: Any) -> Self:
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, err['loc']))}: {err['msg'].removeprefix('Value error, ').lower()} "
                f"(got {err.get('input')!r})"
                for err in exc.errors()
            )
            raise ConfigError(f"{system}: {problems}; pass a value within the stated bounds") from None


class PeerSystem(SavesConfig, AsyncForward, dspy.Module):
    """Base of the peer systems: the same forward contract as `TeamworkProgram`.

    Calling a system validates the options (`validated_options`) and, given ``image=`` (a
    path, URL or data URI), shows the image to every behaviour of the question: the backend
    must be a vision model. Fallbacks and `NoAnswerError`: see the module docstring.
    """

    system_name: ClassVar[str]  # each system's name in `teammed.systems.registry()`

    def __call__(self, *args: Any, image: Any = None, **kwargs: Any) -> Any:
        args, kwargs = _checked(args, kwargs)
        with showing_image(image), _letter_tally() as tally:
            prediction = super().__call__(*args, **kwargs)
        return tally.finish(type(self).__name__, self.system_name, prediction)

    async def acall(self, *args: Any, image: Any = None, **kwargs: Any) -> Any:
        args, kwargs = _checked(args, kwargs)
        with showing_image(image), _letter_tally() as tally:
            prediction = await super().acall(*args, **kwargs)
        return tally.finish(type(self).__name__, self.system_name, prediction)


def _checked(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if "options" in kwargs:
        kwargs["options"] = validated_options(kwargs["options"])
    elif len(args) >= 2:
        args = (args[0], validated_options(args[1]), *args[2:])
    return args, kwargs


@dataclass
class Statement:
    """One thing an agent said, with the option it favoured when it said it.

    ``choice`` is None when the agent's answer named no option: a dropped vote, which no
    rule counts as any option.
    """

    agent: str
    role: str
    round: int
    text: str
    choice: str | None
    confidence: str = "Low"


def said(agent: Agent, turn: int, out: Any, options: Mapping[str, str], behaviour: str, *, text: str = "reasoning",
         confidence: str | None = None) -> Statement:
    """What ``agent`` said at ``turn`` in ``out``: its ``text`` field, the letter its ``answer`` names (None: none,
    counted by ``behaviour``), its confidence (``confidence`` when given: one it keeps from before)."""
    return Statement(agent.id, agent.role, turn, str(getattr(out, text) or ""),
                     read_letter(out.answer, options, behaviour=behaviour),
                     confidence if confidence is not None else as_confidence(out.confidence))


def prediction(answer: str, rationale: str, confidence: str, record: dict[str, Any],
               transcript: Transcript) -> dspy.Prediction:
    """A system's answer as the forward contract returns it (the record is typed later, by `PeerSystem`)."""
    return dspy.Prediction(answer=answer, rationale=rationale, confidence=confidence, record=record,
                           transcript=transcript.events)


def question_text(question: str, context: str | None) -> str:
    """The question as agents read it, with its supporting context first."""
    return f"Context:\n{context}\n\nQuestion:\n{question}" if context else question


class _LetterTally:
    """One question's letters (how many named an option, how many were dropped) and fallbacks."""

    def __init__(self) -> None:
        self.parsed = 0
        self.dropped = 0
        self.by_behaviour: dict[str, int] = {}
        self._lock = threading.Lock()

    def letter(self, *, parsed: bool) -> None:
        with self._lock:
            if parsed:
                self.parsed += 1
            else:
                self.dropped += 1

    def fallback(self, behaviour: str) -> None:
        with self._lock:
            self.by_behaviour[behaviour] = self.by_behaviour.get(behaviour, 0) + 1

    def finish(self, system: str, name: str, prediction: Any) -> Any:
        """``prediction`` with its record typed as system ``name``'s model (`teammed.systems`),
        the fallbacks in it; `NoAnswerError` when no letter named an option. A record its model refuses
        raises `pydantic.ValidationError`: a bug of the system, never written as an untyped dict."""
        if self.dropped and not self.parsed:
            raise NoAnswerError(f"{system}: none of the {self.dropped} answers its agents gave named an option "
                                "(every one was dropped), so the system has no answer; check that the model "
                                "returns the requested JSON")
        record = getattr(prediction, "record", None)
        if isinstance(record, dict):
            prediction.record = record_model(name).model_validate({
                **record, "system": name, "fallbacks": sum(self.by_behaviour.values()),
                "fallbacks_by_behaviour": dict(sorted(self.by_behaviour.items()))})
        return prediction


_tally: contextvars.ContextVar[_LetterTally | None] = contextvars.ContextVar("teammed_letter_tally", default=None)


@contextlib.contextmanager
def _letter_tally() -> Iterator[_LetterTally]:
    tally = _LetterTally()
    token = _tally.set(tally)  # threads of the question copy the context, so they add to the same tally
    try:
        yield tally
    finally:
        _tally.reset(token)


def note_fallback(behaviour: str) -> None:
    """Count one output of ``behaviour`` the system could not use (dropped, or replaced by a
    documented non-answer default) in the question's usage and its record."""
    usage.record_fallback(behaviour)
    tally = _tally.get()
    if tally is not None:
        tally.fallback(behaviour)


def read_letter(raw: object, options: Mapping[str, str], *, behaviour: str) -> str | None:
    """The option letter ``raw`` names (`letter_of`), or None: a dropped vote, counted as a
    fallback of ``behaviour``. Never a default option: a caller decides from the valid letters."""
    letter = letter_of(raw, options)
    tally = _tally.get()
    if tally is not None:
        tally.letter(parsed=letter is not None)
    if letter is None:
        note_fallback(behaviour)
    return letter


def answer_letter(raw: object, options: Mapping[str, str], *, system: str, behaviour: str) -> str:
    """A single agent's final answer; `NoAnswerError` when it names no option (never a silent default)."""
    letter = read_letter(raw, options, behaviour=behaviour)
    if letter is None:
        raise NoAnswerError(f"{system}: the agent's answer {str(raw)[:80]!r} names no option, so the system has "
                            "no answer; check that the model returns the requested JSON")
    return letter


def as_confidence(raw: object) -> str:
    """One of High, Medium, Low; anything else reads as Low."""
    return raw if raw in CONFIDENCE else "Low"  # type: ignore[return-value]


def _role_key(role: str) -> str:
    return " ".join(role.split()).casefold()


def distinct_roles(
    proposed: Iterable[object], present: Iterable[str] = (), *, limit: int | None = None
) -> list[str]:
    """The proposed roles not already present, compared case- and space-insensitively.

    Also drops blanks and repeats within ``proposed``; keeps at most ``limit`` roles.
    """
    seen = {_role_key(r) for r in present}
    kept: list[str] = []
    for item in proposed:
        if limit is not None and len(kept) >= limit:  # checked first: ``limit=0`` keeps none
            break
        role = " ".join(str(item or "").split())
        if not role or _role_key(role) in seen:
            continue
        seen.add(_role_key(role))
        kept.append(role)
    return kept


def staff(
    specialists: Iterable[object], n: int, *, present: Sequence[Agent] = (), first_id: int = 1
) -> list[Agent]:
    """Exactly ``n`` new agents with roles distinct from each other and from ``present``.

    ``specialists`` are objects with ``role`` and ``expertise`` (as the LM proposed them);
    missing seats are filled by generic medical experts.
    """
    specialists = list(specialists or [])
    focus = {
        _role_key(str(getattr(s, "role", "") or "")): str(getattr(s, "expertise", "") or "").strip()
        for s in specialists
    }
    taken = [a.role for a in present]
    roles = distinct_roles((getattr(s, "role", "") for s in specialists), taken, limit=n)
    generics = (f"Medical Expert {number}" for number in itertools.count(1))
    while len(roles) < n:  # the next generic expert whose role is not taken yet
        roles += distinct_roles([next(generics)], taken + roles)
    return [
        Agent(f"agent_{first_id + i}", role, focus.get(_role_key(role)) or "general clinical reasoning", 1.0)
        for i, role in enumerate(roles)
    ]


def names_a_role(specialists: Any) -> bool:
    """Whether an LM's recruitment names at least one specialty (else generic experts are staffed)."""
    return any(str(getattr(p, "role", "") or "").strip() for p in specialists or [])


def recruited(specialists: Any, n: int, *, behaviour: str) -> list[Agent]:
    """`staff` for a recruitment by ``behaviour``; one naming no specialty is counted as its fallback."""
    if not names_a_role(specialists):
        note_fallback(behaviour)
    return staff(specialists, n)


def log_statements(transcript: Transcript, phase: str, kind: str, statements: Iterable[Statement]) -> None:
    """Each statement as a transcript event: who said it, in which round, and the option it favoured."""
    for st in statements:
        transcript.add(phase, kind, st.text, agent=st.agent, role=st.role, turn=st.round, choice=st.choice)


def format_statements(statements: Iterable[Statement]) -> str:
    """Statements as the transcript agents read: who, when, what they favour and why."""
    return "\n".join(
        f"[round {s.round}] {s.agent} ({s.role}) "
        f"{f'favours {s.choice}' if s.choice is not None else 'named no valid option'}: {s.text}"
        for s in statements
    )


def select_examples(pool: Sequence[Any], k: int, seed: int) -> list[Any]:
    """``k`` examples drawn from ``pool`` without replacement; the same seed gives the same draw."""
    if k <= 0 or not pool:
        return []
    return random.Random(seed).sample(list(pool), min(k, len(pool)))


def _field(example: Any, name: str) -> Any:
    return example.get(name) if isinstance(example, Mapping) else getattr(example, name, None)


def as_demos(examples: Iterable[Any]) -> list[dspy.Example]:
    """Worked examples as DSPy demos: ``{question, options, answer}`` mappings or `Question`s."""
    demos = []
    for i, example in enumerate(examples):
        question, options = _field(example, "question"), _field(example, "options")
        answer = _field(example, "answer") or _field(example, "answer_idx")
        if not question or not isinstance(options, Mapping) or answer not in options:
            raise ConfigError(
                f"few-shot example {i} needs a question, options keyed by letter and an answer among them "
                f"(got answer={answer!r}, options={list(options or [])}); fix or drop that example"
            )
        text = question_text(str(question), _field(example, "context"))
        demos.append(
            dspy.Example(question=text, options=dict(options), answer=answer).with_inputs(
                "question", "options"
            )
        )
    return demos
