"""Plain data shared by every system: a question and what answering it produced."""

from __future__ import annotations

import string
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

__all__ = ["Question", "LETTERS", "letters_for"]

LETTERS = tuple(string.ascii_uppercase[:10])


def letters_for(n: int) -> tuple[str, ...]:
    """The option letters of a question with ``n`` options (2 to 10)."""
    if not 2 <= n <= len(LETTERS):
        raise ValueError(f"a question needs 2 to {len(LETTERS)} options (got {n})")
    return LETTERS[:n]


def _has_text(question: str) -> str:
    if not question.strip():
        raise ValueError("the question's text is empty; give it its text, or remove that row")
    return question


def _letters_in_order(options: dict[str, str]) -> dict[str, str]:
    expected = letters_for(len(options))
    if tuple(options) != expected:
        raise ValueError(f"options must be keyed {', '.join(expected)} in order (got {', '.join(options)})")
    return options


class Question(BaseModel):
    """One benchmark item in the unified schema every loader produces.

    ``options`` maps option letters ("A", "B", ...) to option text; yes/no/maybe and
    binary clinical questions are options too (A=yes, B=no, ...). ``answer_idx`` is the
    gold letter when known.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    question: Annotated[str, AfterValidator(_has_text)]
    options: Annotated[dict[str, str], AfterValidator(_letters_in_order)]
    answer_idx: str | None = None
    context: str | None = Field(default=None, description="Supporting text, e.g. a PubMed abstract.")
    image: str | None = Field(default=None, description="Path or URL of an image for vision tasks.")
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _gold_is_an_option(self) -> Question:
        if self.answer_idx is not None and self.answer_idx not in self.options:
            raise ValueError(f"answer_idx {self.answer_idx!r} is not one of the options {list(self.options)}")
        return self

    def full_text(self) -> str:
        """The question with its context, as agents read it."""
        if self.context:
            return f"Context:\n{self.context}\n\nQuestion:\n{self.question}"
        return self.question
