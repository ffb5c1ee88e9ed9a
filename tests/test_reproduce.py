"""`reproduce 001-table1`: the paper's grid on the Optuna work queue, end to end on fake backends."""

from __future__ import annotations

import json

import pytest

from teammed.backends.simulated import SimulatedTeamLM, answer_key, simulated_questions
from teammed.errors import ConfigError
from teammed.optimizers.reproduce import TABLE1_001, ReproduceSettings, reproduce_table1


def test_published_table_is_the_papers():
    assert TABLE1_001["TeamMed"]["MQA"] == (92.7, 2.7)
    assert TABLE1_001["Zero-Shot"]["PMC"] == (47.3, 3.1)
    assert TABLE1_001["Mut.Trust"]["DDX"] == (81.7, 2.1)
    assert len(TABLE1_001) == 11 and all(len(v) == 8 for v in TABLE1_001.values())


def test_reproduce_writes_the_table_and_resumes_without_rerunning(tmp_path):
    questions = simulated_questions(60, seed=7, prefix="mqa")
    lm = SimulatedTeamLM(answer_key(questions), seed=7)
    tuned: list[str] = []

    def tune_special(code, tuning, held_out):
        tuned.append(code)
        assert not {q.id for q in tuning} & {q.id for q in held_out}
        from teammed.optimizers.tune import TuneSettings, tune

        out = tune(tune_questions=tuning, eval_questions=held_out, lm=lm,
                   settings=TuneSettings(dataset=code, model="sim", optimizer="none", batch_size=5, stage1_batches=1,
                                         pool_size=3),
                   budget=None, storage=f"sqlite:///{tmp_path / 'tune.db'}", study_name="t", out_dir=tmp_path / "t")
        return {"config": out.report["winner_config"], "program": out.report["program"],
                "proven": out.report["held_out"] is not None}

    settings = ReproduceSettings(model="sim", seeds=(111, 222), n=10,
                                 rows=("Zero-Shot", "Leadership", "Mut. Trust", "TeamMed (tuned)"))
    store = f"sqlite:///{tmp_path / 'grid.db'}"
    result = reproduce_table1(datasets={"MQA": questions, "PVQ": "DataError: not here"}, lm=lm, settings=settings,
                              storage=store, study_name="g", out_dir=tmp_path / "r", tune_special=tune_special)
    rows = {r["row"]: r for r in result.rows}
    assert set(rows) == set(settings.rows)
    assert rows["Leadership"]["published"] == 89.0 and rows["Leadership"]["dataset"] == "MQA"
    assert rows["Leadership"]["difference"] == pytest.approx(rows["Leadership"]["measured"] - 89.0, abs=0.01)
    # two seeds of 10 drawn from the same pool share questions: each question is paired once
    vs = rows["Leadership"]["vs_zero_shot"]
    assert vs["n"] == rows["Leadership"]["n_distinct"] and vs["n"] + vs["repeats"] == 20 and vs["repeats"] > 0
    assert rows["Mut. Trust"]["measured"] < rows["Leadership"]["measured"]  # the planted harm shows
    assert "| TeamMed (tuned) | MQA |" in (tmp_path / "r" / "table1.md").read_text()
    assert "PVQ: DataError" in result.markdown
    assert json.loads((tmp_path / "r" / "table1.json").read_text())["rows"]
    before = lm.n_calls
    again = reproduce_table1(datasets={"MQA": questions}, lm=lm, settings=settings, storage=store, study_name="g",
                             out_dir=tmp_path / "r", tune_special=tune_special)
    assert lm.n_calls == before  # every cell (and the tuning) was already done
    assert again.rows == result.rows
    with pytest.raises(ConfigError, match="another --study"):
        reproduce_table1(datasets={"MQA": questions}, lm=lm, settings=ReproduceSettings(model="sim", n=5),
                         storage=store, study_name="g", out_dir=tmp_path / "r", tune_special=tune_special)


def test_cli_reproduce_end_to_end_on_the_scripted_backend(tmp_path, capsys):
    from teammed.cli import main

    out = tmp_path / "rep"
    code = main(["reproduce", "001-table1", "--model", "scripted", "--datasets", "demo", "--n", "4", "--seeds",
                 "111,222", "--rows", "Zero-Shot;Leadership;TeamMed (tuned)", "--tune-budget", "calls=1e6",
                 "--batch-size", "2", "--out", str(out), "--no-cache"])
    assert code == 0, capsys.readouterr().err
    table = (out / "table1.md").read_text()
    assert "| Zero-Shot | demo |" in table and "| TeamMed (tuned) | demo |" in table
    assert main(["reproduce", "002-nope", "--model", "scripted"]) == 2


def test_files_are_named_by_their_stem_and_never_collide(tmp_path):
    import json as _json

    from teammed.optimizers.reproduce import load_paper_datasets

    paths = []
    for k in (1, 2):
        folder = tmp_path / f"c{k}"
        folder.mkdir()
        path = folder / "sampled_50.jsonl"
        path.write_text(_json.dumps({"id": f"q{k}", "question": f"Q{k}?", "options": {"A": "a", "B": "b"},
                                     "answer_idx": "A"}) + "\n")
        paths.append(str(path))
    found = load_paper_datasets(paths, data_dir=None)
    names = list(found)
    assert names[0] == "sampled_50" and names[1].startswith("sampled_50-") and len(names) == 2


def test_the_cli_lists_the_rows_reproduce_runs():
    from teammed.cli_tune import ROWS
    from teammed.optimizers.reproduce import DEFAULT_ROWS_001, ROWS_001

    assert ROWS == DEFAULT_ROWS_001 and set(ROWS_001) - set(ROWS) == {"TeamMed (adaptive)"}
    assert ROWS_001["All Compon."] == ("AllCompon.", "preset", "all5")  # 001's five, not closed loop


def test_published_cells_are_checked_against_the_papers_protocol():
    from teammed.evals.stats import published_consistency

    checks = {(row, code): published_consistency(m, se, n=50, k=3)
              for row, cells in TABLE1_001.items() for code, (m, se) in cells.items()}
    assert sum(not c.mean_possible for c in checks.values()) == 26
    assert sum(c.mean_possible and not c.se_possible for c in checks.values()) == 38
    assert not checks[("Leadership", "PQA")].mean_possible  # 71.7 is not k/150
    assert checks[("Zero-Shot", "MQA")].mean_possible and not checks[("Zero-Shot", "MQA")].se_possible
    assert checks[("Zero-Shot", "MQA")].sd_possible  # 86.7 ± 1.2 fits as a standard deviation (43, 43, 44 of 50)


def test_table1_from_a_medagentsbench_folder_runs_the_papers_rows(tmp_path):
    from teammed.backends import ScriptedLM
    from teammed.optimizers.reproduce import load_paper_datasets
    from tests.helpers import write_medagentsbench

    data = write_medagentsbench(tmp_path / "mab", n_test=40)
    datasets = load_paper_datasets(["MQA", "PQA", "MML", "MMC", "MBL"], data_dir=data)
    assert all(not isinstance(q, str) for q in datasets.values()), datasets
    lm = ScriptedLM()
    settings = ReproduceSettings(model="scripted", seeds=(111, 222, 333), n=4,
                                 rows=("Zero-Shot", "Few-Shot", "All Compon.", "MDAgents"))
    result = reproduce_table1(datasets=datasets, lm=lm, settings=settings, storage=None, study_name="mab",
                              out_dir=tmp_path / "r")
    assert {(r["row"], r["dataset"]) for r in result.rows} == {
        (row, code) for row in settings.rows for code in ("MQA", "PQA", "MML", "MMC", "MBL")}
    signatures = {call.signature for call in lm.calls}
    assert not signatures & {"Acknowledge", "VerifyUnderstanding"}  # All Compon. is 001's five: no closed loop
    cells = {(r["row"], r["dataset"]): r for r in result.rows}
    assert all(r["published"] is not None and r["published_consistent"] is not None for r in result.rows)
    leadership_free = cells[("Few-Shot", "MMC")]
    assert leadership_free["published_check"] == {"mean_possible": True, "se_possible": False, "sd_possible": True}
    assert leadership_free["p_vs_published"] is None  # never tested against an impossible cell
    tested = [r for r in result.rows if r["p_vs_published"] is not None]
    assert tested and all(r["published_consistent"] for r in tested)
    assert all(r["p_vs_published_holm"] >= r["p_vs_published"] and r["mde_vs_published"] > 0 for r in tested)
    zero = [r["vs_zero_shot"] for r in result.rows if r["vs_zero_shot"]]
    assert zero and all(z["p_holm"] >= z["p"] and 0 < z["mde"] <= 100 for z in zero)
    assert "no (SE; SD fits)" in result.markdown and "Holm" in result.markdown


def test_few_shot_and_mdagents_examples_never_come_from_a_cells_questions(tmp_path):
    import re

    from teammed.backends import ScriptedLM
    from teammed.data.splits import part_of
    from teammed.optimizers.reproduce import load_paper_datasets
    from tests.helpers import write_medagentsbench

    data = write_medagentsbench(tmp_path / "mab", n_test=40, folders=("medqa",))
    datasets = load_paper_datasets(["MQA"], data_dir=data)
    lm = ScriptedLM()
    reproduce_table1(datasets=datasets, lm=lm, settings=ReproduceSettings(model="scripted", seeds=(111,), n=6,
                                                                         rows=("Few-Shot",)),
                     storage=None, study_name="fs", out_dir=tmp_path / "r")
    seen_demo = False
    for call in lm.calls:
        text = str(call.messages[-1]["content"])
        asked = re.findall(r"case (\d+) of medqa", text.split("[[ ## task ## ]]")[0])
        assert asked and all(part_of(f"medqa-{int(c):04d}") == "eval" for c in asked)  # a cell's question
        for case in re.findall(r"case (\d+) of medqa", text.split("Worked examples")[-1] if "Worked" in text else ""):
            seen_demo = True
            assert part_of(f"medqa-{int(case):04d}") == "tune"
    assert seen_demo  # the check above looked at real worked examples


def test_cli_reproduce_reads_a_medagentsbench_folder_for_all_five_text_benchmarks(tmp_path, capsys):
    from teammed.cli import main
    from tests.helpers import write_medagentsbench

    data = write_medagentsbench(tmp_path / "mab", n_test=30)
    code = main(["reproduce", "001-table1", "--data-dir", str(data), "--datasets", "MQA,PQA,MML,MMC,MBL",
                 "--rows", "Zero-Shot;All Compon.", "--model", "scripted", "--n", "3", "--out", str(tmp_path / "r"),
                 "--no-cache", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    table = json.loads(captured.out)
    assert not table["unavailable"]
    assert len(table["rows"]) == 10 and {r["dataset"] for r in table["rows"]} == {"MQA", "PQA", "MML", "MMC", "MBL"}
    assert all(r["published_consistent"] is not None for r in table["rows"])  # every published cell flagged
    assert all(r["n_per_seed"] == [3, 3, 3] and r["failed"] == 0 for r in table["rows"])


def test_the_mdagents_cells_name_their_variant(tmp_path):
    """A study resumed from before MDAgents had variants never passes its lighter cells off as the paper's."""
    import optuna

    from teammed.optimizers.tune_queue import WorkQueue

    questions = simulated_questions(30, seed=3, prefix="mqa")
    lm = SimulatedTeamLM(answer_key(questions), seed=3)
    store = f"sqlite:///{tmp_path / 'grid.db'}"
    settings = ReproduceSettings(model="sim", seeds=(111,), n=2, rows=("MDAgents",))
    result = reproduce_table1(datasets={"MQA": questions}, lm=lm, settings=settings, storage=store, study_name="g",
                              out_dir=tmp_path / "r")
    keys = [json.loads(k) for k in WorkQueue(optuna.load_study(study_name="g", storage=store)).results()]
    assert keys and all(k["variant"] == "paper" for k in keys if k["row"] == "MDAgents")
    assert "MDAgents (paper variant)" in result.markdown
