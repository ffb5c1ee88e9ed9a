"""Published per-question outputs (MedAgentsBench's output/ layout): the reader, and `report --published`
(issue 43, items 1 and 2). Fixtures in the files' own format, quirks included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from teammed.data.published import PublishedFormatError, published_files, read_published, reference_of, text_key
from teammed.evals import build_report
from teammed.evals.stats import holm, mcnemar

N = 12
QUESTIONS = [f"A {30 + i}-year-old presents with finding number {i}. What is the next step?" for i in range(N)]
GOLD = ["ABCD"[i % 4] for i in range(N)]


def _row(i: int, prediction: Any, *, realidx: int | None = None, tokens: tuple[int, int] | None = (100, 10),
         question: str | None = None) -> dict[str, Any]:
    row = {"realidx": i if realidx is None else realidx, "question": question or QUESTIONS[i],
           "options": {"A": "a", "B": "b", "C": "c", "D": "d"}, "answer_idx": GOLD[i], "predicted_answer": prediction,
           "time_elapsed": str(1.5 + i)}
    if tokens is not None:
        row["token_usage"] = str({"prompt_tokens": tokens[0], "completion_tokens": tokens[1]})  # as published
    return row


def _wrong(i: int) -> str:
    return "ABCD"[(i + 1) % 4]


@pytest.fixture
def output(tmp_path: Path) -> Path:
    """zero_shot right on 0-5; medagents right on 0-8, renumbered, one text with " ?" appended, one
    question twice; aflow with no token_usage and a NaN prediction; mdagents with prose answers."""
    folder = tmp_path / "output" / "medqa"
    folder.mkdir(parents=True)

    def write(method: str, rows: list[dict[str, Any]], model: str = "gpt-4o") -> None:
        (folder / f"{model}-medqa-test_hard-{method}.json").write_text(json.dumps(rows), encoding="utf-8")

    write("zero_shot", [_row(i, GOLD[i] if i < 6 else _wrong(i)) for i in range(N)])
    medagents = [_row(i, GOLD[i] if i < 9 else _wrong(i), realidx=N - 1 - i, tokens=(1000, 100)) for i in range(N)]
    medagents[3]["question"] = QUESTIONS[3] + "\n ?"
    medagents.append(dict(medagents[0]))
    write("medagents", medagents)
    write("aflow", [_row(i, GOLD[i] if i < 7 else (float("nan") if i == 11 else _wrong(i)), tokens=None)
                    for i in range(N)])
    write("mdagents", [_row(i, GOLD[i] if i < 2 else f"The answer is ({GOLD[i]})", tokens=(5000, 500))
                       for i in range(N)])
    write("zero_shot", [_row(i, GOLD[i]) for i in range(N)], model="gpt-4o-mini")
    return tmp_path / "output"


def test_a_file_reads_as_typed_rows_with_its_quirks_stated(output: Path) -> None:
    paths = published_files(output, model="gpt-4o")
    reference = reference_of(paths)
    run = read_published(output / "medqa" / "gpt-4o-medqa-test_hard-medagents.json", reference=reference)
    assert (run.model, run.dataset, run.split, run.method) == ("gpt-4o", "medqa", "test_hard", "medagents")
    assert run.n == N and run.duplicates == 1 and run.renumbered == N  # its realidx is 11 - i
    assert {row.id for row in run.rows} == {str(i) for i in range(N)}  # matched by text, " ?" included
    assert sum(row.correct for row in run.rows) == 9
    assert run.summary().tokens_per_question == 1100 and run.summary().seconds_per_question == pytest.approx(7.0)
    aflow = read_published(output / "medqa" / "gpt-4o-medqa-test_hard-aflow.json", reference=reference)
    assert not aflow.tokens_reported and aflow.summary().tokens_per_question is None
    assert aflow.rows[11].prediction is None and not aflow.rows[11].correct and aflow.unscored == 1
    assert "tokens unknown, not zero" in " ".join(aflow.notes())
    mdagents = read_published(output / "medqa" / "gpt-4o-medqa-test_hard-mdagents.json", reference=reference)
    assert mdagents.unscored == N - 2 and mdagents.summary().correct == 2  # prose is never turned into a letter
    assert text_key("Why?\n ?") == text_key("why") == "why"


@pytest.mark.parametrize(("content", "said"), [
    ('[{"question": "q", "answer_idx": "A", "predicted_answer": "A"}, {"quest', "not valid JSON"),
    ('[{"question": "q", "answer_idx": "A"}]', "row 0 (realidx None) has no predicted_answer"),
    ('{"question": "q"}', "expected a JSON list of objects"),
    ('[{"question": "q", "answer_idx": "A", "predicted_answer": "A", "token_usage": "oops"}]', "is not a mapping"),
])
def test_a_malformed_file_is_refused_naming_the_file_and_what_is_wrong(tmp_path: Path, content: str,
                                                                       said: str) -> None:
    path = tmp_path / "medqa" / "gpt-4o-medqa-test_hard-cot.json"
    path.parent.mkdir()
    path.write_text(content)
    with pytest.raises(PublishedFormatError, match="gpt-4o-medqa-test_hard-cot.json") as caught:
        read_published(path)
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_a_badly_named_file_and_an_empty_filter_are_refused(tmp_path: Path, output: Path) -> None:
    odd = tmp_path / "medqa" / "results.json"
    odd.parent.mkdir()
    odd.write_text("[]")
    with pytest.raises(PublishedFormatError, match="<model>-medqa-<split>-<method>.json"):
        read_published(odd)
    with pytest.raises(PublishedFormatError, match="holds .*gpt-4o-mini/medqa/test_hard"):
        published_files(output, model="claude")


def _write_run(root: Path, label: str, seed: int, right: set[int], ids: list[int]) -> Path:
    run = root / f"{label}-{seed}"
    run.mkdir(parents=True)
    rows = [{"id": str(i), "dataset": "medqa", "split": "test_hard", "seed": seed, "system": "teamwork",
             "label": label, "gold": GOLD[i], "prediction": GOLD[i] if i in right else _wrong(i),
             "correct": i in right, "failed": False, "question": QUESTIONS[i], "options": {"A": "a", "B": "b"},
             "calls": 9, "prompt_tokens": 4000, "completion_tokens": 400, "latency_s": 3.0} for i in ids]
    run.joinpath("results.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return run


def test_report_sets_the_published_methods_beside_the_runs_each_question_once(output: Path, tmp_path: Path) -> None:
    # two seeds that drew overlapping questions: 0-7 and 4-11, right on 0-3 and 8-9 whatever the seed
    right = {0, 1, 2, 3, 8, 9}
    runs = [_write_run(tmp_path / "runs", "base", 1, right, list(range(8))),
            _write_run(tmp_path / "runs", "base", 2, right, list(range(4, 12)))]
    report = build_report(runs, tmp_path / "report", published=output, published_model="gpt-4o")
    numbers = json.loads((report.parent / "summary.json").read_text())["published"]
    medqa = numbers["datasets"]["medqa"]
    methods = {m["method"]: m for m in medqa["methods"]}
    assert medqa["questions"] == N and set(methods) == {"zero_shot", "medagents", "aflow", "mdagents"}
    assert (methods["zero_shot"]["accuracy"], methods["zero_shot"]["tokens_per_question"]) == (0.5, 110)
    assert methods["aflow"]["tokens_per_question"] is None
    # each question once: 12 pairs (not 16 answers); ours right on 0-3, 8, 9; zero_shot on 0-5
    tests = {t["method"]: t for t in numbers["tests"]}
    zero = tests["zero_shot"]
    assert (zero["n"], zero["b"], zero["c"], zero["repeats"]) == (N, 2, 2, 4)
    assert zero["p"] == mcnemar(2, 2)
    medagents = tests["medagents"]  # right on 0-8: b = 9 (ours only), c = 4, 5, 6, 7 (medagents only)
    assert (medagents["b"], medagents["c"]) == (1, 4)
    assert [t["p_holm"] for t in numbers["tests"]] == holm([t["p"] for t in numbers["tests"]])
    text = report.read_text()
    assert "## Published methods beside these runs" in text and "not reported" in text
    assert (report.parent / "published_front.png").read_bytes().startswith(b"\x89PNG")


def test_the_command_reads_the_folder_and_refuses_an_unknown_model(output: Path, tmp_path: Path) -> None:
    run = _write_run(tmp_path / "runs", "base", 1, {0, 1}, list(range(N)))
    cmd = [sys.executable, "-m", "teammed", "report", str(run), "--out", str(tmp_path / "r"),
           "--published", str(output)]
    refused = subprocess.run(cmd, capture_output=True, text=True)
    assert refused.returncode != 0 and "2 models (gpt-4o, gpt-4o-mini)" in refused.stderr
    done = subprocess.run([*cmd, "--model", "gpt-4o-mini"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "| zero_shot | gpt-4o-mini (published) | 12 | 100.0 |" in (tmp_path / "r" / "report.md").read_text()


def test_compare_sets_one_configuration_against_a_published_method_or_file(output: Path, tmp_path: Path) -> None:
    right = {0, 1, 2, 3, 8, 9}  # zero_shot (published) right on 0-5
    runs = [_write_run(tmp_path / "runs", "base", 1, right, list(range(8))),
            _write_run(tmp_path / "runs", "base", 2, right, list(range(4, 12)))]
    by_name = build_report(runs, tmp_path / "a", compare="zero_shot", published=output, published_model="gpt-4o")
    view = json.loads((by_name.parent / "summary.json").read_text())["compare"]
    # each of the 12 questions once: ours only on 8, 9; published only on 4, 5
    assert (view["n"], view["fixed"], view["broken"], view["repeats"]) == (N, 2, 2, 4)
    assert view["fixed_ids"] == ["8", "9"] and view["broken_ids"] == ["4", "5"] and view["p_mcnemar"] == mcnemar(2, 2)
    assert "`base` against `zero_shot` (gpt-4o, published)" in by_name.read_text()
    file = output / "medqa" / "gpt-4o-medqa-test_hard-zero_shot.json"
    by_file = build_report(runs, tmp_path / "b", compare=str(file))
    assert json.loads((by_file.parent / "summary.json").read_text())["compare"]["fixed_ids"] == ["8", "9"]
    two = [*runs, _write_run(tmp_path / "runs", "all", 1, right, list(range(8)))]
    with pytest.raises(Exception, match="sets one configuration against a published method"):
        build_report(two, tmp_path / "c", compare="zero_shot", published=output, published_model="gpt-4o")
    with pytest.raises(Exception, match="give --published DIR"):
        build_report(runs, tmp_path / "d", compare="zero_shot")
