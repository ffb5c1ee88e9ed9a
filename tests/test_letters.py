"""Issue 32, items 1-2: one letter reader for every system, and no answer that names no option.

`letter_of` is the only reader of option letters (teamwork rankings, turns, tie-breaks and
corrections, every peer's votes). A server that ignores the schema's enum and writes prose
naming C gets C or a failed question, never A (the first option) in any system; an answer
naming no option fails the row end to end through ``teammed run``.
"""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from teammed.backends.scripted import schema_example
from teammed.cli import main
from teammed.programs.letters import letter_of
from teammed.programs.peers import SYSTEMS
from teammed.programs.ranking import read_choice, read_ranking

from .fake_openai import FakeOpenAI, completion

OPTIONS = {"A": "Myocardial infarction", "B": "Pulmonary embolism", "C": "Aortic dissection",
           "D": "Vitamin D deficiency"}


@pytest.mark.parametrize("raw,letter", [
    ("C", "C"), ("c", "C"), ("(C)", "C"), ("C)", "C"), ("c.", "C"), ("**C**", "C"), ("[c]", "C"),
    ("Answer: C", "C"), ("answer: c", "C"), ("The answer is c.", "C"), ("Option C is most likely", "C"),
    ("Definitely C", "C"), ("C) Aortic dissection", "C"), ("Aortic dissection", "C"), ("aortic  DISSECTION.", "C"),
    ("I would choose C", "C"), ("The best answer is C.", "C"), ("Aortic dissection is the answer", "C"),
    ("Vitamin D deficiency", "D"),  # an option's text, not the capital inside it
    ("Answer: B, given the D-dimer", "B"),  # "D-dimer" is a word, not a letter
])
def test_a_reply_naming_one_option_reads_as_that_option(raw, letter) -> None:
    assert letter_of(raw, OPTIONS) == letter


@pytest.mark.parametrize("raw", [
    None, "", "   ", "E", "Option E", "A or C", "C) Pulmonary embolism",  # letter and text disagree
    "A tall man with C",  # two capitals that are letters: ambiguous
    "Myocardial infarction over aortic dissection", "The answer is a tall man", "C-reactive protein",
    "none of these", True,
    # negated or hedged: never the letter they mention (a hostile review's list)
    "not C", "Not C", "definitely not C", "C is wrong", "Can't be C", "Exclude C", "Everything except C",
    "rule out C", "Not Aortic dissection", "Option (b) is incorrect", "answer: c, or maybe d",
    "the answer is c. but d is close", "option a, b or c could fit",
    # a letter that is a word or part of a name
    "A thorough history is needed first", "A is likely, I think", "Protein C", "Vitamin A", "Group A strep",
    "C. difficile", "I think C",
])
def test_an_ambiguous_or_unmatched_reply_reads_as_no_option(raw) -> None:
    assert letter_of(raw, OPTIONS) is None


TEN = {k: f"option text {k.lower()}x" for k in "ABCDEFGHIJ"}  # MMLU-Pro: "I" is an option letter


@pytest.mark.parametrize("raw", ["I am not sure", "I don't know", "Type I diabetes", "Class I", "E. coli",
                                 "H. pylori", "ı", "I think"])
def test_with_ten_options_the_pronoun_and_names_are_no_letter(raw) -> None:
    assert letter_of(raw, TEN) is None


def test_with_ten_options_the_letter_i_itself_is_read() -> None:
    assert letter_of("I", TEN) == "I" and letter_of("Answer: I", TEN) == "I" and letter_of("(i)", TEN) == "I"


def test_options_that_are_letters_are_read_only_exactly() -> None:
    swapped = {"A": "B", "B": "A"}
    assert letter_of("B", swapped) == "B" and letter_of("the answer is B", swapped) is None


def test_two_options_with_the_same_text_are_ambiguous() -> None:
    assert letter_of("Reflux", {"A": "Reflux", "B": "reflux", "C": "Asthma"}) is None


def test_a_ranking_keeps_what_it_can_read_and_counts_the_rest() -> None:
    read = read_ranking(["Answer: C", "Option B", "unsure", "Myocardial infarction", "C"], OPTIONS)
    assert read.ranking == ["C", "B", "A", "D"] and read.repaired and not read.fell_back
    assert read.invalid_letters == 1
    clean = read_ranking(["B", "A", "D", "C"], OPTIONS)
    assert (clean.repaired, clean.fell_back, clean.invalid_letters) == (False, False, 0)


def test_a_ranking_with_no_readable_item_is_a_failed_vote() -> None:
    read = read_ranking(["Answer: E", "maybe", "A or B"], OPTIONS)
    assert read.fell_back and read.invalid_letters == 3


def test_a_choice_outside_the_allowed_letters_falls_back_to_the_default() -> None:
    assert read_choice("Answer: C", OPTIONS, allowed=["A", "B"], default="B").fell_back
    pick = read_choice("Option A is best", OPTIONS, allowed=["A", "B"], default="B")
    assert (pick.first, pick.fell_back, pick.repaired) == ("A", False, True)


# ---------------------------------------------------------------------- every system, a prose server

PROSE = ["Answer: {x}", "Option {x} is most likely", "{text}", "Definitely {x}", "({x})"]


class ProseServer:
    """Ignores the schema's enum: every option-letter field is prose naming C, and every ranking
    is prose naming C first, then the other options (in the five forms of ``PROSE``, in turn)."""

    def __init__(self) -> None:
        self._forms = itertools.cycle(PROSE)
        self._lock = threading.Lock()

    def _say(self, letter: str) -> str:
        with self._lock:
            form = next(self._forms)
        return form.format(x=letter, text=OPTIONS[letter])

    def __call__(self, n: int, body: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
        fmt = body.get("response_format") or {}
        schema = fmt.get("json_schema", {}).get("schema") or fmt.get("schema")
        answer = schema_example(schema)
        for name, prop in schema["properties"].items():
            enum = prop.get("enum") or (prop.get("items") or {}).get("enum")
            if not enum or not set(enum) <= set(OPTIONS):
                continue
            if prop.get("type") == "array":
                answer[name] = [self._say(x) for x in ["C", *(y for y in enum if y != "C")]]
            else:
                answer[name] = self._say("C" if "C" in enum else enum[-1])
        return 200, {}, completion(json.dumps(answer))


def _dataset(path: Path, n: int) -> Path:
    rows = [{"id": f"q{i}", "question": f"Case {i}: a tall man has tearing chest pain radiating to the back.",
             "options": OPTIONS, "answer_idx": "C"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: Any, *flags: str, n: int = 2) -> list[dict]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = _dataset(tmp_path / "cases.jsonl", n + 4)  # the other cases are few-shot examples
    with FakeOpenAI(server) as fake:
        main(["run", "--dataset", str(data), "--split", "test", "--n", str(n), *flags, "--model", "openai/x",
              "--api-base", fake.api_base, "--no-cache", "--retry-attempts", "1", "--timeout", "10",
              "--out", str(tmp_path / "run")])
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == n
    return rows


SYSTEM_FLAGS = [("--preset", "base"), ("--preset", "all"), ("--preset", "leadership"),
                *(("--system", s) for s in sorted(SYSTEMS))]


@pytest.mark.parametrize("flags", SYSTEM_FLAGS, ids=lambda f: f[1])
def test_prose_naming_c_is_read_as_c_never_as_a(tmp_path, monkeypatch, flags) -> None:
    rows = _run(tmp_path, monkeypatch, ProseServer(), *flags)
    for row in rows:
        assert row["prediction"] in ("C", None) and (row["prediction"] is None) == row["failed"]
        assert row["prediction"] == "C", row["error"]  # every form in PROSE names C unambiguously
        record = row["record"] or {}
        firsts = [v.get("first") for key in ("r2", "final") for v in record.get(key) or []]
        assert set(firsts) <= {"C"}
        if flags[0] == "--preset":  # teamwork: the prose was read, so repaired, never dropped
            assert row["ranking_repairs"] > 0 and row["fallbacks"] == 0


@pytest.mark.parametrize("flags", SYSTEM_FLAGS, ids=lambda f: f[1])
def test_an_answer_naming_no_option_fails_the_row_in_every_system(tmp_path, monkeypatch, flags) -> None:
    from teammed import runner

    original = runner.answer

    def answer(program, question, lm, **kwargs):
        forward = program.forward

        def nowhere(*args, **kw):
            prediction = forward(*args, **kw)
            prediction.answer = "Z"
            return prediction

        monkeypatch.setattr(program, "forward", nowhere)
        return original(program, question, lm, **kwargs)

    monkeypatch.setattr(runner, "answer", answer)
    rows = _run(tmp_path, monkeypatch, ProseServer(), *flags)
    for row in rows:
        assert row["failed"] and row["prediction"] is None and row["correct"] is False
        assert row["error_type"] == "InvalidOption" and "no valid option" in row["error"]


# ---------------------------------------------------------------------- item 3: the team size of "auto"

@pytest.mark.parametrize("reply", [{"n_agents": 7, "reason": "big case"}, {"n_agents": "several"}, "a team of many"])
def test_an_unusable_agent_count_gives_the_default_team_counted_as_a_fallback(reply) -> None:
    from teammed.config import TeamworkConfig
    from teammed.programs import TeamworkProgram
    from teammed.programs.recruitment import DEFAULT_TEAM_SIZE

    from .helpers import run

    program = TeamworkProgram(TeamworkConfig(n_agents="auto"))
    prediction, used, _ = run(program, lambda call: reply if call.signature == "AgentCount" else None)
    record = prediction.record
    assert DEFAULT_TEAM_SIZE == 3 and len(record.agents) == 3  # not 2, the schema's first value
    assert record.fallbacks_by_behaviour.get("AgentCount") == 1 and record.fallbacks >= 1
    (count,) = [e for e in prediction.transcript if e.kind == "agent_count"]
    assert count.data["fell_back"] and "default of 3" in count.text


@pytest.mark.parametrize("size", [2, 3, 4])
def test_a_usable_agent_count_is_the_team_size_and_no_fallback(size) -> None:
    from teammed.config import TeamworkConfig
    from teammed.programs import TeamworkProgram

    from .helpers import run

    program = TeamworkProgram(TeamworkConfig(n_agents="auto"))
    prediction, _, _ = run(program, lambda call: {"n_agents": size, "reason": "r"}
                           if call.signature == "AgentCount" else None)
    assert len(prediction.record.agents) == size and "AgentCount" not in prediction.record.fallbacks_by_behaviour
