"""A deterministic, documented partition of one question pool into tuning and evaluation parts.

Where a source has no train/dev split of its own (a single file, a benchmark's test split
only), tuning (`search`, `compile`, `tune`) draws from the *tune* part and evaluation
(`run`) from the disjoint *eval* part. A question's part depends only on its id:
``sha256("teammed-split:" + id)`` read as a number in [0, 1) below ``tune_share`` is tuning.
Adding or removing other questions never moves a question from one part to the other.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Literal

from teammed.types import Question

__all__ = ["TUNE_SHARE", "Part", "part_of", "partition"]

TUNE_SHARE = 0.3
Part = Literal["tune", "eval"]


def part_of(question_id: str, *, tune_share: float = TUNE_SHARE) -> Part:
    """The part a question id belongs to (pure; stable across runs, machines and Python versions)."""
    if not 0.0 < tune_share < 1.0:
        raise ValueError(f"tune_share must be between 0 and 1, exclusive (got {tune_share})")
    digest = hashlib.sha256(f"teammed-split:{question_id}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    return "tune" if u < tune_share else "eval"


def partition(questions: Sequence[Question], *, part: Part, tune_share: float = TUNE_SHARE) -> list[Question]:
    """The questions of one part, in their original order."""
    if part not in ("tune", "eval"):
        raise ValueError(f"part must be 'tune' or 'eval' (got {part!r})")
    return [q for q in questions if part_of(q.id, tune_share=tune_share) == part]
