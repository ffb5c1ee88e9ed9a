"""What ``teammed run`` will do, decided before anything is written: its cells, their directories
and their identities.

A run is a grid: every configuration (``--presets a,b``, else the one configuration) at every
sampling seed (``--seeds``, else ``--seed``). Each cell is one run directory: ``--out`` itself
for a single cell, else ``<--out, or runs/<time>-<dataset>>/<label>/seed<seed>``. A compiled
program's label ends in ``+compiled-<hash8>``, so its rows never merge with those of the
uncompiled configuration. A directory that already holds results is refused unless the run
resumes. Each cell's `RunIdentity` (``run.json``: what ``--resume`` compares) is built here, as
is what ``run.json`` records beside it, and the pool few-shot examples are drawn from (never the
cell's own questions).

Planning only: the CLI reads the flags, loads and samples the questions (``sample``, which also
leaves out what was tuned on) and runs each cell with `teammed.runner.run_questions`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teammed.errors import TeammedError
from teammed.records import RunIdentity, redacted_argv
from teammed.types import Question

if TYPE_CHECKING:
    from teammed.backends.resolve import Deployment
    from teammed.config import TeamworkConfig

__all__ = ["RunCell", "plan_cells", "run_dir", "check_results", "run_identity", "run_meta", "few_shot_pool"]


@dataclass(frozen=True)
class RunCell:
    """One configuration at one seed: its questions, its directory, and what was left out of it."""

    label: str
    config: TeamworkConfig | None
    seed: int
    questions: list[Question]
    overlap: dict[str, Any]  # the tuning overlap, as run.json records it
    out: Path
    sampled: list[Question] | None = None  # with --shard: every shard's questions (few-shot pools leave them out)
    shard: tuple[int, int] | None = None  # --shard I/N


def run_dir(out: str | Path | None, *, stamp: str, dataset: str, label: str, seed: int, grid: bool,
            shard: tuple[int, int] | None = None) -> Path:
    """A cell's directory: ``--out`` for a single cell; else
    ``<--out or runs/<stamp>-<dataset>>/<label>/seed<seed>``; with ``--shard I/N``, ``shard<I>of<N>`` in it."""
    root = Path(out) if out else Path("runs") / f"{stamp}-{dataset}"
    path = root / label / f"seed{seed}" if grid or not out else root
    return path / f"shard{shard[0]}of{shard[1]}" if shard else path


def check_results(out: Path, *, resuming: bool) -> str | None:
    """Refuse a directory already holding results unless the run resumes; when it resumes where
    nothing was written, the notice to show (a new run starts there)."""
    results = out / "results.jsonl"
    if not resuming and results.is_file() and results.stat().st_size > 0:
        raise TeammedError(f"{results} already holds results; pass --resume to continue that run or "
                           f"choose another --out")
    if resuming and not results.is_file():
        return f"teammed: nothing to resume in {out} (no results.jsonl); starting a new run there"
    return None


def plan_cells(configs: Sequence[tuple[str, TeamworkConfig | None]], seeds: Sequence[int], *,
               sample: Callable[[int], tuple[list[Question], dict[str, Any]]], dataset: str,
               out: str | Path | None, program_sha256: str | None, resuming: bool,
               check_dir: Callable[[Path], None], say: Callable[[str], None],
               stamp: str | None = None, shard: tuple[int, int] | None = None,
               part: Callable[[list[Question]], list[Question]] | None = None) -> list[RunCell]:
    """Every cell of the grid, configurations outer and seeds inner, each directory checked
    (``check_dir``: writable; `check_results`) before anything is written. ``sample(seed)`` gives a
    cell's questions and its overlap record; ``say`` shows a notice. With ``shard=(I, N)`` a cell holds
    ``part(sample)``: the I-th of N disjoint parts of its sample (the CLI passes
    `teammed.data.sampling.shard_questions`, strata kept), in its own directory."""

    grid = len(seeds) > 1 or len(configs) > 1
    stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
    cells = []
    for label, config in configs:
        if program_sha256:  # a compiled program never merges with the uncompiled configuration
            label = f"{label}+compiled-{program_sha256[:8]}"
        for seed in seeds:
            sampled, overlap = sample(seed)
            questions = part(sampled) if shard and part is not None else sampled
            path = run_dir(out, stamp=stamp, dataset=dataset, label=label, seed=seed, grid=grid, shard=shard)
            check_dir(path)
            notice = check_results(path, resuming=resuming)
            if notice:
                say(notice)
            cells.append(RunCell(label=label, config=config, seed=seed, questions=questions, overlap=overlap,
                                 out=path, sampled=sampled if shard else None, shard=shard))
    return cells


def run_identity(cell: RunCell, *, system: str, program: Mapping[str, Any], deployments: Sequence[Deployment],
                 api_base: str | None, dataset: str, dataset_sha256: str, split: str, revision: str | None,
                 n: int | None, stratify: str | None, shuffle_options: bool, temperature: float | None) -> RunIdentity:
    """A cell's `RunIdentity`. ``program``: a compiled program's part (`teammed.programs.persist.program_identity`);
    the server (``--api-base``) is part of the run, credentials masked."""
    from teammed import __version__
    from teammed.backends.resolve import describe
    from teammed.redact import redact

    return RunIdentity(
        system=system, label=cell.label, config=cell.config.model_dump(mode="json") if cell.config else None,
        **program, model="+".join(describe(d.spec) for d in deployments), deployments=[d.spec for d in deployments],
        api_base=redact(api_base.rstrip("/")) if api_base else None,
        dataset=dataset, dataset_sha256=dataset_sha256, split=split, revision=revision, n=n, seed=cell.seed,
        stratify=stratify, shuffle_options=shuffle_options, question_ids=[q.id for q in cell.questions],
        teammed_version=__version__, temperature=temperature,
        shard=f"{cell.shard[0]}/{cell.shard[1]}" if cell.shard else None,
    )


def run_meta(cell: RunCell, identity: RunIdentity, *, max_tokens: int | None, prompt_sha256: str) -> dict[str, Any]:
    """What ``run.json`` records beside the identity: the sampling, the split, the tuning overlap, the
    command (redacted), ``--max-tokens`` and the program's prompts' hash (signatures, instructions,
    field descriptions, demos)."""
    return {"sampling": {"n": identity.n, "seed": cell.seed, "stratify": identity.stratify,
                         "shuffle_options": identity.shuffle_options},
            "split": identity.split, "overlap": cell.overlap,
            "command": redacted_argv(sys.argv),
            "max_tokens": max_tokens, "prompt_sha256": prompt_sha256}


def few_shot_pool(source: Sequence[Question], questions: Sequence[Question]) -> list[Question]:
    """The questions few-shot examples may be drawn from: the source's, never the ones being answered."""
    chosen = {q.id for q in questions}
    return [q for q in source if q.id not in chosen]
