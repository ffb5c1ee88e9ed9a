"""The consumers of result rows read the typed models (`ResultRow`, `Deliberation`, `PeerRecord`).

No consumer probes a stored dict; typed rows and their stored form give the same metrics; rows
written before schema versions, peer systems' rows and records of an older shape still report;
the GEPA feedback and the ``ask`` transcript read typed records and say what they said before.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import dspy
import pytest

import teammed.evals
from teammed.cli import main
from teammed.deliberation import Deliberation, LeaderOverride, TieBreak
from teammed.evals import build_report, summarize
from teammed.evals._rows import deliberation, peer_record, team_record, typed
from teammed.evals._runs import load_run
from teammed.optimizers._diagnosis import diagnose
from teammed.optimizers.metrics import deliberation_feedback
from teammed.records import PeerRecord, ResultRow, read_record
from teammed.render import render_transcript
from teammed.results import MdagentsRecord
from teammed.runner import read_results
from tests.helpers import read_rows
from tests.typed_fixtures import a_challenge, a_deliberation, a_row

ROOT = Path(__file__).resolve().parent.parent
SCRIPTED = ["--model", "scripted", "--n", "4", "--seed", "1"]

# --- no dict probing -----------------------------------------------------------------------------

CONSUMERS = [*sorted((ROOT / "evals").glob("*.py")), ROOT / "src" / "teammed" / "render.py",
             ROOT / "optimizers" / "_diagnosis.py"]
# what a row, a record or an event's payload is called
_NAMES = r"(?:row|rows|r|rec|record|entry|ch|challenge|tie|review|stage|agent|event|data|payload)"
PROBE = re.compile(rf"\b{_NAMES}\.get\(|\b{_NAMES}\[[\"']|\bitems\(\s*(?:row|record|rec)\b|\brecord\(row\)")


@pytest.mark.parametrize("probing", [
    'row.get("prediction")', "record.get('r2') or []", 'rec["votes_by_turn"]', "agent.get('role')",
    'items(record(row), "agents")', 'str(row["gold"])', 'tie.get("resolved_by")', 'ch["choice_before"]',
    "data.get('severity')", 'data["trust_before"]',
])
def test_the_probe_pattern_catches_dict_probing(probing: str) -> None:
    assert PROBE.search(probing)


def test_consumers_do_not_probe_row_or_record_dicts() -> None:
    offenders = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
                 for path in CONSUMERS
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                 if PROBE.search(line)]
    assert offenders == []


# --- runs written by today's runner ---------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    commands = {
        "all": ["--preset", "all", "--n-agents", "3"],
        "leadership": ["--preset", "leadership", "--n-agents", "2"],
        "kamac": ["--system", "kamac"],
        "consultation": ["--system", "consultation"],
        "mdagents": ["--system", "mdagents"],
        "zero_shot": ["--system", "zero_shot"],
    }
    out = {}
    for name, flags in commands.items():
        out[name] = root / name
        assert main(["run", "--dataset", "demo", *flags, *SCRIPTED, "--out", str(out[name])]) == 0
    return out


def _hand_rows() -> list[ResultRow]:
    """Teamwork rows with ties, challenges, an override and trust; a peer row; an unlabeled row."""
    tie = TieBreak(tied=["A", "B"], resolved_by="leader", answer="A", reason="x")
    override = LeaderOverride(original="B", answer="A", flaw="misread", overridden=True)
    return [
        a_row(a_deliberation(r2=["A", "B", "B"], final=["A", "A", "B"], tie=tie, override=override,
                             challenges=[a_challenge("agent_3", "B", "A", verdict="strong")], facts=["f1"],
                             trust={"agent_1": 0.9, "agent_2": 0.6, "agent_3": 0.5},
                             trust_history=[("initial", {"agent_1": 0.8, "agent_2": 0.8, "agent_3": 0.8})]),
              schema_version=2, gold="B", prediction="A", correct=False, confidence="High", calls=9,
              prompt_tokens=900, completion_tokens=90, roles=["Expert 1", "Expert 2", "Expert 3"], n_agents=3,
              trust={"agent_1": 0.9, "agent_2": 0.6, "agent_3": 0.5}),
        a_row(a_deliberation(r2=["C", "C"], early=True), schema_version=2, gold="C", prediction="C", correct=True,
              confidence="Medium", calls=4),
        a_row({"route": "advanced", "experts": ["X", "Y"], "agents": [{"id": "a1", "role": "X"}],
               "votes_by_turn": {"a1": ["A", "D"]}, "r2": [{"agent": "a1", "first": "A"}],
               "final": [{"agent": "a1", "first": "D"}], "rounds": 2, "reassignments": 1},
              schema_version=2, system="mdagents", gold="D", prediction="D", correct=True, confidence="Low", calls=3),
        a_row(None, schema_version=2, gold=None, labeled=False, prediction="B", correct=None, calls=1),
    ]


def test_summarize_reads_typed_rows_as_it_read_their_stored_form(runs: dict[str, Path]) -> None:
    written = [row for path in runs.values() for row in read_rows(load_run(path))]  # every field recorded
    table = written + _hand_rows()  # hand-made rows leave usage counters unrecorded (absent, not zero)
    assert all(isinstance(row, ResultRow) for row in table)
    out = summarize(table)
    assert summarize(written) == summarize([row.model_dump(mode="json") for row in written])
    assert out == summarize([row.model_dump(mode="json", exclude_unset=True) for row in table])
    assert out["teamwork"]["leadership"]["n"] == 4 + 4 + 2  # every deliberation reports its tie (or none)
    assert out["teamwork"]["mutual_monitoring"]["verdicts"]["strong"] >= 1
    assert out["peers"]["routes"]["advanced"] > 0 and out["peers"]["reassignments"] > 0


def test_runs_load_typed_rows_and_records(runs: dict[str, Path]) -> None:
    teamwork, peer = read_rows(load_run(runs["all"])), read_rows(load_run(runs["kamac"]))
    assert all(isinstance(row, ResultRow) for row in teamwork + peer)
    assert all(isinstance(deliberation(row), Deliberation) for row in teamwork)
    assert [deliberation(row) for row in peer] == [None] * len(peer)
    peers = [peer_record(row) for row in peer]
    assert all(isinstance(found, PeerRecord) and found.agents for found in peers)
    assert all(peer_record(row) is None for row in teamwork)


def test_the_runner_hands_metrics_the_typed_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    class Spy(teammed.evals.Summarizer):
        def add(self, row: Any) -> None:
            seen.append(row)
            super().add(row)

    monkeypatch.setattr(teammed.evals, "Summarizer", Spy)
    assert main(["run", "--dataset", "demo", "--preset", "base", "--n-agents", "2", *SCRIPTED,
                 "--out", str(tmp_path / "run")]) == 0
    assert seen and all(isinstance(row, ResultRow) for row in seen)
    written = json.loads((tmp_path / "run" / "summary.json").read_text())["metrics"]
    assert written == summarize([row.model_dump(mode="json") for row in seen])
    # the metrics streamed by equal the metrics of the rows on disk
    assert written == summarize(read_results(tmp_path / "run" / "results.jsonl"))


# --- rows written before schema versions, peer systems, older records --------------------------------


def _legacy(run: Path, out: Path) -> Path:
    """A copy of ``run`` as teammed wrote it before schema versions (rows) and before the record kept
    its answer (record version 1), plus rows whose records are of an older shape or unreadable."""
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    for row in rows:
        for key in ("schema_version", "labeled", "question", "context"):
            row.pop(key, None)
        row["label"] = "legacy"
        for key in ("version", "answer", "turns", "leader_override", "abstained", "invalid_letters", "fallbacks",
                    "fallbacks_by_behaviour"):
            row["record"].pop(key, None)
    older = {**rows[0], "id": "older", "roles": [], "record": {"agents": [{"id": "a1", "role": "Internist"}],
                                                   "r2": [{"agent": "a1", "first": "A"}],
                                                   "votes_by_turn": {"a1": ["A", "B"]}, "smm": {"x": 1}}}
    unreadable = {**rows[0], "id": "unreadable", "record": {"agents": "everyone", "r2": 3}}
    out.mkdir()
    lines = [*rows, older, unreadable]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return out


def test_legacy_rows_peer_rows_and_older_records_go_through_the_report(runs: dict[str, Path],
                                                                       tmp_path: Path) -> None:
    legacy = _legacy(runs["leadership"], tmp_path / "legacy")
    loaded = read_rows(load_run(legacy))
    assert {row.model_extra.get("legacy_schema_version") for row in loaded if row.model_extra} == {1}
    v1 = [row for row in loaded if row.id not in ("older", "unreadable")]
    assert all(isinstance(found := deliberation(row), Deliberation) and found.answer == row.prediction
               for row in v1)  # a record version 1 reads as a Deliberation answering the row's prediction
    older, unreadable = (next(row for row in loaded if row.id == name) for name in ("older", "unreadable"))
    # a teamwork row whose record is not a Deliberation (nor salvageable as one) reads without a record,
    # marked so (schema 3: a row's record is its system's model or None)
    for row in (older, unreadable):
        assert team_record(row) is None and row.model_extra and row.model_extra["legacy_record_unread"] is True

    report = build_report([legacy, runs["leadership"], runs["kamac"], runs["mdagents"], runs["zero_shot"]],
                          tmp_path / "report")
    numbers = json.loads((report.parent / "summary.json").read_text())
    metrics = {g["config"]: g["metrics"] for g in numbers["groups"]}
    # the version-1 rows count as their schema-2 originals do; the unread records add nothing
    assert summarize(v1) == summarize(load_run(runs["leadership"]).rows)
    assert metrics["legacy"]["teamwork"]["leadership"]["n"] == len(v1)
    assert "Internist" not in metrics["legacy"]["teamwork"]["roles_recruited"]
    assert metrics["kamac"]["teamwork"]["roles_recruited"] and "peers" in metrics["mdagents"]
    page = (report.parent / "transcripts.html").read_text(encoding="utf-8")
    assert page.count('<article class="q"') == len(loaded) + 3 * 4 + 4


def test_records_of_a_peer_system_or_an_older_shape_are_read_minimally() -> None:
    stored = {"route": "basic", "experts": ["PCP"], "agents": [{"id": "agent_1", "role": "PCP"}]}
    peer = a_row(stored, system="mdagents")
    assert deliberation(peer) is None
    found = team_record(peer)
    assert isinstance(found, MdagentsRecord) and found.route == "basic" and found.agents[0].role == "PCP"
    unknown = a_row(stored)  # a system without a model: no typed record, the stored one kept as written
    assert team_record(unknown) is None and unknown.custom_record == stored
    assert team_record(a_row({})) is None and team_record(a_row(None)) is None
    stored = a_deliberation(r2=["A", "B"]).model_dump(mode="json")
    assert deliberation(typed({"id": "q", "prediction": "A", "record": stored})) == Deliberation.model_validate(stored)


# --- GEPA feedback ---------------------------------------------------------------------------------

GOLDEN = json.loads((ROOT / "tests" / "data" / "gepa_feedback.json").read_text(encoding="utf-8"))
PREDICTORS = [None, "leader.resolve_tie.predict", "leader.correct.predict", "assessment.assess.predict",
              "monitoring.respond.predict", "discussion.final.predict", "leader.grade.predict",
              "recruitment.recruit.predict"]


def _feedback_cases() -> list[tuple[str, Deliberation, str]]:
    """Deliberations with ties (leader and rule), challenges, the leader's review, early consensus."""
    tie = TieBreak(tied=["A", "B"], resolved_by="leader", answer="A", reason="x")
    rule_tie = TieBreak(tied=["A", "C"], resolved_by="rule", answer="A", reason="rule", leader_pick="Z")
    spoil = LeaderOverride(original="B", answer="A", flaw="misread the ECG", overridden=True)
    fix = LeaderOverride(original="A", answer="B", flaw="", overridden=True)
    upheld = LeaderOverride(original="A", answer="A", flaw="", overridden=False)
    challenges = [a_challenge("agent_1", "B", "A", verdict="weak"), a_challenge("agent_2", "C", "B", verdict="strong",
                                                                               turn=2),
                  a_challenge("agent_3", "C", "C", verdict="disputed", turn=2)]
    return [
        ("tie+challenge+spoil", a_deliberation(r2=["B", "B", "C"], final=["A", "B", "C"], tie=tie,
                                               challenges=challenges, override=spoil, answer="A",
                                               trust={"agent_1": 0.9, "agent_2": 0.4, "agent_3": 0.6}), "A"),
        ("rule tie, fixed", a_deliberation(r2=["A", "C"], final=["B", "C"], tie=rule_tie, override=fix, answer="B"),
         "B"),
        ("upheld wrong", a_deliberation(r2=["A", "A"], override=upheld,
                                        votes={"agent_1": ["A", "B", "A"], "agent_2": ["B", "A"]}), "A"),
        ("early", a_deliberation(r2=["B", "B"], early=True, answer="B"), "B"),
        ("early wrong", a_deliberation(r2=["C", "C"], early=True, answer="C"), "C"),
        ("no r2", a_deliberation(r2=[], final=[], answer="A", scores={"A": 1.0}), "A"),
        ("split", a_deliberation(r2=["A", "B"], final=["C", "C"], answer="C"), "C"),
    ]


def _feedback(record: Any, answer: str | None, gold: str, predictor: str | None) -> str:
    prediction = dspy.Prediction(answer=answer, record=record)
    return deliberation_feedback(dspy.Example(answer=gold), prediction, None, predictor, None).feedback


def test_gepa_feedback_on_typed_deliberations_is_what_the_record_dicts_gave() -> None:
    expected = GOLDEN["feedback"]
    checked = 0
    for name, record, answer in _feedback_cases():
        stored = record.model_dump(mode="json")
        for gold in "ABC":
            for predictor in PREDICTORS:
                want = expected[f"{name}|{gold}|{predictor}"]
                assert _feedback(record, answer, gold, predictor) == want, (name, gold, predictor)
                assert _feedback(stored, answer, gold, predictor) == want, (name, gold, predictor)
                checked += 1
    for gold in "AB":
        assert _feedback(None, "A", gold, None) == expected[f"none|{gold}"]
    assert checked == 7 * 3 * len(PREDICTORS)


def test_gepa_feedback_on_a_peer_systems_record_is_unchanged() -> None:
    for name, stored in GOLDEN["peers"].items():
        for gold in "AB":
            for predictor in PREDICTORS:
                assert _feedback(stored, "B", gold, predictor) == GOLDEN["feedback"][f"peer {name}|{gold}|{predictor}"]


def test_diagnose_takes_the_typed_record() -> None:
    record = a_deliberation(r2=["A", "C"], tie=TieBreak(tied=["A", "B"], resolved_by="leader", answer="A", reason=""))
    assert diagnose(record, answer="A", gold="B", scope="tie") == (
        "the leader broke a tie the wrong way (tied A, B; chose A; gold B)")
    assert diagnose(read_record({"route": None}), answer="A", gold="B", scope="tie") == (
        "the vote was not tied on this question")


# --- the `ask` transcript -----------------------------------------------------------------------------

EVENTS = [
    {"phase": "R2", "turn": None, "agent": "agent_1", "role": "Expert 1", "kind": "assessment", "text": "ECG first",
     "data": {"ranking": ["A", "B"], "confidence": "High"}},
    {"phase": "R3", "turn": 1, "agent": "agent_2", "role": "Expert 2", "kind": "discussion", "text": "CT",
     "data": {"choice": "B"}},
    {"phase": "MM", "turn": 1, "agent": "agent_2", "role": "Expert 2", "kind": "challenge", "text": "why CT?",
     "data": {"severity": "high", "response": "fair", "verdict": "weak", "choice_before": "B", "choice_after": "A",
              "trust_before": 0.8, "trust_after": 0.5}},
    {"phase": "AGG", "turn": None, "agent": None, "role": None, "kind": "vote", "text": "borda: A=2.00, B=1.00",
     "data": {"answer": "A"}},
]
TEAMWORK_TRANSCRIPT = """Team (weights are hidden from the agents):
  agent_1: Expert 1 -  (weight 0.50)
  agent_2: Expert 2 -  (weight 0.50)

== Phase 2 - independent assessment ==
  agent_1 (Expert 1) - assessment: ranking A > B, confidence High
    ECG first

== Phase 3 - discussion ==
  [turn 1] agent_2 (Expert 2) - discussion: favours B
    CT

== Phase 3 - mutual monitoring ==
  [turn 1] agent_2 (Expert 2) - challenge
    Concern (high): why CT?
    Reply: fair
    Verdict: weak; answer B -> A; trust 0.80 -> 0.50

== Phase 4 - decision ==
  team - vote
    borda: A=2.00, B=1.00

== Trust over the deliberation ==
  initial      agent_1=0.80, agent_2=0.80
  mm_turn_1    agent_1=0.90, agent_2=0.50

Vote (borda): A=2.00, B=1.00"""
PEER_TRANSCRIPT = """Team (weights are hidden from the agents):
  agent_1: PCP - primary care (weight 0.00)
  agent_2: Surgeon -  (weight 0.00)

== Phase 2 - independent assessment ==
  agent_1 (Expert 1) - assessment: ranking A > B, confidence High
    ECG first"""


def test_the_ask_transcript_reads_the_typed_record() -> None:
    record = a_deliberation(r2=["A", "B"], final=["A", "A"], trust={"agent_1": 0.9, "agent_2": 0.5},
                            trust_history=[("initial", {"agent_1": 0.8, "agent_2": 0.8}),
                                           ("mm_turn_1", {"agent_1": 0.9, "agent_2": 0.5})],
                            scores={"A": 2.0, "B": 1.0})
    for form in (record, record.model_dump(mode="json")):
        assert render_transcript(dspy.Prediction(record=form, transcript=EVENTS)) == TEAMWORK_TRANSCRIPT
    peer = {"route": "basic", "experts": ["PCP"], "method": "single_agent",
            "agents": [{"id": "agent_1", "role": "PCP", "expertise": "primary care"},
                       {"id": "agent_2", "role": "Surgeon"}]}
    assert render_transcript(dspy.Prediction(record=peer, transcript=EVENTS[:1])) == PEER_TRANSCRIPT
    assert render_transcript(dspy.Prediction(record={}, transcript=[])) == ""


# --- rows and records other tools (or older teammed versions) wrote: review findings -----------

def test_a_row_without_gold_is_unlabeled_whatever_its_schema_version():
    rows = [{"schema_version": 2, "id": "q1", "gold": None, "prediction": "A", "correct": None,
             "confidence": "High"},
            {"schema_version": 2, "id": "q2", "gold": "A", "prediction": "A", "correct": True,
             "labeled": True, "confidence": "High"}]
    summary = summarize(rows)
    assert summary["accuracy"] == 1.0 and summary["n_unlabeled"] == 1


def test_a_usage_counter_a_row_never_recorded_is_absent_not_zero():
    rows = [{"id": "q1", "gold": "A", "prediction": None, "failed": True, "error": "x"},
            {"id": "q2", "gold": "A", "prediction": "A", "correct": True, "calls": 3, "prompt_tokens": 100,
             "completion_tokens": 10, "latency_s": 1.0}]
    efficiency = summarize(rows)["efficiency"]
    assert efficiency["calls"] == 3.0 and efficiency["prompt_tokens"] == 100 and efficiency["total_tokens"] == 110
    assert "cost_usd" not in efficiency and "parse_failure_rate" not in efficiency


def _older_teamwork_record() -> dict[str, Any]:
    record = a_deliberation(early=True, challenges=[a_challenge("agent_1", "A", "B")]).model_dump(mode="json")
    record.pop("answer")
    record.pop("closed_loop")  # a key older versions did not write
    record["legacy_key"] = 1  # and one this version does not know
    record["challenges"] = [*record["challenges"], {"turn": 1, "agent": "agent_1", "choice_after": None}]
    return record


def test_an_older_teamwork_record_still_counts_for_the_teamwork_metrics():
    record = _older_teamwork_record()
    for prediction in ("A", None):  # a failed row keeps its record but has no prediction
        typed_record = read_record(record, answer=prediction)
        assert isinstance(typed_record, Deliberation)
        assert typed_record.early_consensus and typed_record.closed_loop == []
    row = {"id": "q1", "gold": "A", "prediction": "A", "correct": True, "system": "teamwork", "record": record}
    assert summarize([row])["teamwork"]["early_consensus_rate"] == 1.0


def test_one_odd_entry_never_drops_a_peer_record():
    record = {"agents": [{"id": 1, "role": "a"}, {"id": "e2", "role": "b"}, "junk"],
              "final": [{"agent": "e1", "first": "B", "confidence": 0.9}, {"agent": "e2", "first": "B"}],
              "r2": [{"agent": "e1", "first": "A"}, {"agent": "e2", "first": "B"}], "rounds": 1}
    typed_record = read_record(record)
    assert isinstance(typed_record, PeerRecord)
    assert [a.id for a in typed_record.agents] == ["1", "e2"] and typed_record.final[0].confidence == "0.9"
    row = {"id": "q1", "gold": "B", "prediction": "B", "correct": True, "system": "majority_vote", "record": record}
    assert summarize([row])["agreement"]["r2_disagreement_rate"] == 1.0


def test_null_containers_and_numeric_ids_read_as_other_tools_write_them():
    row = typed({"id": 7, "gold": "A", "prediction": "A", "correct": True, "system": "cot", "record": None,
                 "transcript": None})
    assert row.id == "7" and row.record is None and row.transcript == []
    assert summarize([{"id": 7, "gold": "A", "prediction": "A", "correct": True, "record": None}])["accuracy"] == 1.0


def test_an_event_payload_reads_typed_and_an_odd_value_reads_as_absent() -> None:
    from teammed.records import TranscriptEvent

    event = TranscriptEvent.model_validate({
        "kind": "challenge", "agent": "a2", "text": "the ECG was ignored",
        "data": {"severity": "major", "response": "agreed", "verdict": "accepted", "choice_before": "A",
                 "choice_after": "B", "trust_before": 0.8, "trust_after": "high", "ranking": ["B", 3, {}],
                 "confidence": 0.9, "extra": [1, 2]}})
    payload = event.payload
    assert (payload.severity, payload.choice_after, payload.trust_before) == ("major", "B", 0.8)
    assert payload.trust_after is None and payload.ranking == ["B", "3"] and payload.confidence == "0.9"
    assert event.data is not None and event.data["extra"] == [1, 2]  # the stored payload is kept as written
    text = render_transcript(SimpleNamespace(record=None, transcript=[event.model_dump()]))
    assert "Verdict: accepted; answer A -> B" in text and "trust" not in text.split("Verdict")[1]
