"""Which questions a command reads, and under what data-set identity (no I/O beyond loading).

A data set's identity is its *name* (``--dataset-name``, else the registry name or the file's
stem) plus the sha256 of its loaded content: two files called ``sampled_50.jsonl`` from two
benchmarks get different keys (``sampled_50-1a2b3c4d``), so they never share a search study,
a Special Set file or a report column. Tuning commands (`search`, `compile`) and evaluation
(`run`) read disjoint questions by default (see `teammed.data.splits.plan_split`); a Special
Set or compiled program records the ids it was tuned on (`tuning_record`) and `run` leaves
any overlap with them out (`tuned_on`, `without_overlap`: matched by content, never by id alone).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teammed.errors import ConfigError, DataError
from teammed.types import Question

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from teammed.experiments.specs import DataSpec

__all__ = ["DatasetChoice", "load_for", "dataset_name", "tuning_record", "tuned_on", "TunedOn", "without_overlap"]


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


def load_for(data: DataSpec, *, purpose: str) -> DatasetChoice:
    """Load ``data`` (its split, data_dir, revision) for ``purpose`` "tune" or "eval"."""
    from teammed.data import load_dataset
    from teammed.data.splits import apply_plan, plan_split
    from teammed.records import dataset_digest

    plan = plan_split(data.dataset, purpose=purpose, split=data.split, data_dir=data.data_dir)  # type: ignore[arg-type]
    pinned = {"revision": data.revision} if data.revision else {}  # hub revision, if given
    source = (list(data.questions) if data.questions is not None else
              load_dataset(data.dataset, data_dir=data.data_dir, split=plan.source_split, **pinned))
    questions = apply_plan(source, plan)
    if not questions:
        raise DataError(f"the {plan.part} part of {data.dataset} is empty ({len(source)} questions, all in the "
                        f"other part of the tune/eval partition); pass --split all to use every question "
                        f"(tuning and evaluation may then overlap; run leaves out what a Special Set or "
                        f"program was tuned on)")
    return DatasetChoice(name=dataset_name(data.dataset, data.dataset_name), sha256=dataset_digest(source),
                         split=plan.name, questions=questions, source=source)


def tuning_record(choice: DatasetChoice, questions: Sequence[Question]) -> dict[str, Any]:
    """What a Special Set / compiled program stores about the questions it was tuned on."""
    from teammed.records import question_fingerprint

    return {"dataset": choice.name, "dataset_sha256": choice.sha256, "split": choice.split,
            "question_ids": [q.id for q in questions],
            "question_sha256": [question_fingerprint(q) for q in questions]}


@dataclass(frozen=True)
class TunedOn:
    """The tuning records of a Special Set or program file, and how `run` matches its questions to them.

    A question is one it was tuned on when its content fingerprint is recorded, or, for records
    without fingerprints (written before them), when its id is and the record's data set is this
    one: the same content hash, else (with a warning) the same name. Ids alone never match across
    data sets: MedQA's question 12 is not MedBullets' question 12.
    """

    source: str
    records: tuple[dict[str, Any], ...]

    def overlapping(self, sample: Sequence[Question], *, dataset: str, dataset_sha256: str) -> list[str]:
        from teammed.records import question_fingerprint

        prints = {p for r in self.records for p in r["question_sha256"] or ()}
        by_id: set[str] = set()
        for record in self.records:
            if record["question_sha256"] is not None:
                continue
            same_content = record["dataset_sha256"] == dataset_sha256
            if same_content or record["dataset"] in (None, dataset):
                if not same_content:
                    logger.warning(f"{self.source} records its tuning questions by id only (written before "
                          f"fingerprints); matching them by id because its data set is named "
                          f"{record['dataset'] or 'nothing'}, like this one ({dataset}). Re-create it with this "
                          f"teammed to match by content")
                by_id.update(record["question_ids"])
            else:
                logger.warning(f"{self.source} was tuned on {record['dataset']} (sha256 "
                      f"{str(record['dataset_sha256'])[:12]}), not {dataset}, and records ids only: ids alone "
                      f"cannot say which of these questions it saw, so none is left out for that record")
        return [q.id for q in sample if question_fingerprint(q) in prints or q.id in by_id]


def tuned_on(path: Path | None) -> TunedOn | None:
    """The tuning records of a Special Set file (``--config``) or compiled program (``--program``);
    None when there is no file or it records none."""
    if path is None:
        return None
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not isinstance(document, dict):
        return None
    from teammed.programs.persist import ENVELOPE
    from teammed.records import read_tuning_records

    envelope = document.get(ENVELOPE)
    if not isinstance(envelope, dict):  # program format 1 kept meta at the top level
        envelope = document
    meta = envelope.get("meta")
    # the shared record (``tuning`` / meta ``tuned_on``) and the legacy ``tuning_ids`` tune wrote before it;
    # a record present but unreadable is refused, never dropped
    records = [*read_tuning_records(document, where=str(path)),
               *(read_tuning_records(meta, where=f"{path} (meta)") if meta is not document else [])]
    return TunedOn(str(path), tuple(records)) if records else None


def without_overlap(sample: list[Question], tuned: TunedOn | None, choice: DatasetChoice, *,
                    allow: bool) -> tuple[list[Question], dict[str, Any]]:
    """``sample`` without the questions the Special Set / program was tuned on (unless ``allow``), and
    what ``run.json`` records of it (``overlap``). ``tuned``: `tuned_on`'s records (None: nothing
    recorded), matched by content, never by id alone; what is left out (or kept) is said on stderr."""
    source = tuned.source if tuned is not None else None
    overlap = (tuned.overlapping(sample, dataset=choice.name, dataset_sha256=choice.sha256)
               if tuned is not None else [])
    record = {"source": source, "overlapping": len(overlap), "allowed": allow,
              "excluded_ids": [] if allow else overlap}
    if overlap and not allow:
        logger.warning(f"left out {len(overlap)} of {len(sample)} questions that {source} was tuned on "
                       f"(--allow-overlap keeps them)")
        left_out = set(overlap)
        sample = [q for q in sample if q.id not in left_out]
    elif overlap:
        logger.warning(f"{len(overlap)} of {len(sample)} questions were used to tune {source} "
                       f"(kept: --allow-overlap)")
    return sample, record
