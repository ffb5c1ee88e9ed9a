"""A team's discussion as a list of messages, its token budget, and the keeper that enforces it.

Tokens are estimated as characters / 4. `HistoryKeeper` compresses the longest message
(one LM call each, every message at most once per check) while the history passes
``summarize_at × context_window``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from teammed.programs.behaviour import Behaviour
from teammed.signatures.peer_consultation import CompressMessage

__all__ = ["Message", "HistoryKeeper", "history_text", "estimate_tokens", "over_budget"]


@dataclass
class Message:
    """One entry of the discussion; ``text`` may later be replaced by its summary."""

    round: int
    author: str
    text: str
    choice: str | None = None

    def line(self) -> str:
        chose = f" (chose {self.choice})" if self.choice else ""
        return f"[round {self.round}] {self.author}{chose}: {self.text}"


def history_text(messages: Sequence[Message]) -> str:
    return "\n".join(m.line() for m in messages)


def estimate_tokens(text: str) -> int:
    """Tokens estimated as characters / 4, rounded up (a partial token is a token)."""
    return math.ceil(len(text) / 4)


def over_budget(tokens: int, *, context_window: int, summarize_at: float) -> bool:
    """True when ``tokens`` passes ``summarize_at`` of the context window (strictly above it)."""
    return tokens > summarize_at * context_window


class HistoryKeeper(dspy.Module):
    """Keeps a discussion within its share of the context window by compressing long messages."""

    def __init__(self, *, context_window: int, summarize_at: float, temperature: float | None = None) -> None:
        super().__init__()
        self.context_window, self.summarize_at = context_window, summarize_at
        self.compress = Behaviour(CompressMessage, temperature=temperature)  # None: the run's temperature

    def forward(self, question: str, messages: list[Message]) -> tuple[int, list[dict[str, Any]]]:
        """Shorten ``messages`` in place; returns the tokens before and one entry per compression.

        Each entry has ``tokens_before``, ``tokens_after`` and the ``summary`` text. A summary
        that is empty or no shorter than its message leaves the message as it was.
        """
        tokens = start = estimate_tokens(history_text(messages))
        steps: list[dict[str, Any]] = []
        done: set[int] = set()
        while over_budget(tokens, context_window=self.context_window, summarize_at=self.summarize_at):
            waiting = [m for m in messages if id(m) not in done]
            if not waiting:
                break
            longest = max(waiting, key=lambda m: len(m.text))
            done.add(id(longest))
            summary = str(self.compress(question=question, message=longest.text).summary or "").strip()
            if summary and len(summary) < len(longest.text):
                longest.text = summary
            after = estimate_tokens(history_text(messages))
            steps.append({"tokens_before": tokens, "tokens_after": after, "summary": summary})
            tokens = after
        return start, steps
