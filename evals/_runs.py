"""Reading run directories (``results.jsonl`` + ``summary.json``) and grouping them across seeds."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from teammed.errors import DataError
from teammed.records import ResultRow, load_row

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Run:
    """One run directory: its rows and the identity fields report grouping uses."""

    path: Path
    rows: list[dict[str, Any]]  # the stored form of ``results``, for consumers not yet typed
    summary: dict[str, Any]
    dataset: str
    config: str
    system: str
    seed: Any
    dataset_sha256: str | None = None
    n_planned: int | None = None  # questions the run meant to answer (run.json), when known
    identity: tuple[tuple[str, str], ...] = ()  # `system_key`: the run identity minus its seed
    results: tuple[ResultRow, ...] = ()  # the typed, versioned rows (`teammed.records.ResultRow`)

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
    def rows(self) -> list[dict[str, Any]]:
        return [row for run in self.runs for row in run.rows]


def _read_rows(path: Path) -> list[ResultRow]:
    """The typed rows of a ``results.jsonl``: rows written before schema versions are upgraded, rows
    of a newer schema (or invalid ones) refused with a message naming the line and the fix."""
    rows: list[ResultRow] = []
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines) and not text.endswith("\n"):
                logger.warning("%s: ignoring a torn last line (the run was interrupted; --resume cuts it)", path)
                continue
            message = f"{path}:{number} is not valid JSON ({exc.msg}); fix or remove that line"
            raise DataError(message) from None
        rows.append(load_row(row, where=f"{path}:{number}"))
    return rows


def config_name(label: Any, system: Any) -> str:
    """A configuration's name in tables: the teamwork label, else the system (``system/label``
    when a peer system also carries a distinct label, so names never collide)."""
    label, system = (str(v) if v else "" for v in (label, system))
    if system in ("", "teamwork"):
        return label or "teamwork"
    return system if label in ("", system) else f"{system}/{label}"


def _field(summary: dict[str, Any], rows: list[ResultRow], key: str) -> Any:
    """``summary[key]``, else the first row's typed field of that name that is set."""
    if summary.get(key) is not None:
        return summary[key]
    return next((value for row in rows if (value := getattr(row, key, None)) is not None), None)


def load_run(run_dir: Path) -> Run:
    """Read one run directory; ``summary.json`` is optional (identity then comes from the rows)."""
    run_dir = Path(run_dir)
    results = run_dir / "results.jsonl"
    if not results.is_file():
        raise DataError(f"{run_dir} has no results.jsonl; pass run directories written by `teammed run`")
    typed = _read_rows(results)
    if not typed:
        raise DataError(f"{results} has no result rows; rerun it or leave that run directory out")
    summary = _json(run_dir / "summary.json")
    manifest = _json(run_dir / "run.json")
    system = _field(summary, typed, "system") or "teamwork"
    planned = manifest.get("n_questions", summary.get("n_planned"))
    return Run(
        path=run_dir,
        rows=[row.model_dump(mode="json", exclude_unset=True) for row in typed],
        results=tuple(typed),
        summary=summary,
        dataset=str(_field(summary, typed, "dataset") or "unknown"),
        config=config_name(_field(summary, typed, "label"), system),
        system=str(system),
        seed=_field(summary, typed, "seed"),
        dataset_sha256=_field(summary, typed, "dataset_sha256"),
        n_planned=planned if isinstance(planned, int) else None,
        identity=system_key(manifest, summary, typed),
    )


# Identity fields that vary with the seed (one system's seeds merge) or only name a file.
_PER_SEED = ("seed", "question_ids", "program", "label")


def system_key(manifest: dict[str, Any], summary: dict[str, Any], rows: list[ResultRow]) -> tuple[
        tuple[str, str], ...]:
    """What makes two runs the same *system* on the same data: the `RunIdentity` in ``run.json``
    minus its seed (and the seed's sample), with the configuration's fields flattened so a
    difference names the field (``n_agents``, not ``config``). Runs written before run
    identities fall back to what their rows record (system, configuration, program, data set)."""
    from teammed.records import RunIdentity

    recorded = manifest.get("identity")
    if isinstance(recorded, dict):
        try:
            fields = RunIdentity.model_validate(recorded).model_dump(mode="json")
        except ValueError:
            fields = dict(recorded)
    else:
        fields = {key: _field(summary, rows, key) for key in ("system", "config", "program_sha256", "dataset",
                                                              "dataset_sha256", "split")}
    flat: dict[str, Any] = {}
    for key, value in fields.items():
        if key in _PER_SEED:
            continue
        if isinstance(value, dict) and key == "config":
            flat.update({name: v for name, v in value.items() if name != "name"})
        else:
            flat[key] = value
    return tuple(sorted((key, json.dumps(value, sort_keys=True, default=str)) for key, value in flat.items()))


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        logger.warning("%s is not valid JSON; ignoring it", path)
        return {}
    return data if isinstance(data, dict) else {}


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


def _short(value: str) -> str:
    text = value.strip('"')
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):  # a content hash
        return text[:8]
    return text if len(text) <= 40 else text[:37] + "..."


def _distinct_names(config: str, keys: list[tuple[tuple[str, str], ...]]) -> list[str]:
    """``config [field=value, ...]`` for each of several systems sharing one name, naming the
    identity fields on which they differ."""
    as_dicts = [dict(key) for key in keys]
    fields = sorted({f for d in as_dicts for f in d}, key=str)
    differing = [f for f in fields if len({d.get(f) for d in as_dicts}) > 1]
    return [f"{config} [" + ", ".join(f"{f}={_short(d.get(f, 'none'))}" for f in differing) + "]"
            for d in as_dicts]


def group_runs(runs: list[Run]) -> list[Group]:
    """Runs grouped by system (data set, configuration name and `system_key`: the run identity
    minus the seed), in first-seen order. Only seeds of one identity merge; two systems that
    share a name (say ``base`` on two models) become two rows named by what differs
    (``base [model=x]``, ``base [model=y]``), never one."""
    grouped: dict[tuple[str, str, tuple[tuple[str, str], ...]], list[Run]] = {}
    for run in runs:
        grouped.setdefault((run.dataset, run.config, run.identity), []).append(run)
    by_name: dict[tuple[str, str], list[tuple[tuple[str, str], ...]]] = {}
    for dataset, config, key in grouped:
        by_name.setdefault((dataset, config), []).append(key)
    names: dict[tuple[str, str, tuple[tuple[str, str], ...]], str] = {}
    for (dataset, config), keys in by_name.items():
        labels = _distinct_names(config, keys) if len(keys) > 1 else [config]
        names.update({(dataset, config, key): label for key, label in zip(keys, labels, strict=True)})
    groups = []
    for group_key, members in grouped.items():
        dataset, name = group_key[0], names[group_key]
        seeds = [run.seed for run in members]
        if len(set(map(str, seeds))) < len(seeds):
            logger.warning("%s on %s repeats seeds %s; each run still counts once", name, dataset, seeds)
        members = [replace(run, config=name) for run in members]
        groups.append(Group(dataset, name, members[0].system, tuple(members)))
    return groups
