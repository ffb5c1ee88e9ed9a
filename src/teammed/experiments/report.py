"""``report`` as a library call: `report(ReportSpec) -> Report`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from teammed.errors import TeammedError

if TYPE_CHECKING:
    from teammed.experiments.specs import ReportSpec

__all__ = ["report", "Report", "run_dirs"]


class Report(BaseModel):
    """A report's files: ``report.md`` (with its tables and tests), ``summary.json`` and, with compare,
    ``compare.html``; ``note`` says what the report could not do (no baseline to test against)."""

    model_config = ConfigDict(frozen=True)

    path: Path
    compare_path: Path | None = None
    note: str | None = None

    def summary(self) -> dict[str, Any]:
        """The report's figures (``summary.json`` beside ``report.md``)."""
        return json.loads((self.path.parent / "summary.json").read_text())

    def text(self) -> str:
        compared = f"\ncompared question by question: {self.compare_path}" if self.compare_path else ""
        return f"report: {self.path}{compared}"


def _check_run_files(run_dir: Path) -> None:
    """A torn or hand-edited summary.json/run.json is named, with the fix, before the report reads it."""
    from teammed.inputs import read_json_object

    for name in ("summary.json", "run.json"):
        path = run_dir / name
        if path.exists():
            read_json_object(path, what="run file", fix="delete it (the report reads the rows in results.jsonl) "
                             "or rerun that run")


def run_dirs(dirs: tuple[Path, ...] | list[Path]) -> list[Path]:
    """Every run directory under ``dirs`` (searched recursively for results.jsonl), each checked."""
    found_all = []
    for d in dirs:
        if not Path(d).is_dir():
            raise TeammedError(f"{d} is not a directory; pass run directories written by `teammed run`")
        found = sorted(p.parent for p in Path(d).rglob("results.jsonl"))
        if not found:
            raise TeammedError(f"no results.jsonl under {d}; pass run directories written by `teammed run`")
        found_all.extend(found)
    for run_dir in found_all:
        _check_run_files(run_dir)
    return found_all


def report(spec: ReportSpec) -> Report:
    """Tables, significance tests and plots over the runs under ``spec.dirs``, written to ``spec.out``.
    Without a baseline, configurations are tested against one labelled ``base`` when there is one."""
    from teammed.experiments.specs import ReportSpec, checked

    spec = checked(ReportSpec, spec)
    from teammed.evals import build_report
    from teammed.evals.report import ReportError
    from teammed.inputs import check_writable_dir

    found = run_dirs(spec.dirs)
    check_writable_dir(Path(spec.out))
    if spec.model is not None and spec.published is None:
        raise TeammedError("--model names whose published outputs to set beside the runs: give --published DIR "
                           "(MedAgentsBench's output/ folder) too")
    published = {"published": spec.published, "published_model": spec.model, "published_split": spec.published_split}
    if spec.compare is True:
        path = build_report(found, Path(spec.out), baseline=spec.baseline, compare=True, **published)
        return Report(path=path, compare_path=Path(spec.out) / "compare.html")
    if spec.compare:  # a published method or file: its section is in report.md and summary.json
        return Report(path=build_report(found, Path(spec.out), baseline=spec.baseline, compare=spec.compare,
                                        **published))
    try:
        return Report(path=build_report(found, Path(spec.out), baseline=spec.baseline or "base", **published))
    except ReportError as exc:
        if spec.baseline or not str(exc).startswith("baseline"):
            raise
    return Report(path=build_report(found, Path(spec.out), baseline=None, **published),
                  note="no run is labelled 'base', so the report has no significance tests; pass --baseline LABEL "
                       "to compare with another configuration")
