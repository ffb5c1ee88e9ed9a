"""What every peer system shares: letter repair, distinct roles, demos, statements, settings.

Pure functions over plain data, plus `PeerSystem` (the base module) and `Settings` (the
frozen, validated constructor arguments of a system).
"""

from __future__ import annotations

import contextlib
import contextvars
import random
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

import dspy
from pydantic import BaseModel, ConfigDict, ValidationError

from teammed.errors import ConfigError, NoAnswerError
from teammed.programs.behaviour import Behaviour, showing_image
from teammed.programs.options import validated_options
from teammed.programs.persist import SavesConfig
from teammed.programs.team import Agent

__all__ = [
    "CONFIDENCE",
    "PeerSystem",
    "Settings",
    "Statement",
    "as_confidence",
    "as_demos",
    "as_letter",
    "answer_letter",
    "letter_of",
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


class PeerSystem(SavesConfig, dspy.Module):
    """Base of the peer systems: the same forward contract as `TeamworkProgram`.

    Calling a system validates the options (`validated_options`) and, given ``image=`` (a
    path, URL or data URI), shows the image to every behaviour of the question: the backend
    must be a vision model.
    """

    accepts_images = True

    def __call__(self, *args: Any, image: Any = None, **kwargs: Any) -> Any:
        args, kwargs = _checked(args, kwargs)
        with showing_image(image), _letter_tally() as tally:
            prediction = super().__call__(*args, **kwargs)
        tally.require_an_answer(type(self).__name__)
        return prediction

    async def acall(self, *args: Any, image: Any = None, **kwargs: Any) -> Any:
        args, kwargs = _checked(args, kwargs)
        with showing_image(image), _letter_tally() as tally:
            prediction = await super().acall(*args, **kwargs)
        tally.require_an_answer(type(self).__name__)
        return prediction

    def behaviours(self) -> list[str]:
        """The names of the behaviours this system can call (each one named predictor)."""
        return sorted({m.name for _, m in self.named_sub_modules() if isinstance(m, Behaviour)})


def _checked(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if "options" in kwargs:
        kwargs["options"] = validated_options(kwargs["options"])
    elif len(args) >= 2:
        args = (args[0], validated_options(args[1]), *args[2:])
    return args, kwargs


@dataclass
class Statement:
    """One thing an agent said, with the option it favoured when it said it."""

    agent: str
    role: str
    round: int
    text: str
    choice: str
    confidence: str = "Low"
    parsed: bool = True  # False: the choice is a default standing in for an unusable answer


def question_text(question: str, context: str | None) -> str:
    """The question as agents read it, with its supporting context first."""
    return f"Context:\n{context}\n\nQuestion:\n{question}" if context else question


def letter_of(raw: object, options: Mapping[str, str]) -> str | None:
    """The option letter ``raw`` names, or None when it names none.

    Accepts the letter itself in any case, decorated (``"(b)"``, ``"B) ..."``, ``"B. ..."``)
    or the full text of an option.
    """
    text = str(raw or "").strip()
    if text in options:
        return text
    bare = text.strip("()[]{}.:;-\"' ").upper()
    if bare in options:
        return bare
    if len(bare) > 1 and bare[0] in options and not bare[1].isalnum():
        return bare[0]
    for letter, option in options.items():
        if text and text.casefold() == str(option).strip().casefold():
            return letter
    return None


class _LetterTally:
    """How many option letters one question's agents stated, and how many fell back to a default."""

    def __init__(self) -> None:
        self.parsed = 0
        self.fell_back = 0
        self._lock = threading.Lock()

    def add(self, *, parsed: bool) -> None:
        with self._lock:
            if parsed:
                self.parsed += 1
            else:
                self.fell_back += 1

    def require_an_answer(self, system: str) -> None:
        """Every letter of the question was a default: the answer would be invented, so there is none."""
        if self.fell_back and not self.parsed:
            raise NoAnswerError(f"{system}: none of the {self.fell_back} answers its agents gave named an option "
                                "(every one fell back to a default), so the system has no answer; check that the "
                                "model returns the requested JSON")


_tally: contextvars.ContextVar[_LetterTally | None] = contextvars.ContextVar("teammed_letter_tally", default=None)


@contextlib.contextmanager
def _letter_tally() -> Iterator[_LetterTally]:
    tally = _LetterTally()
    token = _tally.set(tally)  # threads of the question copy the context, so they add to the same tally
    try:
        yield tally
    finally:
        _tally.reset(token)


def _note(letter: str | None) -> None:
    tally = _tally.get()
    if tally is not None:
        tally.add(parsed=letter is not None)


def as_letter(raw: object, options: Mapping[str, str], fallback: str | None = None) -> str:
    """A valid option letter from whatever the LM gave; never raises.

    `letter_of`, else ``fallback`` if it is a valid letter, else the first option. Where the
    letter is the system's final answer and no agent's answer parsed, use `answer_letter`.
    """
    letter = letter_of(raw, options)
    _note(letter)
    if letter is not None:
        return letter
    return fallback if fallback is not None and fallback in options else next(iter(options))


def answer_letter(raw: object, options: Mapping[str, str], *, system: str) -> str:
    """A single agent's final answer; `NoAnswerError` when it names no option (never a silent default)."""
    letter = letter_of(raw, options)
    _note(letter)
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
        role = " ".join(str(item or "").split())
        if not role or _role_key(role) in seen:
            continue
        seen.add(_role_key(role))
        kept.append(role)
        if limit is not None and len(kept) >= limit:
            break
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
    number = 1
    while len(roles) < n:
        generic = f"Medical Expert {number}"
        number += 1
        if not distinct_roles([generic], taken + roles):
            continue
        roles.append(generic)
    return [
        Agent(f"agent_{first_id + i}", role, focus.get(_role_key(role)) or "general clinical reasoning", 1.0)
        for i, role in enumerate(roles)
    ]


def format_statements(statements: Iterable[Statement]) -> str:
    """Statements as the transcript agents read: who, when, what they favour and why."""
    return "\n".join(
        f"[round {s.round}] {s.agent} ({s.role}) favours {s.choice}: {s.text}" for s in statements
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
