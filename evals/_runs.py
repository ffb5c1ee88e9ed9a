"""Reading run directories (``results.jsonl`` + ``summary.json``) and grouping them across seeds."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from teammed.errors import DataError
from teammed.evals._facts import RowFacts, row_facts
from teammed.results import ResultRow, RunIdentity, iter_rows

logger = logging.getLogger(__name__)

# Identity fields that tell one seed's sample from another's: runs differing only in these merge.
_SAMPLE_FIELDS = {"seed", "question_ids", "program"}


# the label of a run that kept questions its Special Set / program was tuned on (`run --allow-overlap`)
OVERLAP_MARK = " [tuning overlap]"


@dataclass(frozen=True)
class Run:
    """One run directory: what the report reads of its rows (`RowFacts`, one per row; the full rows
    stay on disk and are read again, a page at a time, for the transcripts: `rows_of`) and the
    identity fields report grouping uses."""

    path: Path
    rows: tuple[RowFacts, ...]
    summary: dict[str, Any]
    dataset: str
    config: str
    system: str
    seed: Any
    dataset_sha256: str | None = None
    n_planned: int | None = None  # questions the run meant to answer (run.json), when known
    identity: RunIdentity | None = None  # run.json's identity (None for runs written before it)
    row_config: dict[str, Any] | None = None  # the first row's teamwork configuration, when rows carry one
    part: str | None = None  # for one model's part of a run split by model (`split_by_model`): that model

    def rows_of(self, ids: set[str]) -> list[ResultRow]:
        """The full rows (transcripts included) of this run whose ids are among ``ids``, read from
        its ``results.jsonl`` one line at a time (its torn tail was reported when it was loaded).
        A part of a run split by model keeps only the rows that model answered."""
        mine = {row.id for row in self.rows} & ids
        return [row for row, _ in iter_rows(self.path / "results.jsonl", warn=False, ids=mine)
                if self.part is None or (row.answered_models or "") == self.part]

    def read_rows(self) -> list[ResultRow]:
        """All of this run's full, typed rows, read from its ``results.jsonl``."""
        return self.rows_of({row.id for row in self.rows})

    @property
    def answered_by(self) -> str | None:
        """The models that answered the run's rows (``a+b`` when they differ; None: rows do not record it)."""
        models = sorted({m for row in self.rows for m in (row.answered_models or "").split("+") if m})
        return "+".join(models) or None

    def variant(self) -> dict[str, Any]:
        """What must be equal for two runs to be seeds of one system: the identity without the
        sample (seed, question ids) and the program's path, and the models that answered (when the rows
        record them); flattened so differences can be named."""
        answered = {"answered_by": self.answered_by} if self.answered_by else {}
        if self.identity is None:
            return answered
        fields = {**self.identity.model_dump(mode="json", exclude=_SAMPLE_FIELDS), **answered}
        config = fields.pop("config", None) or {}
        program_config = fields.pop("program_config", None) or {}
        flat = {k: v for k, v in fields.items() if k not in ("dataset", "label", "system")}
        flat.update({f"config.{k}" if k in flat else k: v for k, v in config.items()})
        flat.update({f"program_config.{k}": v for k, v in program_config.items()})
        return flat

    @property
    def partial(self) -> bool:
        """Fewer rows than the run planned (stopped, killed or still running)."""
        return self.n_planned is not None and len(self.rows) < self.n_planned


@dataclass(frozen=True)
class Group:
    """All seeds of one (data set, configuration) pair."""

    dataset: str
    config: str
    system: str
    runs: tuple[Run, ...]

    @property
    def rows(self) -> list[RowFacts]:
        return [row for run in self.runs for row in run.rows]


class _Firsts:
    """The first value each of a few row fields takes, gathered as rows stream by."""

    KEYS = ("system", "label", "dataset", "seed", "dataset_sha256", "config")

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def see(self, row: ResultRow) -> None:
        for key in self.KEYS:
            if key not in self.values and (value := getattr(row, key, None)) is not None and value != {}:
                self.values[key] = value


def _read_facts(path: Path) -> tuple[list[RowFacts], _Firsts]:
    """The facts of every row of a ``results.jsonl`` (rows written before schema versions are
    upgraded, rows of a newer schema or invalid ones refused naming the line and the fix), and
    the first value of the fields a run's identity falls back on. One row is held at a time."""
    facts, firsts = [], _Firsts()
    for row, _ in iter_rows(path):
        facts.append(row_facts(row))
        firsts.see(row)
    return facts, firsts


def config_name(label: Any, system: Any) -> str:
    """A configuration's name in tables: the teamwork label, else the system (``system/label``
    when a peer system also carries a distinct label, so names never collide)."""
    label, system = (str(v) if v else "" for v in (label, system))
    if system in ("", "teamwork"):
        return label or "teamwork"
    return system if label in ("", system) else f"{system}/{label}"


def _field(summary: dict[str, Any], firsts: _Firsts, key: str) -> Any:
    """``summary[key]``, else the first row's typed field of that name that is set."""
    if summary.get(key) is not None:
        return summary[key]
    return firsts.values.get(key)


def load_run(run_dir: Path) -> Run:
    """Read one run directory; ``summary.json`` is optional (identity then comes from the rows)."""
    run_dir = Path(run_dir)
    results = run_dir / "results.jsonl"
    if not results.is_file():
        raise DataError(f"{run_dir} has no results.jsonl; pass run directories written by `teammed run`")
    typed, firsts = _read_facts(results)
    if not typed:
        raise DataError(f"{results} has no result rows; rerun it or leave that run directory out")
    summary = _json(run_dir / "summary.json")
    manifest = _json(run_dir / "run.json")
    system = _field(summary, firsts, "system") or "teamwork"
    planned = manifest.get("n_questions", summary.get("n_planned"))
    identity = _identity(manifest, run_dir)
    config = config_name(_field(summary, firsts, "label"), system)
    overlap = manifest.get("overlap")
    # a run that kept tuning questions is never averaged with clean runs: its own row
    if isinstance(overlap, dict) and overlap.get("allowed") and overlap.get("overlapping"):
        config += OVERLAP_MARK
    return Run(
        path=run_dir,
        rows=tuple(typed),
        summary=summary,
        dataset=str(_field(summary, firsts, "dataset") or "unknown"),
        config=config,
        system=str(system),
        seed=_field(summary, firsts, "seed"),
        dataset_sha256=_field(summary, firsts, "dataset_sha256"),
        n_planned=planned if isinstance(planned, int) else None,
        identity=identity,
        row_config=firsts.values.get("config"),
    )


def _identity(manifest: dict[str, Any], run_dir: Path) -> RunIdentity | None:
    recorded = manifest.get("identity")
    if recorded is None:
        return None
    try:
        return RunIdentity.model_validate(recorded)
    except ValueError as exc:
        raise DataError(f"{run_dir / 'run.json'} has an identity this teammed cannot read ({exc.__class__.__name__});"
                        f" rerun it, or leave that run directory out") from None


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        logger.warning("%s is not valid JSON; ignoring it", path)
        return {}
    return data if isinstance(data, dict) else {}


def unique_dirs(run_dirs: Sequence[Path | str]) -> list[Path]:
    """The run directories by their real path, each once, in first-seen order (a directory passed
    twice, through a symlink, or found again under a parent passed beside it counts once)."""
    seen: dict[Path, Path] = {}
    for run_dir in run_dirs:
        seen.setdefault(Path(run_dir).resolve(), Path(run_dir))
    return list(seen.values())


def _sameness(run: Run) -> str:
    """What two directories of one run share: the recorded identity (seed and question ids included),
    else, for runs written before identities, the data set, configuration and seed."""
    if run.identity is not None:
        return run.identity.model_dump_json()
    return _key([run.dataset, run.dataset_sha256, run.config, run.system, run.seed])


def _answers(run: Run) -> set[tuple[str, str | None, bool]]:
    return {(r.id, r.prediction, r.failed) for r in run.rows}


def unique_runs(runs: Sequence[Run]) -> list[Run]:
    """Each run once. Two directories hold the same run when they share its identity and one's rows
    are among the other's (a copy of a run directory, taken finished or mid-run): the one with more
    rows is kept and both are named in a warning. Two executions of one identity that answered
    differently are both kept (`group_runs` warns that they repeat a seed)."""
    kept: list[Run] = []
    for run in runs:
        mine = _answers(run)
        for i, other in enumerate(kept):
            if _sameness(other) != _sameness(run):
                continue
            theirs = _answers(other)
            if mine <= theirs or theirs <= mine:
                keep = run if len(mine) > len(theirs) else other
                logger.warning("%s and %s hold the same run (one identity, the same answers); counting it once, "
                               "from %s", other.path, run.path, keep.path)
                kept[i] = keep
                break
        else:
            kept.append(run)
    return kept


def distinguish_datasets(runs: list[Run]) -> list[Run]:
    """Runs whose data sets share a name but not a content hash get ``name@hash8`` as their
    data set, so two different files called ``sampled_50.jsonl`` never share a column."""
    hashes: dict[str, set[str | None]] = {}
    for run in runs:
        hashes.setdefault(run.dataset, set()).add(run.dataset_sha256)
    out = []
    for run in runs:
        if len(hashes[run.dataset]) > 1:
            suffix = run.dataset_sha256[:8] if run.dataset_sha256 else "unhashed"
            run = replace(run, dataset=f"{run.dataset}@{suffix}")
        out.append(run)
    return out


def _key(variant: Any) -> str:
    return json.dumps(variant, sort_keys=True, default=str)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def distinguish_variants(runs: list[Run]) -> list[Run]:
    """Runs that share a data set and a label but not their identity (model, team size, turns,
    program, split, ...) are different systems: each gets the differing fields in its label, e.g.
    ``base [n_agents=2]`` and ``base [n_agents=3]``, so a report never averages them as seeds."""
    variants: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for run in runs:
        variants.setdefault((run.dataset, run.config), {})[_key(run.variant())] = run.variant()
    out = []
    for run in runs:
        seen = variants[(run.dataset, run.config)]
        if len(seen) > 1:
            names = sorted({k for v in seen.values() for k in v if len({_key(w.get(k)) for w in seen.values()}) > 1})
            mine = run.variant()
            tag = ", ".join(f"{k}={_short(mine.get(k))}" for k in names)
            run = replace(run, config=f"{run.config} [{tag}]")
        out.append(run)
    return out


def split_by_model(runs: list[Run]) -> list[Run]:
    """A run whose rows were answered by different models (a Router spreading questions over
    deployments) becomes one run per answering model (rows naming several models, or none, form
    their own part), so a report never averages two models as one system."""
    out: list[Run] = []
    for run in runs:
        parts: dict[str, list[RowFacts]] = {}
        for row in run.rows:
            parts.setdefault(row.answered_models or "", []).append(row)
        if len([k for k in parts if k]) < 2:
            out.append(run)
            continue
        out += [replace(run, rows=tuple(rows), n_planned=None, part=key) for key, rows in parts.items()]
    return out


def group_runs(runs: list[Run]) -> list[Group]:
    """Runs grouped by (data set, configuration) across seeds, in first-seen order. A run answered by
    several models is split per model first; runs of one label whose identities (or answering models)
    differ beyond the sample are distinguished, never merged."""
    grouped: dict[tuple[str, str], list[Run]] = {}
    for run in distinguish_variants(split_by_model(runs)):
        grouped.setdefault((run.dataset, run.config), []).append(run)
    groups = []
    for (dataset, config), members in grouped.items():
        seeds = [run.seed for run in members]
        if len(set(map(str, seeds))) < len(seeds):
            logger.warning("%s on %s repeats seeds %s; each run still counts once", config, dataset, seeds)
        groups.append(Group(dataset, config, members[0].system, tuple(members)))
    return groups
