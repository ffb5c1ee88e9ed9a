"""`teammed.experiments`: every command is one typed library call whose result equals what the CLI
writes for the same spec, with typed progress events for a Python caller."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teammed import experiments as ex
from teammed.backends.simulated import simulated_questions
from teammed.cli import build_parser, main, spec_of
from teammed.events import Progress

SCRIPTED = ex.BackendSpec(model="scripted", cache=False)


def _rows(out: Path) -> list[tuple]:
    return sorted((r["id"], r["prediction"], r["correct"], r["calls"], r["prompt_tokens"], r["completion_tokens"])
                  for r in map(json.loads, (out / "results.jsonl").read_text().splitlines()))


def test_the_cli_builds_the_spec_a_python_caller_writes(tmp_path):
    argv = ["run", "--dataset", "demo", "--preset", "all", "--n", "3", "--model", "scripted", "--no-cache",
            "--out", str(tmp_path / "a"), "--shard", "1/2", "--n-agents", "3"]
    by_hand = ex.RunSpec(data="demo", team=ex.TeamSpec(preset="all", n_agents=3), backend=SCRIPTED, n=3,
                         out=tmp_path / "a", shard="1/2")
    assert spec_of(build_parser().parse_args(argv)) == by_hand


def test_run_from_python_equals_the_cli_s_run(tmp_path, capsys):
    seen: list[Progress] = []
    result = ex.run(ex.RunSpec(data="demo", team="all", backend=SCRIPTED, n=3, out=tmp_path / "py"),
                    progress=seen.append)
    assert main(["run", "--dataset", "demo", "--preset", "all", "--model", "scripted", "--no-cache", "--n", "3",
                 "--out", str(tmp_path / "cli")]) == 0
    (cell,) = result.cells
    assert cell.out == tmp_path / "py" and cell.label == "all" and cell.seed == 111
    assert cell.results_path == tmp_path / "py" / "results.jsonl" and str(cell.results_path) in cell.text()
    assert _rows(tmp_path / "py") == _rows(tmp_path / "cli")
    written = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert cell.summary["accuracy"] == written["accuracy"] and cell.summary["calls"] == written["calls"]
    rows = result.rows()
    assert sorted(r.id for r in rows) == [r[0] for r in _rows(tmp_path / "cli")] and all(r.record for r in rows)
    assert cell.text().split("\n")[1].split(" | ")[0] in capsys.readouterr().out  # the CLI prints the same summary
    # the events a Python caller gets: start, the cell's start, a call at a time, a question at a time, finish
    kinds = [e.kind for e in seen]
    assert kinds[0] == "start" and kinds[1] == "begin" and kinds[-1] == "finish"
    questions = [e for e in seen if e.kind == "question"]
    assert [(e.done, e.total) for e in questions] == [(1, 3), (2, 3), (3, 3)]
    assert questions[-1].spent.calls == written["calls"] == sum(1 for e in seen if e.kind == "call")
    assert questions[-1].spent.prompt_tokens == sum(r[4] for r in _rows(tmp_path / "cli"))
    assert questions[-1].spent.usd is None  # the scripted backend has no price


def test_a_run_frame_for_notebooks(tmp_path):
    pytest.importorskip("pandas")
    result = ex.run(ex.RunSpec(data="demo", backend=SCRIPTED, seeds=(1, 2), n=2, out=tmp_path / "grid"))
    frame = result.to_pandas()
    assert len(frame) == 4 and set(frame["seed"]) == {1, 2} and {"prediction", "correct", "calls"} <= set(frame)


def test_a_run_that_keeps_failing_raises_and_the_cli_exits_1(tmp_path, capsys):
    from teammed.errors import WorkFailed

    spec = ex.RunSpec(data="demo", backend=ex.BackendSpec(model="openai/x", api_base="http://127.0.0.1:9/v1",
                                                          cache=False, retry_attempts=1, timeout=2),
                      n=3, out=tmp_path / "dead")
    with pytest.raises(WorkFailed):
        ex.run(spec)
    assert main(["run", "--dataset", "demo", "--n", "3", "--model", "openai/x", "--api-base",
                 "http://127.0.0.1:9/v1", "--no-cache", "--retry-attempts", "1", "--timeout", "2",
                 "--out", str(tmp_path / "dead2")]) == 1


def test_report_from_python_equals_the_cli_s_report(tmp_path, capsys):
    for preset in ("base", "all"):
        ex.run(ex.RunSpec(data="demo", team=preset, backend=SCRIPTED, n=4, out=tmp_path / "runs" / preset))
    report = ex.report(ex.ReportSpec(dirs=(tmp_path / "runs",), out=tmp_path / "py"))
    assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "cli")]) == 0
    assert report.path == tmp_path / "py" / "report.md" and report.note is None
    assert report.summary() == json.loads((tmp_path / "cli" / "summary.json").read_text())
    compared = ex.report(ex.ReportSpec(dirs=(tmp_path / "runs" / "base", tmp_path / "runs" / "all"),
                                       out=tmp_path / "cmp", compare=True))
    assert compared.compare_path is not None and compared.compare_path.is_file()


def test_compile_from_python_equals_the_cli_s_compile(tmp_path, capsys):
    spec = ex.CompileSpec(data="demo", team="base", backend=SCRIPTED, optimizer="bootstrap", train=2, val=2, test=2,
                          out=tmp_path / "py.json")
    result = ex.compile_program(spec)
    assert main(["compile", "--dataset", "demo", "--preset", "base", "--model", "scripted", "--no-cache",
                 "--optimizer", "bootstrap", "--train", "2", "--val", "2", "--test", "2",
                 "--out", str(tmp_path / "cli.json")]) == 0
    cli = json.loads((tmp_path / "cli.json").read_text())
    py = json.loads(result.path.read_text())
    assert result.text().split("\n")[0] in capsys.readouterr().out
    assert py["teammed"]["meta"]["accuracy_after"] == cli["teammed"]["meta"]["accuracy_after"] == result.accuracy_after
    assert {k: v for k, v in py.items() if k != "teammed"} == {k: v for k, v in cli.items() if k != "teammed"}


def test_search_from_python_equals_the_cli_s_search(tmp_path, capsys):
    spec = ex.SearchSpec(data="demo", backend=SCRIPTED, n=4, trials=2, sampler="brute", out=tmp_path / "py")
    seen: list[Progress] = []
    result = ex.search(spec, progress=seen.append)
    assert main(["search", "--dataset", "demo", "--model", "scripted", "--no-cache", "--n", "4", "--trials", "2",
                 "--sampler", "brute", "--out", str(tmp_path / "cli"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["special_set"] == list(result.components)
    assert printed["dev_accuracy"] == result.dev_accuracy and printed["trials"] == result.trials
    assert result.path is not None and result.path.is_file()
    assert [(e.done, e.total) for e in seen if e.kind == "trial"] == [(1, 2), (2, 2)]


def _sim_data(tmp_path: Path) -> Path:
    data = tmp_path / "sim.jsonl"
    data.write_text("".join(json.dumps({"id": q.id, "question": q.question, "options": q.options,
                                        "answer_idx": q.answer_idx}) + "\n"
                            for q in simulated_questions(60, seed=5, prefix="x")))
    return data


TUNE_FLAGS = ["--budget", "calls=1e6", "--optimizer", "none", "--n-eval", "6", "--pool-size", "2",
              "--batch-size", "5", "--stage1-batches", "1", "--no-cache"]


def test_tune_from_python_equals_the_cli_s_tune_and_reports_progress_on_a_pipe(tmp_path, capsys):
    data = _sim_data(tmp_path)
    spec = ex.TuneSpec(data=str(data), backend=ex.BackendSpec(model="simulated:5", cache=False), budget="calls=1e6",
                       optimizer="none", n_eval=6, pool_size=2, batch_size=5, stage1_batches=1, out=tmp_path / "py")
    seen: list[Progress] = []
    result = ex.tune(spec, progress=seen.append)
    assert result.done and result.special_set_path is not None
    assert main(["tune", "--dataset", str(data), "--model", "simulated:5", *TUNE_FLAGS, "--out", str(tmp_path / "cli"),
                 "--json"]) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    assert printed["special_set"] == result.report["winner"] and printed["held_out"] == result.report["held_out"]
    spent = ("calls", "tokens", "cost_usd")  # (memo hits depend on which thread asked first)
    assert [printed["spent"][k] for k in spent] == [result.report["spent"][k] for k in spent]
    # the stages and their cells, with the spend against the budget, on stderr (a pipe here)
    stages = [e.label for e in seen if e.kind == "begin"]
    assert stages[0].startswith("tune: stage 1 of 4") and stages[-1].startswith("tune: stage 4 of 4")
    assert all(e.budget is not None and e.budget.calls == 1_000_000 for e in seen)
    lines = [line for line in captured.err.splitlines() if "calls of 1.0M" in line]
    assert len(lines) >= 4 and all("ETA" in line and "/" in line for line in lines)


def test_reproduce_from_python_equals_the_cli_s_reproduce(tmp_path, capsys):
    spec = ex.ReproduceSpec(backend=SCRIPTED, datasets=("demo",), n=4, seeds=(111,), rows=("Zero-Shot", "Leadership"),
                            out=tmp_path / "py")
    seen: list[Progress] = []
    result = ex.reproduce(spec, progress=seen.append)
    assert main(["reproduce", "001-table1", "--model", "scripted", "--no-cache", "--datasets", "demo", "--n", "4",
                 "--seeds", "111", "--rows", "Zero-Shot;Leadership", "--out", str(tmp_path / "cli"), "--json"]) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    assert printed["rows"] == json.loads(json.dumps(result.rows, default=str))
    assert result.failure() is None and result.table_md.is_file()
    assert [(e.done, e.total) for e in seen if e.kind == "cell"][-1] == (2, 2)
    assert sum("2/2" in line for line in captured.err.splitlines()) >= 1


def test_specs_refuse_bad_values_as_the_cli_does():
    from pydantic import ValidationError

    for bad in ({"team": {"preset": "al"}}, {"shard": "3/2"}, {"backend": {"model": ""}}):
        with pytest.raises(ValidationError):
            ex.RunSpec(data="demo", **bad)
    with pytest.raises(ValidationError, match="neither a journal file nor a database URL"):
        ex.SearchSpec(data="demo", storage="study")
    assert ex.TeamSpec(system="Zero-Shot").system == "zero_shot"


def test_the_cli_is_thin():
    """The CLI parses, builds a spec, calls one function and prints: no experiment logic in cli*.py."""
    import ast

    root = Path(__file__).resolve().parents[1] / "src" / "teammed"
    files = sorted(root.glob("cli*.py"))
    assert sum(len(f.read_text().splitlines()) for f in files) <= 900
    below = ("teammed.optimizers", "teammed.data", "teammed.evals", "teammed.runner", "teammed.run_plan",
             "teammed.programs", "teammed.backends", "teammed.answering")
    for path in files:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and (node.name.startswith("cmd_") or node.name.endswith("_command")):
                assert node.end_lineno - node.lineno + 1 <= 25, (path.name, node.name)
            if isinstance(node, ast.ImportFrom) and node.module and node.names[0].name != "resolve":
                # the work is the layer's (the process's own: whether Ctrl-C/SIGTERM arrived, is not)
                assert not node.module.startswith(below), (path.name, node.module)
