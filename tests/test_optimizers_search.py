"""The special-set search: a planted scripted team is right only with exactly {leadership, trust}.

The planted LM reads, in each final-ranking call, which behaviours shaped the team context
(reliability scores = trust, the leader's mediation = leadership, shared knowledge = SMM,
role focus = team orientation, challenge notes = mutual monitoring, clarification notes =
closed loop). Exactly {leadership, trust} answers every question; supersets of it answer
half; everything else none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import optuna
import pytest

from teammed.backends import ScriptedCall, ScriptedLM
from teammed.config import COMPONENTS, TeamworkConfig
from teammed.errors import ConfigError
from teammed.optimizers import (
    load_special_set,
    open_study,
    search_report,
    search_special_set,
    write_special_set,
)
from teammed.optimizers._evaluated import component_effects, pareto_front
from teammed.optimizers._space import SearchSpace, valid_subsets
from teammed.optimizers._storage import masked, open_storage
from teammed.types import Question

ROOT = Path(__file__).resolve().parents[1]
LETTERS = "ABCD"
QUESTIONS = [
    Question(id=f"q{i}", question=f"Case {i}: a patient presents with finding {i}. Most likely diagnosis?",
             options={"A": "alpha", "B": "beta", "C": "gamma", "D": "delta"}, answer_idx=gold)
    for i, gold in enumerate("BCDB")
]
_GOLD = {q.question: (i, q.answer_idx) for i, q in enumerate(QUESTIONS)}
PLANTED = {"leadership", "trust"}
BASE = TeamworkConfig(n_agents=2)


def active_components(inputs: dict) -> set[str]:
    """Which components shaped a final-ranking call, read from its inputs."""
    context, history, role = (str(inputs.get(k, "")) for k in ("team_context", "history", "role"))
    marks = {
        "trust": "Reliability" in context,
        "leadership": "Leader's latest mediation" in context,
        "shared_mental_model": "Shared knowledge:" in context,
        "team_orientation": "; focus:" in role,
        "mutual_monitoring": "leader challenged" in history,
        "closed_loop": "clarified:" in history,
    }
    return {name for name, seen in marks.items() if seen}


def planted_responder(call: ScriptedCall):
    if call.signature == "VerifyUnderstanding":  # make closed loop visible in the history
        return {"confirmed": False, "correction": "the restatement missed the time course"}
    if call.signature != "FinalRanking":
        return None
    index, gold = _GOLD[call.inputs["question"]]
    on = active_components(call.inputs)
    right = on == PLANTED or (on > PLANTED and index % 2 == 0)
    first = gold if right else next(letter for letter in LETTERS if letter != gold)
    return {"ranking": [first] + [x for x in LETTERS if x != first], "confidence": "High", "rationale": "ok"}


def planted_lm() -> ScriptedLM:
    return ScriptedLM(planted_responder)


def search(tmp_path: Path, **kwargs):
    options = {"questions": QUESTIONS, "lm_factory": planted_lm, "study_name": "planted", "seed": 0,
               "batch_size": 2, "out_dir": tmp_path, "base_config": BASE, "dataset": "planted"}
    return search_special_set(**{**options, **kwargs})


def load(storage: str, name: str = "planted") -> optuna.Study:
    return open_study(storage=storage, study_name=name, out_dir="unused")


def finished(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The trials that evaluated a configuration (complete or pruned part way); trials closed as duplicates of
    another evaluation of their configuration made no request and are left out."""
    return [t for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED))
            if t.user_attrs.get("duplicate_of") is None]


def assert_all_valid(study: optuna.Study) -> None:
    for trial in study.get_trials():
        config = trial.user_attrs["config"]
        assert not (config["mutual_monitoring"] and not config["leadership"]), trial.number
        TeamworkConfig.build(**config)


# ---------------------------------------------------------------------- the space
def test_the_space_holds_only_valid_subsets():
    subsets = valid_subsets()  # 48 on the papers' six components (tests/test_components.py)
    n = len(subsets)
    assert len(set(subsets)) == n
    assert all("leadership" in s for s in subsets if "mutual_monitoring" in s)
    assert not any({"mutual_monitoring", "closed_loop"} & set(s) for s in valid_subsets(min_turns=1))
    space = SearchSpace(base=BASE, turns=(2, 3), agents=("auto", 2, 3, 4), early_consensus=(None, 0.8, 1.0))
    assert space.size() == n * 2 * 4 * 3
    assert len(SearchSpace(base=BASE, flat=True).grid()["components"]) == n


# ---------------------------------------------------------------------- finding the planted subset
def test_brute_force_finds_the_planted_subset(tmp_path):
    storage = str(tmp_path / "study.log")
    result = search(tmp_path, trials=100, sampler="brute", storage=storage)
    assert result.components == ["leadership", "trust"]
    assert result.dev["accuracy"] == 1.0 and result.dev["se"] == 0.0 and result.dev["n"] == 4
    assert result.trials["distinct_configs"] == len(valid_subsets())  # 48: the space ran out before 100 trials
    assert result.pareto_front is None and result.study == {"storage": storage, "study_name": "planted"}
    study = load(storage)
    assert_all_valid(study)
    pruned = [t for t in study.get_trials() if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned and all(t.user_attrs["n"] == 2 for t in pruned)  # stopped after the first batch

    path = write_special_set(result, tmp_path / "special_sets" / "planted.json")
    data = json.loads(path.read_text())
    assert data["format"] == "teammed-special-set/1" and data["dataset"] == "planted"
    assert {"components", "config", "dev", "trials", "study", "pareto_front", "evaluated"} <= data.keys()
    assert len(data["evaluated"]) == len(valid_subsets())
    assert data["evaluated"][0]["components"] == ["leadership", "trust"]
    assert load_special_set(path) == TeamworkConfig(leadership=True, trust=True, n_agents=2)

    report = search_report(study, tmp_path / "report")
    text = report.read_text()
    assert "leadership+trust" in text and "| trust |" in text
    assert {p.name for p in report.parent.glob("*.png")} == {"subsets.png", "importance.png", "history.png"}


def test_grid_over_the_valid_space_returns_a_pareto_front(tmp_path):
    storage = str(tmp_path / "multi.journal")
    result = search(tmp_path, questions=QUESTIONS[:2], trials=100, sampler="grid", objectives="accuracy,tokens",
                    storage=storage)
    front = result.pareto_front
    assert result.components == ["leadership", "trust"] and result.objectives == ["accuracy", "tokens"]
    assert [r["components"] for r in front] == [[], ["leadership", "trust"]]  # cheapest, then the planted one
    for r in front:  # nothing evaluated beats a front member on both objectives
        assert not any(o["accuracy"] >= r["accuracy"] and o["tokens_per_question"] < r["tokens_per_question"]
                       for o in result.evaluated)
    study = load(storage)
    n = len(valid_subsets())  # each valid subset exactly once: the grid holds no invalid points
    assert len(study.get_trials()) == n and len({t.params["components"] for t in study.get_trials()}) == n
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.get_trials())  # never pruned
    assert_all_valid(study)
    search_report(study, tmp_path / "report")
    assert (tmp_path / "report" / "pareto.png").stat().st_size > 0


# ---------------------------------------------------------------------- storage and resuming
def test_tpe_resumes_the_default_sqlite_study_and_never_samples_invalid_sets(tmp_path):
    first = search(tmp_path, trials=4, sampler="tpe")
    assert first.study["storage"] == f"sqlite:///{(tmp_path / 'study.db').resolve()}"
    assert len(finished(load(first.study["storage"]))) == 4
    second = search(tmp_path, trials=7, sampler="tpe")
    study = load(first.study["storage"])
    assert len(finished(study)) == 7 == len({json.dumps(t.user_attrs["config"]) for t in finished(study)})
    assert second.trials["complete"] + second.trials["pruned"] == 7
    before = len(study.get_trials())
    search(tmp_path, trials=7, sampler="tpe")  # already complete: nothing more runs
    assert len(load(first.study["storage"]).get_trials()) == before
    assert_all_valid(study)


def test_resuming_with_other_flags_is_refused(tmp_path):
    search(tmp_path, trials=2, sampler="tpe")
    with pytest.raises(ConfigError, match="repeat the original search flags"):
        search(tmp_path, trials=4, sampler="tpe", search_turns=True)
    with pytest.raises(ConfigError, match="optimizes"):
        search(tmp_path, trials=4, sampler="tpe", objectives="accuracy,tokens")


def test_journal_storage_resumes(tmp_path):
    storage = str(tmp_path / "studies" / "planted.log")
    search(tmp_path, trials=3, sampler="tpe", storage=storage)
    result = search(tmp_path, trials=5, sampler="tpe", storage=storage)
    assert len(finished(load(storage))) == 5 and result.study["storage"] == storage


def test_optional_dimensions_are_searched(tmp_path):
    """Each optional dimension is a parameter of every trial, over its documented choices, the
    configuration evaluated is the one sampled, and the sampler moves it off the base's value (a
    search that ignored the dimensions would leave every trial at BASE's n_turns, n_agents and
    early_consensus, with no such parameter)."""
    search(tmp_path, trials=6, sampler="tpe", storage=str(tmp_path / "s.log"), search_turns=True,
           search_agents=True, search_early_consensus=True)
    trials = load(str(tmp_path / "s.log")).get_trials()
    choices = {"n_turns": (2, 3), "n_agents": ("auto", 2, 3, 4), "early_consensus": (None, 0.8, 1.0)}
    assert len(trials) == 6
    for trial in trials:
        assert set(choices) <= set(trial.params), f"trial {trial.number} searched only {sorted(trial.params)}"
        for name, values in choices.items():
            assert tuple(trial.distributions[name].choices) == values, (trial.number, name)
            assert trial.user_attrs["config"][name] == trial.params[name], (trial.number, name)
    base = BASE.model_dump(mode="json")
    for name in choices:
        assert any(t.user_attrs["config"][name] != base[name] for t in trials), name


def test_arguments_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="exactly one of lm= .* or lm_factory="):
        search_special_set(questions=QUESTIONS, trials=1, study_name="x", out_dir=tmp_path)
    with pytest.raises(ConfigError, match="unknown sampler"):
        search(tmp_path, trials=1, sampler="random")
    with pytest.raises(ConfigError, match="not a special set"):
        (tmp_path / "bad.json").write_text("{}")
        load_special_set(tmp_path / "bad.json")


def test_open_study_names_a_missing_study(tmp_path):
    with pytest.raises(ConfigError, match="no study 'nothing' in"):
        open_study(storage=str(tmp_path / "s.log"), study_name="nothing", out_dir=tmp_path)


def test_storage_reference_hides_the_password():
    assert masked("postgresql://teammed:s3cret@db:5432/optuna") == "postgresql://teammed:***@db:5432/optuna"
    assert masked("sqlite:////tmp/study.db") == "sqlite:////tmp/study.db"


# ---------------------------------------------------------------------- pure summaries
def _row(trial, acc, tokens, *on, state="COMPLETE"):
    config = {**{c: c in on for c in COMPONENTS}, "n_agents": 2, "n_turns": 2, "early_consensus": None}
    return {"trial": trial, "state": state, "components": list(on), "config": config, "accuracy": acc,
            "tokens_per_question": tokens}


def test_pareto_front_and_component_effects_by_hand():
    rows = [_row(0, 0.2, 100), _row(1, 0.6, 300, "leadership"), _row(2, 0.6, 400, "leadership", "trust"),
            _row(3, 0.8, 500, "leadership", "mutual_monitoring"), _row(4, 0.9, 900, "trust", state="PRUNED")]
    assert [r["trial"] for r in pareto_front(rows)] == [0, 1, 3]
    effects = component_effects(rows)
    assert effects["leadership"]["effect"] == pytest.approx((0.6 + 0.6 + 0.8) / 3 - 0.2)
    assert effects["trust"]["effect"] == pytest.approx(0.6 - (0.2 + 0.6 + 0.8) / 3)
    # monitoring is judged among leadership configurations only
    assert effects["mutual_monitoring"]["effect"] == pytest.approx(0.8 - 0.6)
    assert effects["closed_loop"]["effect"] is None


# ---------------------------------------------------------------------- two workers, one study
_WORKER = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.test_optimizers_search import BASE, QUESTIONS, planted_responder
from teammed.backends import ScriptedLM
from teammed.optimizers import search_special_set
ready = Path({barrier!r})
(ready / "{index}").touch()
while len(list(ready.iterdir())) < {n_workers}:
    time.sleep(0.05)
lms = []
def lm():  # each call takes a little time, so neither worker can run every trial before the other has started
    lms.append(ScriptedLM(planted_responder, delay_s=0.05))
    return lms[-1]
# the same command in both workers: the same sampler seed, so both propose the same configurations first
search_special_set(questions=QUESTIONS[:2], lm_factory=lm, trials={trials}, storage={url!r},
                   study_name={name!r}, sampler="tpe", seed=0, batch_size=1, out_dir={out!r}, base_config=BASE)
print(json.dumps({{"calls": sum(len(x.calls) for x in lms)}}))
"""


def _storage_for(kind: str, tmp_path: Path) -> str:
    if kind == "journal":
        return str(tmp_path / "shared.journal")
    url = os.environ.get("TEAMMED_PG_URL")
    if not url:
        pytest.skip("set TEAMMED_PG_URL to a PostgreSQL database to run this test")
    return url


@pytest.mark.parametrize("n_workers", [2, 3])
@pytest.mark.parametrize("kind", ["journal", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_two_workers_evaluate_distinct_configurations_of_one_study(tmp_path, kind, n_workers):
    """Issues 35 and 47: workers with the same command on one study evaluate exactly 8 distinct configurations
    in all, never 9 (each claims its trial in the storage); a configuration one of them re-proposes
    (complete, or running in another) makes no request."""
    url = _storage_for(kind, tmp_path)
    name, trials = f"teammed-test-{uuid.uuid4().hex[:12]}", 8
    barrier = tmp_path / "ready"
    barrier.mkdir()
    scripts = [_WORKER.format(root=str(ROOT), barrier=str(barrier), index=i, trials=trials, url=url,
                              name=name, out=str(tmp_path / f"w{i}"), n_workers=n_workers)
               for i in range(n_workers)]
    workers = [subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for script in scripts]
    try:
        outcomes = [w.communicate(timeout=180) for w in workers]
        assert [w.returncode for w in workers] == [0] * n_workers, [err[-2000:] for _, err in outcomes]
        study = load(url, name)
        done = finished(study)
        configs = [json.dumps(t.user_attrs["config"], sort_keys=True) for t in done]
        assert len(configs) == len(set(configs)) == trials  # 8 evaluations, 8 distinct configurations
        assert len({t.user_attrs["worker"] for t in done}) >= 2  # the work was shared
        duplicates = [t for t in study.get_trials() if t.user_attrs.get("duplicate_of") is not None]
        assert all("n" not in t.user_attrs or t.state.name == "COMPLETE" for t in duplicates)
        # the requests the workers made are exactly those of the 8 evaluations: none for a duplicate
        calls = sum(json.loads(out.strip().splitlines()[-1])["calls"] for out, _ in outcomes)
        assert calls == sum(round(t.user_attrs["calls_per_question"] * t.user_attrs["n"]) for t in done)
        assert_all_valid(study)
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
        try:
            optuna.delete_study(study_name=name, storage=open_storage(url, tmp_path)[0])
        except KeyError:
            pass


# ---------------------------------------------------------------------- storage URLs (issue 35, item 5)
@pytest.mark.parametrize("form", ["journal:{p}", "journal://{p}", "{p}"])
def test_a_journal_storage_is_understood_in_each_of_its_forms(tmp_path, form):
    path = tmp_path / "j" / "study.log"
    backend, reference = open_storage(form.format(p=path), tmp_path)
    assert isinstance(backend, optuna.storages.JournalStorage) and reference == str(path)
    assert not any(p.name.startswith("journal:") for p in Path.cwd().iterdir())  # no ./journal: folder


@pytest.mark.parametrize("storage", ["journal:", "studies/x.db", "redis://localhost/0", "postgres-ish", "file.sqlite"])
def test_a_storage_teammed_cannot_open_is_refused_with_the_accepted_forms(tmp_path, storage):
    with pytest.raises(ConfigError) as caught:
        open_storage(storage, tmp_path)
    assert "journal:/abs/path/study.log" in str(caught.value) and "postgresql://" in str(caught.value)
    assert not (tmp_path / "studies").exists()


def test_a_second_worker_on_a_busy_sqlite_study_is_refused_naming_the_fix(tmp_path):
    import socket

    from tests.test_stale_trials import _orphan

    search(tmp_path, trials=1, sampler="tpe")
    study = load(f"sqlite:///{(tmp_path / 'study.db').resolve()}")
    # another live process on this host is running a trial of the study
    _orphan(study, user_attrs={"worker": f"{socket.gethostname()}:{os.getppid()}"}, age_s=5)
    with pytest.raises(ConfigError, match="SQLite is not for parallel workers.*journal:"):
        search(tmp_path, trials=3, sampler="tpe")
    search(tmp_path, trials=1, sampler="tpe")  # nothing left to run: nothing to refuse


def test_the_special_set_is_written_by_the_worker_that_finishes_last(tmp_path, capsys):
    """A worker that stops while another live worker still evaluates a configuration writes nothing and
    says so; the Special Set is written once the study is done."""
    import socket

    from teammed.cli import main
    from tests.test_stale_trials import _orphan

    storage, out = str(tmp_path / "s.journal"), tmp_path / "out"
    flags = ["search", "--dataset", "demo", "--split", "all", "--n", "2", "--model", "scripted", "--sampler", "tpe",
             "--storage", storage, "--out", str(out), "--study", "shared"]
    assert main([*flags, "--trials", "2"]) == 0
    (written,) = out.glob("*.json")
    written.unlink()
    study = load(storage, "shared")
    busy = _orphan(study, user_attrs={"worker": f"{socket.gethostname()}:{os.getppid()}",
                                      "config": {"leadership": True}}, age_s=5)
    assert main([*flags, "--trials", "3"]) == 0  # 2 evaluated + 1 running elsewhere: this worker is done
    assert "the last of them writes the Special Set" in capsys.readouterr().err and not written.exists()
    study.tell(busy, state=optuna.trial.TrialState.FAIL)  # the other worker's trial ended (failed: redone)
    assert main([*flags, "--trials", "3"]) == 0
    assert written.exists() and json.loads(written.read_text())["trials"]["distinct_configs"] == 3
