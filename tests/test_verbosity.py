"""The model's verbosity, named (issue 45, item 3): without a pilot a dry run fills each answer to its model
family's lengths, and says which table it used and where the table comes from."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from teammed import experiments as ex
from teammed.data.published import cot_answer_tokens
from teammed.estimate import PUBLISHED_VERBOSITY, estimate_program, verbosity_for
from teammed.programs.teamwork import TeamworkProgram

SAMPLE = Path(os.environ.get("TEAMMED_MEDAGENTSBENCH", Path(__file__).parents[2] / "shared" / "medagentsbench"))


@pytest.mark.parametrize(("model", "family"), [
    ("openai/gpt-4o", "gpt-4o"), ("gpt-4o-2024-08-06", "gpt-4o"), ("azure/gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
    ("gpt-4o-mini", "gpt-4o-mini"), ("local", "the embedded SmolLM2-135M"), ("scripted", "the embedded SmolLM2-135M"),
    ("openai/fake", "the embedded SmolLM2-135M"), ("anthropic/claude-3-5-sonnet", "the embedded SmolLM2-135M"),
])
def test_each_model_gets_its_family_s_lengths_and_an_unknown_one_a_default_said_so(model, family):
    found = verbosity_for(model)
    assert found.family == family
    assert ("a stated default" in found.text()) == (model in ("openai/fake", "anthropic/claude-3-5-sonnet"))
    assert model in found.text() or "a stated default" not in found.text()


def test_the_published_figures_are_what_the_reader_computes_from_the_files(tmp_path):
    folder = tmp_path / "output" / "medqa"
    folder.mkdir(parents=True)
    rows = [{"realidx": i, "question": f"Question {i}?", "options": {"A": "a", "B": "b"}, "answer_idx": "A",
             "predicted_answer": "A", "token_usage": str({"prompt_tokens": 300, "completion_tokens": 400 + 20 * i})}
            for i in range(5)]
    (folder / "gpt-4o-medqa-test_hard-cot.json").write_text(json.dumps(rows), encoding="utf-8")
    assert cot_answer_tokens(tmp_path / "output", "gpt-4o") == 440.0


@pytest.mark.skipif(not (SAMPLE / "output").is_dir(), reason="MedAgentsBench's published outputs not here; set "
                    "TEAMMED_MEDAGENTSBENCH to a clone's folder holding output/")
@pytest.mark.parametrize("model", sorted(PUBLISHED_VERBOSITY))
def test_the_carried_figures_equal_the_published_files(model):
    assert PUBLISHED_VERBOSITY[model].lengths == round(cot_answer_tokens(SAMPLE / "output", model))


def test_a_hosted_model_is_priced_at_its_family_s_length_and_the_dry_run_names_it(capsys):
    from teammed.cli import main
    from teammed.config import preset
    from teammed.data import load_dataset

    questions = load_dataset("demo")[:2]
    found = estimate_program(lambda: TeamworkProgram(preset("base")), questions, model="gpt-4o", max_tokens=1024)
    assert found.completion_tokens == found.calls * 478
    capped = estimate_program(lambda: TeamworkProgram(preset("base")), questions, model="gpt-4o", max_tokens=100)
    assert capped.completion_tokens == capped.calls * 100
    embedded = estimate_program(lambda: TeamworkProgram(preset("base")), questions, model="openai/fake",
                                max_tokens=1024)
    assert embedded.completion_tokens != embedded.calls * 478

    plan = ex.plan(ex.RunSpec(data="demo", n=2, team=ex.TeamSpec(preset="base", n_agents=3),
                              backend=ex.BackendSpec(model="gpt-4o-mini", max_tokens=1024)))
    assert plan.lengths == verbosity_for("gpt-4o-mini").text()
    assert "gpt-4o-mini's, every answer at 451 tokens" in plan.text()
    assert main(["run", "--dataset", "demo", "--n", "2", "--model", "openai/fake", "--api-base",
                 "http://127.0.0.1:9/v1", "--dry-run"]) == 0
    assert "a stated default: no published lengths for openai/fake" in capsys.readouterr().out
