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
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from teammed.types import Question

__all__ = ["TUNE_SHARE", "Part", "part_of", "partition", "SplitPlan", "plan_split", "apply_plan"]

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


# ---------------------------------------------------------------- which questions a command uses
Purpose = Literal["tune", "eval"]
_TUNING_SOURCE_SPLITS = ("validation", "train")


@dataclass(frozen=True)
class SplitPlan:
    """Which questions a command reads: a source split (None: the file / default) and, when the
    source has no split of its own for tuning, one part of the id partition.

    ``name`` is how results record it: ``test``, ``validation``, ``test/eval``, ``file/tune``.
    """

    source_split: str | None
    part: Part | None
    name: str


def plan_split(dataset: str, *, purpose: Purpose, split: str | None = None,
               data_dir: str | Path | None = None) -> SplitPlan:
    """The questions ``purpose`` draws from when the user gave ``--split split`` (or nothing).

    Defaults: tuning (`search`, `compile`) reads the source's own validation split, else its
    train split, where the registry knows one besides the default split; otherwise the *tune*
    part of the default split (or of the file). Evaluation (`run`) reads the default split
    whole when tuning has its own split, else its *eval* part. ``--split tune``/``--split eval``
    pick a part of the default split, ``--split all`` the default split (or file) whole; any other
    value names a source split, used whole. ``data_dir`` matters for MedAgentsBench's folders,
    whose splits are their file stems (`teammed.data.registry.known_splits`).
    """
    from teammed.data.registry import known_splits

    known = known_splits(dataset, data_dir)
    base = "file" if known is None else known[0]
    if split == "all":  # the default split (or the file) whole: tuning and evaluation may then overlap
        return SplitPlan(None, None, base)
    if split in ("tune", "eval"):
        return SplitPlan(None, split, f"{base}/{split}")  # type: ignore[arg-type]
    if split is not None:
        return SplitPlan(split, None, split)
    tuning_split = None
    if known is not None and known[1] is not None:
        tuning_split = next((s for s in _TUNING_SOURCE_SPLITS if s in known[1] and s != known[0]), None)
    if purpose == "tune":
        if tuning_split is not None:
            return SplitPlan(tuning_split, None, tuning_split)
        return SplitPlan(None, "tune", f"{base}/tune")
    if tuning_split is not None:
        return SplitPlan(None, None, base)
    return SplitPlan(None, "eval", f"{base}/eval")


def apply_plan(questions: Sequence[Question], plan: SplitPlan) -> list[Question]:
    """The questions of ``plan`` among those loaded from its source split."""
    return list(questions) if plan.part is None else partition(questions, part=plan.part)
