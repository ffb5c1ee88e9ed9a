"""``tune --dry-run`` at the tune's own re-planning (issue 45, item 4): the dry run runs the real tune against a
stand-in that bills, so its plan, its re-plan at the rate its first batch measures and its proof are the real
tune's; a tokens= budget the real tune can finish is not refused for the estimate's worst case."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from teammed import experiments as ex
from teammed.backends.simulated import simulated_questions
from teammed.optimizers.tune import TuneSettings, first_rate, opening_plan
from teammed.optimizers.tune_plan import BelowMinimum
from teammed.optimizers.tune_queue import Budget
from tests.fake_openai import FakeOpenAI
from tests.schema_fake import handler

SETTINGS = TuneSettings(dataset="q", model="m", optimizer="none", batch_size=5)


def _questions(tmp_path: Path, n: int = 120) -> Path:
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"id": q.id, "question": q.question, "options": q.options,
                                        "answer_idx": q.answer_idx}) + "\n"
                            for q in simulated_questions(n, seed=1, prefix="c")))
    return data


def _billing(n, body):
    """The schema-filling fake, billing prompts and answers with litellm's counter, as a provider would."""
    import litellm

    status, headers, payload = handler(n, body)
    prompt = litellm.token_counter(model="gpt-4o", messages=body["messages"])
    answer = litellm.token_counter(model="gpt-4o", text=payload["choices"][0]["message"]["content"])
    payload["usage"] = {"prompt_tokens": prompt, "completion_tokens": answer, "total_tokens": prompt + answer}
    return status, headers, payload


def test_a_tokens_budget_short_only_at_the_worst_case_rate_starts_and_one_short_of_the_first_batch_is_refused():
    """Refused only when stage 1's first batch does not fit even at the cheapest a call can be."""
    tq, eq = simulated_questions(60, seed=3, prefix="t"), simulated_questions(20, seed=3, prefix="e")
    rate = first_rate(SETTINGS, Budget(tokens=1), tq, max_tokens=64, prices=None, eval_questions=eq,
                      model="simulated")
    with pytest.raises(BelowMinimum) as short:
        opening_plan(SETTINGS, Budget(calls=10), n_tune=60, n_eval=20, rate=None)
    minimum, first_batch = short.value.minimum, short.value.first_batch
    assert 0 < first_batch < minimum
    between = Budget(tokens=(first_batch + minimum) / 2 * rate.tokens)
    plan = opening_plan(SETTINGS, between, n_tune=60, n_eval=20, rate=rate)
    assert plan.provisional and plan.rate == rate and plan.budget == between
    assert "below the smallest tune" in plan.text() and "first batch measures the rate" in plan.text()
    assert rate.floor is not None and 0 < rate.floor < rate.tokens
    cheapest = opening_plan(SETTINGS, Budget(tokens=first_batch * rate.floor + 1), n_tune=60, n_eval=20, rate=rate)
    assert cheapest.provisional  # the first batch fits at the cheapest a call can be: the tune may try
    with pytest.raises(BelowMinimum, match="need tokens=.*even at the cheapest a call can be"):
        opening_plan(SETTINGS, Budget(tokens=(first_batch - 1) * rate.floor), n_tune=60, n_eval=20, rate=rate)
    with pytest.raises(BelowMinimum):  # a calls= limit is what it says: never provisional
        opening_plan(SETTINGS, Budget(calls=minimum - 1, tokens=10 * minimum * rate.tokens), n_tune=60, n_eval=20,
                     rate=rate)


def test_the_dry_run_and_the_real_tune_agree_on_the_proof_and_the_calls(tmp_path):
    """Against a server that bills as a provider: the dry run with a pilot of 3 (answer lengths measured) runs the
    tune's own plan and re-plan, and its calls are within 25% of the real tune's, the proof decided alike.
    The budget is below the smallest tune at the estimated rate (a worst case), yet the real tune finishes."""
    with FakeOpenAI(_billing) as server:
        spec = ex.TuneSpec(data=str(_questions(tmp_path)), budget="tokens=700000", n_eval=10, optimizer="none",
                           batch_size=5, out=tmp_path / "t",
                           backend=ex.BackendSpec(model="openai/fake", api_base=server.api_base, cache=False,
                                                  max_tokens=256))
        planned = ex.plan(spec, pilot=3)
        assert not (tmp_path / "t").exists()
        result = ex.tune(spec)
    [part] = planned.parts
    assert "run against the stand-in" in part.what and "below the smallest tune" in planned.text()
    assert result.done
    billed = result.report["spent"]["calls"]  # the report's basis, the dry run's too
    assert part.draws == 3 and part.low is not None and part.high is not None  # three draws and their range
    assert part.low[0] <= part.calls <= part.high[0] and part.low[1] <= part.expected[1] <= part.high[1]
    assert "the mean of 3 draws of the stand-in's random answers; they ranged" in planned.text()
    drew = re.search(r"held-out proof run in (\d+) of (\d+) draws", part.what)
    assert (drew is not None and 2 * int(drew[1]) > int(drew[2])) == (result.report["held_out"] is not None)
    assert planned.calls == pytest.approx(billed, rel=0.25)
    assert planned.prompt_tokens + planned.completion_tokens == pytest.approx(result.report["spent"]["tokens"],
                                                                              rel=0.25)
    assert "answer lengths: measured by the pilot" in planned.text() and "races run" in planned.text()


def test_a_tune_dry_run_repeats_exactly_and_writes_nothing(tmp_path):
    spec = ex.TuneSpec(data=str(_questions(tmp_path)), budget="tokens=3e6", n_eval=10, optimizer="bootstrap",
                       batch_size=5, out=tmp_path / "t", backend=ex.BackendSpec(model="simulated", max_tokens=64))
    first, second = ex.plan(spec), ex.plan(spec)
    assert first == second and first.calls > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.jsonl"]


def test_a_tune_takes_the_questions_and_the_source_split_it_is_given_and_refuses_a_part(tmp_path):
    from teammed.errors import ConfigError
    from teammed.experiments.tune import tune_questions

    held = tuple(simulated_questions(80, seed=5, prefix="h"))
    spec = ex.TuneSpec(data=ex.DataSpec(dataset="mine", questions=held), budget="calls=1e6", n_eval=10)
    tune_q, eval_q, choice = tune_questions(spec)
    assert {q.id for q in tune_q + eval_q} <= {q.id for q in held} and choice.name == "mine"
    folder = tmp_path / "medqa"
    folder.mkdir()
    for split, prefix in (("test", "a"), ("test_hard", "b")):
        (folder / f"{split}.jsonl").write_text("".join(
            json.dumps({"realidx": q.id, "question": q.question, "options": q.options, "answer_idx": q.answer_idx})
            + "\n" for q in simulated_questions(40, seed=2, prefix=prefix)))
    hard = ex.TuneSpec(data=ex.DataSpec(dataset="medqa", data_dir=tmp_path, split="test_hard"), budget="calls=1e6",
                       n_eval=5)
    tune_q, eval_q, choice = tune_questions(hard)
    assert all(q.id.startswith("b") for q in tune_q + eval_q) and choice.split == "test_hard/tune"
    with pytest.raises(ConfigError, match="cannot be given"):
        tune_questions(hard.model_copy(update={"data": ex.DataSpec(dataset="medqa", data_dir=tmp_path,
                                                                   split="tune")}))


def test_a_re_plan_near_a_threshold_is_named_as_an_edge_with_both_outcomes():
    from teammed.experiments.plan import edge_note, flip_factor

    def replanned(tokens, calls=None, usd=None, rate_usd=None):
        return {"limits": {"calls": calls, "tokens": tokens, "usd": usd}, "rate": {"tokens": 1500.0, "usd": rate_usd},
                "spent": {"calls": 535, "tokens": 802500.0, "usd": 0.0}, "budget_calls": 1333, "minimum": 1365,
                "with_proof": 3005}

    # a rate f times the stand-in's on every call, the first batch's too: f * 1500 * 1365 tokens reach 1,365 calls
    short = replanned(tokens=2_000_000)
    assert flip_factor(short, 1365) == pytest.approx(2_000_000 / (1500 * 1365))  # 0.977: 2.3% cheaper reaches it
    note = edge_note(short)
    assert note is not None and note.startswith("near an edge: at the stand-in's 1,500 tokens a call")
    assert ("the smallest tune needs up to 1,365 calls, and a real rate a call 2% lower than the stand-in's means "
            "the tune goes on past stage 1's first batch (the smallest tune: up to 1,365 calls)") in note
    assert "proof" not in note
    ahead = edge_note(replanned(tokens=2_100_000))  # 1.026: 2.6% dearer and it stops after the first batch
    assert "3% higher than the stand-in's means the tune stops after stage 1's first batch (about 535 calls)" in (
        ahead or "")
    near_proof = edge_note(replanned(tokens=4_300_000))  # 4.3e6 / (1500 * 3005) = 0.954; 2.1 of the minimum
    assert (near_proof or "").endswith("a real rate a call 5% lower than the stand-in's means the proof runs")
    assert "0.4% higher" in (edge_note(replanned(tokens=2_056_000)) or "")  # under 1%: one decimal
    assert edge_note(replanned(tokens=3_000_000)) is None  # 1.47 of the one, 0.67 of the other
    # a calls= limit that binds: no rate flips the tune past it, and nothing is said of the rate
    assert edge_note(replanned(tokens=2_100_000, calls=1300)) is None
    # usd= priced at its own rate
    dollars = replanned(tokens=None, usd=1.0, rate_usd=1.0 / 1365)
    dollars["spent"]["usd"] = 535 / 1365  # the first batch at that rate
    assert flip_factor(dollars, 1365) == pytest.approx(1.0)
    assert "$0.0007326 a call" in (edge_note(dollars) or "")
    assert edge_note({**short, "budget_calls": None}) is None and edge_note(None) is None


def test_a_tokens_tune_reports_what_its_re_plan_decided_on(tmp_path):
    spec = ex.TuneSpec(data=str(_questions(tmp_path)), budget="tokens=3e6", n_eval=10, optimizer="none",
                       batch_size=5, out=tmp_path / "t", backend=ex.BackendSpec(model="simulated", max_tokens=64))
    replanned = ex.tune(spec).report["replanned"]
    assert replanned["budget_calls"] >= replanned["minimum"] > replanned["spent"]["calls"] > 0
    assert replanned["with_proof"] > replanned["minimum"] and replanned["rate"]["tokens"] > 0
    assert replanned["limits"] == {"calls": None, "tokens": 3e6, "usd": None} and replanned["spent"]["tokens"] > 0
