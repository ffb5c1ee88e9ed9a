"""Reading run directories (``results.jsonl`` + ``summary.json``) and grouping them across seeds."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from teammed.errors import DataError
from teammed.evals._facts import RowFacts, row_facts
from teammed.results import ResultRow, RunIdentity, iter_rows

logger = logging.getLogger(__name__)

# Identity fields that tell one seed's sample from another's: runs differing only in these merge.
_SAMPLE_FIELDS = {"seed", "question_ids", "program", "shard"}
# What the N shards of one run (`run --shard I/N`) differ in: the rest of their identities is equal.
_SHARD_FIELDS = {"shard", "question_ids", "program"}


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
    shards: tuple[Run, ...] = ()  # a run merged from its --shard parts (`merge_shards`): the parts
    shards_planned: int | None = None  # N of --shard I/N, for a merged run

    def rows_of(self, ids: set[str]) -> list[ResultRow]:
        """The full rows (transcripts included) of this run whose ids are among ``ids``, read from
        its ``results.jsonl`` one line at a time (its torn tail was reported when it was loaded).
        A question written twice gives its last row, as in `load_run`. A part of a run split by
        model keeps only the rows that model answered."""
        if self.shards:
            return [row for shard in self.shards for row in shard.rows_of(ids)]
        mine = {row.id for row in self.rows} & ids
        last: dict[tuple[Any, str], ResultRow] = {}
        for row, _ in iter_rows(self.path / "results.jsonl", warn=False, ids=mine):
            last[(row.seed, row.id)] = row  # a repeat keeps its first place and takes the later row
        return [row for row in last.values() if self.part is None or (row.answered_models or "") == self.part]

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
        """Fewer rows than the run planned (stopped, killed or still running), or, merged from shards,
        a shard missing or partial."""
        if self.shards_planned is not None and (len(self.shards) < self.shards_planned
                                                or any(s.partial for s in self.shards)):
            return True
        return self.n_planned is not None and len(self.rows) < self.n_planned

    @property
    def shard_note(self) -> str | None:
        """``"partial: k of N shards"`` for a merged run missing shards, else None."""
        if self.shards_planned is None or len(self.shards) >= self.shards_planned:
            return None
        have = {(_shard_of(s) or (0, 0))[0] for s in self.shards}
        missing = [str(i) for i in range(1, self.shards_planned + 1) if i not in have]
        return (f"partial: {len(self.shards)} of {self.shards_planned} shards (shard{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)} missing)")


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


# the row fields whose first value (gathered as rows stream by) a run's identity falls back on
_FIRST_KEYS = ("system", "label", "dataset", "seed", "dataset_sha256", "config")
_SHOWN_IDS = 5  # repeated ids a warning names


def _read_facts(path: Path) -> tuple[list[RowFacts], dict[str, Any]]:
    """The facts of every row of a ``results.jsonl`` (rows written before schema versions are
    upgraded, rows of a newer schema or invalid ones refused naming the line and the fix), and
    the first value of the fields a run's identity falls back on. One row is held at a time.

    Each question counts once: a file holding one (seed, id) twice (two processes appending to
    one file, or files concatenated) keeps the last row written for it, in the place of the first,
    with a warning naming the file and the repeated ids."""
    facts: dict[tuple[Any, str], RowFacts] = {}
    firsts: dict[str, Any] = {}
    repeated: dict[str, None] = {}
    for row, _ in iter_rows(path):
        key = (row.seed, row.id)
        if key in facts:
            repeated[row.id] = None
        facts[key] = row_facts(row)
        for field in _FIRST_KEYS:
            if field not in firsts and (value := getattr(row, field, None)) is not None and value != {}:
                firsts[field] = value
    if repeated:
        shown = ", ".join(list(repeated)[:_SHOWN_IDS]) + (", ..." if len(repeated) > _SHOWN_IDS else "")
        logger.warning("%s holds %d questions more than once (%s); counting each once, from the last row written "
                       "for it", path, len(repeated), shown)
    return list(facts.values()), firsts


def config_name(label: Any, system: Any) -> str:
    """A configuration's name in tables: the teamwork label, else the system (``system/label``
    when a peer system also carries a distinct label, so names never collide)."""
    label, system = (str(v) if v else "" for v in (label, system))
    if system in ("", "teamwork"):
        return label or "teamwork"
    return system if label in ("", system) else f"{system}/{label}"


def _field(summary: dict[str, Any], firsts: dict[str, Any], key: str) -> Any:
    """``summary[key]``, else the first row's typed field of that name that is set."""
    return summary[key] if summary.get(key) is not None else firsts.get(key)


def load_run(run_dir: Path) -> Run:
    """Read one run directory; ``summary.json`` is optional (identity then comes from the rows).
    A question written twice counts once (`_read_facts`)."""
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
        row_config=firsts.get("config"),
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
    """What two directories of one run share: the recorded identity (data set and its hash, split,
    seed, question ids, system, label, configuration, model, program hash, ...), else, for runs
    written before identities, the data set, configuration, seed and the model that answered."""
    if run.identity is not None:
        return run.identity.model_dump_json()
    return _key([run.dataset, run.dataset_sha256, run.config, run.system, run.seed, run.summary.get("model"),
                 run.answered_by])


def _mtime(run: Run) -> float:
    try:
        return (run.path / "results.jsonl").stat().st_mtime
    except OSError:
        return float("-inf")


def _preferred(first: Run, second: Run) -> tuple[Run, str]:
    """The directory of one run that the report counts, and why (see `unique_runs`)."""
    rules: tuple[tuple[Callable[[Run], float], str], ...] = (
        (lambda run: len(run.rows), "it has more questions"),
        (lambda run: -sum(bool(row.failed) for row in run.rows), "fewer of its questions failed"),
        (_mtime, "its results.jsonl is newer"))
    for score, why in rules:
        if score(first) != score(second):
            return (first if score(first) > score(second) else second), why
    return first, "it was passed first"


def unique_runs(runs: Sequence[Run]) -> list[Run]:
    """Each run once. Two directories hold the same run when they share its identity (`_sameness`:
    the whole recorded `RunIdentity`, seed and question ids included) and answered at least one
    question in common: a copy of a run directory, taken finished or mid-run, or the backup kept
    beside a directory continued with ``--resume``/``--retry-failed``. The report counts one of
    them, chosen by these rules in turn: the one with more questions (rows) is the more complete;
    then the one with fewer failed questions (a ``--retry-failed`` pass answered them again); then
    the one whose ``results.jsonl`` was modified last (the newer); then the one passed first. A
    warning names both directories, the one kept and why. Runs of one identity that share no
    question (two parts of one sample) are both kept (`group_runs` warns that they repeat a seed)."""
    kept: list[Run] = []
    for run in runs:
        mine = {row.id for row in run.rows}
        for i, other in enumerate(kept):
            if _sameness(other) != _sameness(run) or not mine & {row.id for row in other.rows}:
                continue
            keep, why = _preferred(other, run)
            logger.warning("%s and %s hold the same run (one identity, %d questions in common); counting it once, "
                           "from %s: %s", other.path, run.path, len(mine & {row.id for row in other.rows}),
                           keep.path, why)
            kept[i] = keep
            break
        else:
            kept.append(run)
    return kept


def _shard_of(run: Run) -> tuple[int, int] | None:
    shard = run.identity.shard if run.identity is not None else None
    if not shard:
        return None
    index, _, count = shard.partition("/")
    return int(index), int(count)


def merge_shards(runs: Sequence[Run]) -> list[Run]:
    """The shards of one run (``run --shard I/N``: identities equal but for the shard and its
    question ids) as one run, in the place of its first shard: its rows are every shard's, n their
    sum. Shards that share a question are refused (`DataError` naming both directories); a shard
    missing leaves the run marked partial ("partial: k of N shards", see `Run.shard_note`), never
    reported as complete. Runs without a shard pass through."""
    families: dict[str, list[Run]] = {}
    order: list[str | Run] = []
    for run in runs:
        shard = _shard_of(run)
        if shard is None or run.identity is None:
            order.append(run)
            continue
        key = _key([run.identity.model_dump(mode="json", exclude=_SHARD_FIELDS), run.part])
        if key not in families:
            order.append(key)
        families.setdefault(key, []).append(run)
    return [item if isinstance(item, Run) else _merge_family(families[item]) for item in order]


def _merge_family(family: Sequence[Run]) -> Run:
    """The shards of one run as one run, after checking they are disjoint and of one split."""
    parts = sorted(family, key=lambda r: _shard_of(r) or (0, 0))
    _check_disjoint_shards(parts)
    indexes = [(_shard_of(p) or (0, 0))[0] for p in parts]
    count = _shard_count(parts, indexes)
    planned = [p.n_planned for p in parts]
    merged = replace(parts[0], rows=tuple(row for p in parts for row in p.rows), shards=tuple(parts),
                     shards_planned=count,
                     n_planned=sum(n for n in planned if n is not None) if None not in planned else None)
    if len(parts) < count:
        logger.warning("%s: %s; its row is marked partial and never bold", parts[0].path.parent,
                       merged.shard_note)
    return merged


def _check_disjoint_shards(parts: Sequence[Run]) -> None:
    seen: dict[str, Run] = {}
    for part in parts:
        for row in part.rows:
            if row.id in seen and seen[row.id] is not part:
                raise DataError(f"{seen[row.id].path} and {part.path} are shards of one run that both answered "
                                f"question {row.id!r}: shards must be disjoint. They were run with different "
                                f"samples or --shard counts; report one of them, or run the shards again")
            seen.setdefault(row.id, part)


def _shard_count(parts: Sequence[Run], indexes: Sequence[int]) -> int:
    """The N of ``--shard I/N`` the shards share; a shard passed twice or two splits are refused."""
    repeated = sorted({i for i in indexes if indexes.count(i) > 1})
    if repeated:
        twice = [str(p.path) for p, i in zip(parts, indexes, strict=True) if i == repeated[0]]
        raise DataError(f"shard {repeated[0]} of one run is passed twice ({', '.join(twice)}); pass each "
                        f"shard once")
    counts = sorted({(_shard_of(p) or (0, 0))[1] for p in parts})
    if len(counts) > 1:
        raise DataError(f"the shards of one run were split {' and '.join(f'{n} ways' for n in counts)} "
                        f"({', '.join(str(p.path) for p in parts)}); report the shards of one split")
    return counts[0]


def distinguish_datasets(runs: list[Run]) -> list[Run]:
    """Runs whose data sets share a name but not a content hash get ``name@hash8`` as their
    data set, so two different files called ``sampled_50.jsonl`` never share a column."""
    hashes: dict[str, set[str | None]] = {}
    for run in runs:
        hashes.setdefault(run.dataset, set()).add(run.dataset_sha256)
    return [replace(run, dataset=f"{run.dataset}@{run.dataset_sha256[:8] if run.dataset_sha256 else 'unhashed'}")
            if len(hashes[run.dataset]) > 1 else run for run in runs]


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
        several = len([k for k in parts if k]) >= 2
        out += ([replace(run, rows=tuple(rows), n_planned=None, part=key) for key, rows in parts.items()]
                if several else [run])
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
