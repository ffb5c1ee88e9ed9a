"""One typed contract (issue 17, item 2): a run's rows load as `teammed.results` models.

For each of the nine systems a scripted run's rows carry the system's record model (never a dict)
and typed transcript events; a row of schema version 2 (a dict record) loads through the legacy
reader with a typed record; a row of a newer schema is refused, naming the upgrade.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teammed.cli import main
from teammed.errors import DataError
from teammed.results import (
    SCHEMA_VERSION,
    AdaptiveRecord,
    ConsensusRecord,
    ConsultationRecord,
    CotRecord,
    Deliberation,
    FewShotRecord,
    KamacRecord,
    MajorityVoteRecord,
    MdagentsRecord,
    PeerRecord,
    ResultRow,
    TranscriptEvent,
    ZeroShotRecord,
    load_rows,
)

SCRIPTED = ["--model", "scripted", "--no-cache", "--n", "2"]

MODELS: dict[str, type] = {
    "teamwork": Deliberation,
    "majority_vote": MajorityVoteRecord,
    "consensus": ConsensusRecord,
    "consultation": ConsultationRecord,
    "mdagents": MdagentsRecord,
    "kamac": KamacRecord,
    "zero_shot": ZeroShotRecord,
    "cot": CotRecord,
    "few_shot": FewShotRecord,
    "adaptive": AdaptiveRecord,
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("contract")
    out = {}
    for system in MODELS:
        out[system] = root / system
        flags = ["--n-agents", "2"] if system == "teamwork" else ["--system", system]
        assert main(["run", "--dataset", "demo", *flags, *SCRIPTED, "--out", str(out[system])]) == 0
    return out


def test_every_system_has_its_model() -> None:
    from teammed.systems import registry

    assert {name: system.record_model() for name, system in registry().items()} == MODELS
    assert SCHEMA_VERSION == 3


@pytest.mark.parametrize("system", list(MODELS))
def test_a_runs_rows_carry_the_systems_typed_record(runs: dict[str, Path], system: str) -> None:
    rows = load_rows(runs[system])
    assert rows and all(isinstance(row, ResultRow) for row in rows)
    for row in rows:
        assert row.schema_version == 3 and not row.failed
        assert type(row.record) is MODELS[system], (system, type(row.record))
        assert row.record.system == system
        assert row.custom_record is None and "legacy_record_unread" not in (row.model_extra or {})
        assert row.transcript and all(isinstance(event, TranscriptEvent) for event in row.transcript)
        assert row.confidence in ("High", "Medium", "Low")
        if system != "teamwork":
            assert isinstance(row.record, PeerRecord)
    stored = [json.loads(line) for line in (runs[system] / "results.jsonl").read_text().splitlines()]
    assert all(isinstance(r["record"], dict) and r["record"]["system"] == system for r in stored)


def _legacy(run: Path, tmp_path: Path) -> Path:
    """The run's rows as schema version 2 wrote them: dict records without a ``system`` tag."""
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    for row in rows:
        row["schema_version"] = 2
        row["record"].pop("system")
        row.pop("custom_record", None)
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return tmp_path


@pytest.mark.parametrize("system", ["teamwork", "kamac", "consultation"])
def test_a_schema_2_row_loads_with_a_typed_record(runs: dict[str, Path], system: str, tmp_path: Path) -> None:
    current = load_rows(runs[system])
    legacy = load_rows(_legacy(runs[system], tmp_path))
    assert [type(row.record) for row in legacy] == [MODELS[system]] * len(current)
    assert [row.record for row in legacy] == [row.record for row in current]  # nothing lost on the way
    assert all(row.model_extra and row.model_extra["legacy_schema_version"] == 2 for row in legacy)


def test_an_unreadable_legacy_record_is_none_not_a_crash(runs: dict[str, Path], tmp_path: Path) -> None:
    row = json.loads((runs["teamwork"] / "results.jsonl").read_text().splitlines()[0])
    row.update(schema_version=2, record={"agents": "everyone", "r2": 3})
    (tmp_path / "results.jsonl").write_text(json.dumps(row) + "\n")
    [loaded] = load_rows(tmp_path)
    assert loaded.record is None and loaded.model_extra and loaded.model_extra["legacy_record_unread"] is True


def test_a_row_of_a_newer_schema_is_refused_naming_the_upgrade(runs: dict[str, Path], tmp_path: Path) -> None:
    row = json.loads((runs["zero_shot"] / "results.jsonl").read_text().splitlines()[0])
    row["schema_version"] = 4
    (tmp_path / "results.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(DataError, match=r"schema_version 4.*upgrade teammed"):
        load_rows(tmp_path)
