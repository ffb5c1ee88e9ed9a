"""Which questions a command reads, and under what data-set identity (CLI glue, no I/O beyond loading).

A data set's identity is its *name* (``--dataset-name``, else the registry name or the file's
stem) plus the sha256 of its loaded content: two files called ``sampled_50.jsonl`` from two
benchmarks get different keys (``sampled_50-1a2b3c4d``), so they never share a search study,
a Special Set file or a report column. Tuning commands (`search`, `compile`) and evaluation
(`run`) read disjoint questions by default (see `teammed.data.splits.plan_split`); a Special
Set or compiled program records the ids it was tuned on (`tuning_record`) and `run` leaves
any overlap with them out (`tuned_ids`).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teammed.errors import ConfigError, DataError
from teammed.types import Question

__all__ = ["DatasetChoice", "load_for", "dataset_name", "tuning_record", "tuned_ids"]


@dataclass(frozen=True)
class DatasetChoice:
    name: str
    sha256: str
    split: str  # e.g. "test/eval", "train", "file/tune"
    questions: list[Question]  # the questions of the split plan
    source: list[Question]  # every question loaded from the source split

    @property
    def key(self) -> str:
        """``name-<first 8 hex of the content hash>``: safe as a study name and a file name."""
        return f"{self.name}-{self.sha256[:8]}"


def dataset_name(dataset: str, given: str | None = None) -> str:
    """The name results carry: ``--dataset-name``, else a file's stem or a directory's name, else the
    registry name."""
    if given:
        return given
    path = Path(dataset)
    return path.stem if path.suffix or path.is_dir() else dataset


def load_for(args: argparse.Namespace, *, purpose: str) -> DatasetChoice:
    """Load ``args.dataset`` (``--split``, ``--data-dir``) for ``purpose`` "tune" or "eval"."""
    from teammed.data import load_dataset
    from teammed.data.splits import apply_plan, plan_split
    from teammed.records import dataset_digest

    plan = plan_split(args.dataset, purpose=purpose, split=getattr(args, "split", None),
                      data_dir=getattr(args, "data_dir", None))  # type: ignore[arg-type]
    pinned = {"revision": args.revision} if getattr(args, "revision", None) else {}  # hub revision, if given
    source = load_dataset(args.dataset, data_dir=getattr(args, "data_dir", None), split=plan.source_split, **pinned)
    questions = apply_plan(source, plan)
    if not questions:
        raise DataError(f"the {plan.part} part of {args.dataset} is empty ({len(source)} questions, all in the "
                        f"other part of the tune/eval partition); pass --split all to use every question "
                        f"(tuning and evaluation may then overlap; run leaves out what a Special Set or "
                        f"program was tuned on)")
    return DatasetChoice(name=dataset_name(args.dataset, getattr(args, "dataset_name", None)),
                         sha256=dataset_digest(source), split=plan.name, questions=questions, source=source)


def tuning_record(choice: DatasetChoice, ids: list[str]) -> dict[str, Any]:
    """What a Special Set / compiled program stores about the questions it was tuned on."""
    return {"dataset": choice.name, "dataset_sha256": choice.sha256, "split": choice.split,
            "question_ids": list(ids)}


def tuned_ids(path: Path | None) -> tuple[set[str], str | None]:
    """The question ids a Special Set file (``--config``) or compiled program (``--program``) was
    tuned on, and where that came from (None when the file records none)."""
    if path is None:
        return set(), None
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not isinstance(document, dict):
        return set(), None
    from teammed.optimizers.saved import ENVELOPE
    from teammed.records import read_tuning

    envelope = document.get(ENVELOPE)
    if not isinstance(envelope, dict):  # program format 1 kept meta at the top level
        envelope = document
    meta = envelope.get("meta")
    # the shared record (``tuning`` / meta ``tuned_on``) and the legacy ``tuning_ids`` tune wrote before it;
    # a record present but unreadable is refused, never dropped
    found = [ids for ids in (read_tuning(document, where=str(path)),
                             read_tuning(meta, where=f"{path} (meta)") if meta is not document else None)
             if ids is not None]
    if not found:
        return set(), None
    return {i for ids in found for i in ids}, str(path)
