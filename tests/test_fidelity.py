"""Issue 44, item 4: docs/fidelity.md's one table of departures stays in step with the code.

The table is parsed as the site renders it: every row names code that exists (``path.py`` and
``path.py::name``), every ``NAME = value`` it quotes is the module's constant, and the constants
this issue named are in it. The behaviours the rows describe are checked by running the systems
under a scripted LM.
"""

from __future__ import annotations

import ast
import importlib
import re
import tomllib
from pathlib import Path
from typing import Any

import dspy
import pytest

from teammed import usage
from teammed.adapter import SchemaAdapter
from teammed.backends import ScriptedCall, ScriptedLM
from teammed.config import config_from_components
from teammed.programs.accounting import expected_calls
from teammed.programs.peers import SYSTEMS, AdaptiveComplexity, ConsultationTeam, KnowledgeDrivenTeam
from teammed.programs.peers.consultation import PAPER_SUMMARY_TEMPERATURE, PAPER_TEMPERATURE
from teammed.programs.peers.kamac import MAX_RECRUITS_PER_ROUND
from teammed.programs.peers.mdagents import WORKED_EXAMPLE_DATASETS
from teammed.programs.teamwork import TeamworkProgram
from tests.helpers import run

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "fidelity.md"
COLUMNS = ["System", "Departure", "Where in the code", "Source says", "Why / how to get the source's behaviour"]
CODE = re.compile(r"`([^`]+)`")
REFERENCE = re.compile(r"^([\w/]+\.py)(?:::(\w+))?$")
CONSTANT = re.compile(r"^([A-Z][A-Z0-9_]*) = (.+)$")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table(text: str) -> list[dict[str, str]]:
    """The page's one table: its rows as {column: cell}; the page must hold exactly one table."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines)
              if line.startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[i + 1])]
    assert len(starts) == 1, f"docs/fidelity.md holds {len(starts)} tables; it holds one"
    start = starts[0]
    assert _cells(lines[start]) == COLUMNS
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = _cells(line)
        assert len(cells) == len(COLUMNS), line
        rows.append(dict(zip(COLUMNS, cells, strict=True)))
    return rows


ROWS = _table(PAGE.read_text(encoding="utf-8"))


def _module_of(path: str) -> Any:
    """The module a repository path is imported as, through pyproject's package-dir mapping."""
    dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    stem = path.removesuffix(".py")
    for package, folder in sorted(dirs.items(), key=lambda item: -len(item[1])):
        if stem == folder or stem.startswith(folder + "/"):
            return importlib.import_module(package + stem[len(folder):].replace("/", "."))
    raise AssertionError(f"{path} is in no package of pyproject.toml")


def _references(cell: str) -> tuple[list[tuple[str, str | None]], list[tuple[str, str]]]:
    """The ``path.py[::name]`` references and the ``NAME = value`` constants quoted in ``cell``."""
    refs, constants = [], []
    for code in CODE.findall(cell):
        if match := REFERENCE.match(code):
            refs.append((match.group(1), match.group(2)))
        elif match := CONSTANT.match(code):
            constants.append((match.group(1), match.group(2)))
    return refs, constants


def _row_quoting(name: str) -> dict[str, str]:
    rows = [r for r in ROWS if any(c == name for c, _ in _references(r["Where in the code"])[1])]
    assert len(rows) == 1, f"{name} is quoted with its value in {len(rows)} rows of docs/fidelity.md; quote it in one"
    return rows[0]


# ---------------------------------------------------------------------- the table and the code


def test_every_row_names_code_that_exists_and_its_constants_hold() -> None:
    assert len(ROWS) >= 25  # a parser that found no rows would pass vacuously
    checked = 0
    for row in ROWS:
        refs, constants = _references(row["Where in the code"])
        assert refs, f"the row {row['Departure'][:60]!r} names no code"
        modules = []
        for path, name in refs:
            assert (ROOT / path).is_file(), f"{path} does not exist"
            module = _module_of(path)
            modules.append(module)
            if name is not None:
                assert hasattr(module, name), f"{path} defines no {name}"
        for name, value in constants:
            owners = [m for m in modules if hasattr(m, name)]
            assert owners, f"{name} is quoted, but none of {[p for p, _ in refs]} defines it"
            assert getattr(owners[0], name) == ast.literal_eval(value), (name, value)
            checked += 1
    assert checked >= 4


def test_the_constants_this_issue_named_are_in_the_table_with_the_sources_values() -> None:
    assert MAX_RECRUITS_PER_ROUND == 2 and _row_quoting("MAX_RECRUITS_PER_ROUND")["System"] == "kamac"
    assert _row_quoting("WORKED_EXAMPLE_DATASETS")["System"] == "mdagents"
    assert "medqa" in WORKED_EXAMPLE_DATASETS
    row = _row_quoting("PAPER_TEMPERATURE")
    assert row is _row_quoting("PAPER_SUMMARY_TEMPERATURE") and row["System"] == "consultation"
    # what the row says the paper says is what the constants hold
    assert f"at {PAPER_TEMPERATURE}" in row["Source says"] and f"at {PAPER_SUMMARY_TEMPERATURE}" in row["Source says"]


def test_every_system_is_in_the_table_or_named_without_a_row() -> None:
    text = PAGE.read_text(encoding="utf-8")
    tabled = {r["System"].split(" ")[0] for r in ROWS}
    without = next(p for p in text.split("\n\n") if p.startswith("Systems without a row:"))
    named = set(CODE.findall(without))
    for system in ["teamwork", *SYSTEMS]:
        assert system in tabled or system in named, f"{system} has no row and is not named as having none"
    assert not tabled & named
    assert tabled - {"all"} <= {"teamwork", *SYSTEMS}


def test_the_page_is_in_the_site_and_the_decisions_page_links_to_it() -> None:
    assert "  - Fidelity to the sources: fidelity.md\n" in (ROOT / "mkdocs.yml").read_text()
    assert "(fidelity.md)" in (ROOT / "docs" / "decisions.md").read_text()


# ---------------------------------------------------------------------- teamwork


def test_components_to_runs_generic_roles_and_equal_weights() -> None:
    config = config_from_components("to", n_agents=3)
    assert config.components == ("team_orientation",)
    out, used, lm = run(TeamworkProgram(config))
    agents = out.json_record["agents"]
    assert [a["role"] for a in agents] == ["Medical Expert 1", "Medical Expert 2", "Medical Expert 3"]
    assert [a["weight"] for a in agents] == pytest.approx([1 / 3] * 3)
    assert "SpecialtyRecruitment" not in {c.signature for c in lm.calls}
    assert used.calls == expected_calls(config, 3)
    # with leadership, team orientation recruits specialists with the hierarchy's weights
    led, _, led_lm = run(TeamworkProgram(config_from_components("to,l", n_agents=3)))
    assert [a["weight"] for a in led.json_record["agents"]] == [0.5, 0.3, 0.2]
    assert "SpecialtyRecruitment" in {c.signature for c in led_lm.calls}


def test_the_post_round_two_leader_work_is_three_calls() -> None:
    config = config_from_components("smm,l,to,t", n_agents=3)
    _, _, lm = run(TeamworkProgram(config))
    post_round_two = ("ConsensusFacts", "FormalReport", "AssessmentQuality")
    assert sum(c.signature in post_round_two for c in lm.calls) == 3  # the row's "up to 3", not 1 combined


# ---------------------------------------------------------------------- peer systems


def _examples(n: int = 10) -> list[dict[str, Any]]:
    return [{"question": f"Worked example {i}?", "options": {"A": "x", "B": "y"}, "answer": "AB"[i % 2]}
            for i in range(n)]


@pytest.mark.parametrize(("dataset", "shown"), [
    (None, 5), ("medqa", 5), ("MedQA", 5), ("medqa-5options", 5), ("medmcqa", 0), ("pubmedqa", 0),
])
def test_mdagents_worked_examples_follow_the_data_set_when_given_one(dataset: str | None, shown: int) -> None:
    system = AdaptiveComplexity(examples=_examples(), dataset=dataset)
    assert len(system.primary_care.predict.demos) == len(system.panel_opinion.predict.demos) == shown
    assert system.config.dataset == dataset


def _kamac(call: ScriptedCall) -> Any:
    if call.signature == "ExpertRecruitment":
        return {"experts": [{"role": "Cardiology", "expertise": "x"}]}
    if call.signature == "ConsensusCheck":
        return {"consensus": "no", "answer": "A", "reason": "split"}
    if call.signature == "KnowledgeGap":
        return {"gap": "yes", "specialties": [{"role": r, "expertise": "x"} for r in
                                              ("Nephrology", "Pulmonology", "Neurology", "Hematology")],
                "reason": "r"}
    return {"answer": "A"}


@pytest.mark.parametrize(("max_recruits", "joined"), [(MAX_RECRUITS_PER_ROUND, 2), (None, 4), (0, 0)])
def test_kamac_caps_recruits_by_default_and_none_lifts_the_cap(max_recruits: int | None, joined: int) -> None:
    assert KnowledgeDrivenTeam().config.max_recruits == MAX_RECRUITS_PER_ROUND
    out, _, _ = run(KnowledgeDrivenTeam(max_rounds=1, max_recruits=max_recruits), _kamac)
    assert [len(r) for r in out.json_record["recruited_per_round"]] == [joined]


class _TemperatureLM(ScriptedLM):
    """A scripted LM run at ``run_temperature`` that notes each call's behaviour and temperature."""

    def __init__(self, responder: Any, *, run_temperature: float) -> None:
        super().__init__(responder)
        self.kwargs["temperature"] = run_temperature
        self.sampled: list[tuple[str, float | None]] = []

    def complete(self, messages, **kwargs):  # type: ignore[no-untyped-def]
        fmt = kwargs.get("response_format") or {}
        schema = fmt.get("schema") or fmt.get("json_schema", {}).get("schema") or {}
        self.sampled.append((schema.get("title", "?"), kwargs.get("temperature")))
        return super().complete(messages, **kwargs)


def _consult(call: ScriptedCall) -> Any:
    if call.signature == "ConsultSpecialties":
        return {"specialties": ["Cardiology", "Nephrology", "Pulmonology", "Neurology", "Hematology"]}
    if call.signature in ("SpecialistAnalysis", "SpecialistDebate"):
        role = str(call.inputs.get("role", ""))
        return {"reasoning": "Long reasoning. " * 40, "choice": "A" if role.startswith(("Cardio", "Nephro")) else "B"}
    if call.signature == "CompressMessage":
        return {"summary": "short"}
    if call.signature == "ManagerAggregate":
        return {"answer": "A", "rationale": "Manager decided.", "confidence": "Low"}
    return None


@pytest.mark.parametrize("paper", [False, True])
def test_consultation_runs_at_the_runs_temperature_unless_given_the_papers(paper: bool) -> None:
    settings = {"temperature": PAPER_TEMPERATURE, "summary_temperature": PAPER_SUMMARY_TEMPERATURE} if paper else {}
    system = ConsultationTeam(max_rounds=2, max_reassignments=0, context_window=200, **settings)
    lm = _TemperatureLM(_consult, run_temperature=0.3)
    with dspy.context(lm=lm, adapter=SchemaAdapter()), usage.track():
        system(question="A 60-year-old with dyspnoea. Most likely diagnosis?", options={"A": "HF", "B": "PE"})
    by_behaviour: dict[str, set[float | None]] = {}
    for name, temperature in lm.sampled:
        by_behaviour.setdefault(name, set()).add(temperature)
    assert {"ConsultSpecialties", "SpecialistAnalysis", "SpecialistDebate", "CompressMessage",
            "ManagerAggregate"} <= set(by_behaviour)  # every kind of call ran, the compression included
    summary = by_behaviour.pop("CompressMessage")
    reasoning = set().union(*by_behaviour.values())
    if paper:
        assert (reasoning, summary) == ({PAPER_TEMPERATURE}, {PAPER_SUMMARY_TEMPERATURE})
    else:
        assert reasoning == summary == {0.3}  # the run's temperature, every call
