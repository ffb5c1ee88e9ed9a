"""Every command of the ``teammed`` CLI as one typed library call.

Each takes a frozen spec and returns a typed result holding what the command prints and writes::

    from teammed import experiments as ex

    result = ex.run(ex.RunSpec(data="demo", team="all", backend="scripted", n=4))
    print(result.cells[0].accuracy, result.cells[0].out)
    frame = result.to_pandas()                      # needs pandas

``progress=`` takes a callback of `teammed.events.Progress` events (None: silent). The CLI
(`teammed.cli`) parses flags into the same specs, calls the same functions and prints the results.

| command   | function            | spec            | result            |
|-----------|---------------------|-----------------|-------------------|
| ask       | `ask`               | `AskSpec`       | `AskResult`       |
| run       | `run`               | `RunSpec`       | `RunResult`       |
| report    | `report`            | `ReportSpec`    | `Report`          |
| compile   | `compile_program`   | `CompileSpec`   | `CompileResult`   |
| search    | `search`            | `SearchSpec`    | `SearchResult`    |
| tune      | `tune`              | `TuneSpec`      | `TuneResult`      |
| reproduce | `reproduce`         | `ReproduceSpec` | `ReproduceResult` |
"""

from __future__ import annotations

from teammed.events import Progress
from teammed.experiments.optimize import CompileResult, SearchResult, compile_program, search
from teammed.experiments.plan import Plan, plan
from teammed.experiments.report import Report, report
from teammed.experiments.run import AskResult, RunCellResult, RunResult, RunSummary, ask, run
from teammed.experiments.specs import (
    AskSpec,
    BackendSpec,
    CompileSpec,
    DataSpec,
    ReportSpec,
    ReproduceSpec,
    RunSpec,
    SearchSpec,
    TeamSpec,
    TuneSpec,
)
from teammed.experiments.tune import ReproduceResult, TuneResult, reproduce, tune

__all__ = [
    "ask", "run", "report", "compile_program", "search", "tune", "reproduce", "plan", "Plan",
    "AskSpec", "RunSpec", "ReportSpec", "CompileSpec", "SearchSpec", "TuneSpec", "ReproduceSpec",
    "DataSpec", "TeamSpec", "BackendSpec",
    "AskResult", "RunResult", "RunCellResult", "RunSummary", "Report", "CompileResult", "SearchResult", "TuneResult",
    "ReproduceResult", "Progress",
]
