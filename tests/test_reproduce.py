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
    questions = simulated_questions(120, seed=7, prefix="mqa")
    lm = SimulatedTeamLM(answer_key(questions), seed=7)
    tuned: list[str] = []

    def tune_special(code, tuning, held_out):
        tuned.append(code)
        assert not {q.id for q in tuning} & {q.id for q in held_out}
        from teammed.optimizers.tune import TuneSettings, tune

        out = tune(tune_questions=tuning, eval_questions=held_out, lm=lm,
                   settings=TuneSettings(dataset=code, model="sim", batch_size=5, stage1_batches=1, pool_size=3),
                   budget=None, storage=f"sqlite:///{tmp_path / 'tune.db'}", study_name="t", out_dir=tmp_path / "t")
        return {"config": out.report["winner_config"], "program": out.report["program"]}

    settings = ReproduceSettings(model="sim", seeds=(111, 222), n=10,
                                 rows=("Zero-Shot", "Leadership", "Mut. Trust", "TeamMed (tuned)"))
    store = f"sqlite:///{tmp_path / 'grid.db'}"
    result = reproduce_table1(datasets={"MQA": questions, "PVQ": "DataError: not here"}, lm=lm, settings=settings,
                              storage=store, study_name="g", out_dir=tmp_path / "r", tune_special=tune_special)
    rows = {r["row"]: r for r in result.rows}
    assert set(rows) == set(settings.rows)
    assert rows["Leadership"]["published"] == 89.0 and rows["Leadership"]["dataset"] == "MQA"
    assert rows["Leadership"]["difference"] == pytest.approx(rows["Leadership"]["measured"] - 89.0, abs=0.01)
    assert rows["Leadership"]["vs_zero_shot"]["n"] == 20  # paired on the same (seed, id) questions
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
