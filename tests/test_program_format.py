"""One program format: DSPy's saved state plus the config, read by ``program.load`` and ``run --program``."""

from __future__ import annotations

import json

import dspy
import pytest

from teammed.adapter import _expand_custom_types
from teammed.cli import main
from teammed.config import TeamworkConfig, preset
from teammed.errors import ConfigError, ProgramMismatchError
from teammed.programs import SYSTEMS, TeamworkProgram, build_system, load_program, save_program

CONFIG = TeamworkConfig(leadership=True, trust=True, n_agents=3)


def _touch(program: dspy.Module, tag: str) -> dspy.Module:
    """Give every predictor a recognisable instruction and demo, as an optimizer would."""
    for name, predictor in program.named_predictors():
        predictor.signature = predictor.signature.with_instructions(f"{tag}: {name}")
        predictor.demos = [dspy.Example(question=f"{tag} demo for {name}", answer="A")]
    return program


def _instructions(program: dspy.Module) -> dict[str, str]:
    return {name: p.signature.instructions for name, p in program.named_predictors()}


def _systems():
    yield "teamwork", lambda: TeamworkProgram(CONFIG)
    for name in SYSTEMS:
        yield name, lambda name=name: build_system(name)


@pytest.mark.parametrize("system, make", list(_systems()), ids=[s for s, _ in _systems()])
def test_every_system_round_trips_both_ways(tmp_path, system, make):
    original = _touch(make(), "compiled")
    teammed_file, dspy_file = tmp_path / "teammed.json", tmp_path / "dspy.json"
    original.save(teammed_file)  # teammed's save: DSPy state + config
    dspy.Module.save(original, dspy_file)  # DSPy's own save, nothing of teammed's

    # teammed-saved file: DSPy's load and teammed's loader
    fresh = make()
    dspy.Module.load(fresh, teammed_file)
    assert _instructions(fresh) == _instructions(original)
    loaded, meta = load_program(teammed_file)
    assert _instructions(loaded) == _instructions(original) and meta["dspy_version"] == dspy.__version__

    # DSPy-saved file: program.load and teammed's loader (system named by the caller)
    fresh = make()
    fresh.load(dspy_file)
    assert _instructions(fresh) == _instructions(original)
    loaded, _ = load_program(dspy_file, system=system, config=CONFIG if system == "teamwork" else None)
    assert _instructions(loaded) == _instructions(original)
    assert loaded.dump_state() == original.dump_state()


def test_peer_settings_are_saved_and_rebuilt(tmp_path):
    original = _touch(build_system("consensus", n_experts=3, max_rounds=1), "x")
    original.save(tmp_path / "p.json")
    loaded, _ = load_program(tmp_path / "p.json")
    assert loaded.config.n_experts == 3 and loaded.config.max_rounds == 1


@pytest.mark.parametrize("saver", ["teammed", "dspy"])
def test_loading_into_another_config_is_a_mismatch_not_a_keyerror(tmp_path, saver):
    path = tmp_path / "p.json"
    program = _touch(TeamworkProgram(preset("all")), "all")
    if saver == "teammed":
        program.save(path)
    else:
        dspy.Module.save(program, path)
    with pytest.raises(ProgramMismatchError) as caught:
        TeamworkProgram(preset("base")).load(path)
    assert "recompile" in str(caught.value)
    with pytest.raises(ProgramMismatchError):
        build_system("cot").load(path)


def test_same_behaviours_other_components_is_a_mismatch(tmp_path):
    # trust without leadership adds no predictor: only the recorded config tells them apart
    TeamworkProgram(preset("base")).save(tmp_path / "base.json")
    with pytest.raises(ProgramMismatchError, match=r"compiled for \[no components\].*\[trust\]"):
        TeamworkProgram(preset("trust")).load(tmp_path / "base.json")


def test_overrides_are_applied_when_the_behaviours_still_fit(tmp_path):
    path = save_program(_touch(TeamworkProgram(CONFIG), "c"), tmp_path / "p.json", meta={"tuning_ids": ["q1"]})
    loaded, meta = load_program(path, overrides={"n_turns": 3, "early_consensus": 0.8, "n_agents": 4})
    assert (loaded.config.n_turns, loaded.config.early_consensus, loaded.config.n_agents) == (3, 0.8, 4)
    assert meta["tuning_ids"] == ["q1"]
    assert loaded.leader.mediate.predict.signature.instructions.startswith("c:")


def test_an_override_that_changes_the_behaviours_is_refused(tmp_path):
    path = tmp_path / "p.json"
    TeamworkProgram(preset("leadership")).save(path)
    with pytest.raises(ProgramMismatchError, match="--n-agents 3 changes which behaviours run"):
        load_program(path, overrides={"n_agents": 3})  # auto -> 3 drops the AgentCount behaviour


def test_an_override_for_a_peer_system_is_refused(tmp_path):
    build_system("cot").save(tmp_path / "cot.json")
    with pytest.raises(ConfigError, match="--n-turns applies to the teamwork program only"):
        load_program(tmp_path / "cot.json", overrides={"n_turns": 3})


@pytest.mark.parametrize("content, fragment", [
    ("[1, 2]", "not a saved program"),
    ("{\"a\": 1}", "not a saved program"),
    ("not json", "not JSON"),
])
def test_files_that_are_not_programs_are_refused(tmp_path, content, fragment):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=fragment):
        load_program(path)
    with pytest.raises(ConfigError, match="is a directory"):
        load_program(tmp_path)


def test_old_format_files_still_load(tmp_path):
    program = _touch(TeamworkProgram(CONFIG), "old")
    old = {"format": "teammed-program/1", "system": "teamwork", "config": CONFIG.model_dump(mode="json"),
           "behaviours": sorted(n for n, _ in program.named_predictors()), "state": program.dump_state(),
           "meta": {"optimizer": "bootstrap"}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    loaded, meta = load_program(tmp_path / "old.json")
    assert _instructions(loaded) == _instructions(program) and meta["optimizer"] == "bootstrap"


# ------------------------------------------------------------------ the command line
def _run(tmp_path, *flags: str) -> tuple[int, list[dict]]:
    out = tmp_path / "run"
    code = main(["run", "--dataset", "demo", "--n", "2", "--model", "scripted", "--out", str(out), *flags])
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()] if code == 0 else []
    return code, rows


def test_run_a_dspy_saved_peer_program(tmp_path):
    program = build_system("cot")
    dspy.Module.save(program, tmp_path / "cot.json")
    code, rows = _run(tmp_path, "--system", "cot", "--program", str(tmp_path / "cot.json"))
    assert code == 0 and len(rows) == 2 and not any(r["failed"] for r in rows)


def test_run_a_teammed_saved_program_with_an_applied_override(tmp_path):
    TeamworkProgram(TeamworkConfig(leadership=True, n_agents=2)).save(tmp_path / "p.json")
    code, rows = _run(tmp_path, "--program", str(tmp_path / "p.json"), "--n-turns", "3")
    assert code == 0
    assert rows[0]["config"]["n_turns"] == 3 and rows[0]["config"]["leadership"] is True
    turns = {e.get("turn") for r in rows for e in r["transcript"] if e.get("kind") == "mediation"}
    assert max(t for t in turns if t is not None) == 3


def test_run_refuses_an_incompatible_override(tmp_path, capsys):
    TeamworkProgram(preset("leadership")).save(tmp_path / "p.json")
    code, _ = _run(tmp_path, "--program", str(tmp_path / "p.json"), "--n-agents", "3")
    assert code == 2
    assert "--n-agents 3 changes which behaviours run" in capsys.readouterr().err


def test_run_refuses_a_program_of_another_system(tmp_path, capsys):
    build_system("cot").save(tmp_path / "cot.json")
    code, _ = _run(tmp_path, "--program", str(tmp_path / "cot.json"))
    assert code == 2
    assert "--system cot" in capsys.readouterr().err


def test_a_program_compiled_without_images_runs_image_questions(tmp_path):
    program = _touch(TeamworkProgram(CONFIG), "text")
    program.save(tmp_path / "p.json")
    loaded, _ = load_program(tmp_path / "p.json", vision=True)
    assert loaded.assessment.assess_image is not None
    assert loaded.assessment.assess.predict.signature.instructions == "text: assessment.assess.predict"
    with pytest.raises(ProgramMismatchError):  # the image behaviour is optional only when asked for
        TeamworkProgram(CONFIG, vision=True).load(tmp_path / "p.json")


@pytest.mark.parametrize("damage", [
    lambda d: d["teammed"].update(config=[1, 2]),
    lambda d: d["teammed"].update(settings="n_experts=3"),
    lambda d: d.update(teammed=[]),
    lambda d: d["teammed"].update(config={"n_turns": 99}),
    lambda d: d[next(k for k in d if k not in ("teammed", "metadata"))].update(demos="not a list"),
])
def test_a_damaged_file_is_one_clear_error(tmp_path, damage):
    path = tmp_path / "p.json"
    TeamworkProgram(CONFIG).save(path)
    document = json.loads(path.read_text())
    damage(document)
    path.write_text(json.dumps(document))
    with pytest.raises(ConfigError):
        load_program(path)
    code = main(["run", "--dataset", "demo", "--n", "1", "--model", "scripted", "--program", str(path),
                 "--out", str(tmp_path / "run")])
    assert code == 2


def _fields_text(adapter, signature, kept):
    """The compact format's inputs (`SchemaAdapter._field_text` per field, as `format` joins them)."""
    text = "\n\n".join(adapter._field_text(signature, k, kept[k]) for k in signature.input_fields if k in kept)
    return _expand_custom_types({"role": "user", "content": text.strip() + "\n"})["content"]


def test_compact_user_text_is_dspys_exactly_for_every_signature():
    """The fast path for plain values (no pydantic TypeAdapter per value) writes DSPy's text, byte for byte."""
    import random

    import teammed.signatures as signatures
    from teammed.adapter import SchemaAdapter, _compact_value, _expand_custom_types

    adapter = SchemaAdapter()
    samples = ["plain text", "", "  padded  ", "line1\nline2", "ünïcode ✓", 3, 0.5, True, None, ["a", "b"], [],
               {"A": "x", "B": "y"}, {"k": [1, 2, {"z": None}]}, ["x"], {"A1": 1}, float("nan")]
    checked = 0
    for name in signatures.__all__:
        signature = getattr(signatures, name)
        if not (isinstance(signature, type) and issubclass(signature, dspy.Signature)):
            continue
        for trial in range(20):
            rnd = random.Random(trial)
            inputs = {k: rnd.choice(samples) for k in signature.input_fields if rnd.random() < 0.9}
            kept = {k: _compact_value(v) for k, v in inputs.items()}
            dspy_text = adapter.format_user_message_content(signature, kept) + "\n"
            expected = _expand_custom_types({"role": "user", "content": dspy_text})["content"]
            assert _fields_text(adapter, signature, kept) == expected, (name, inputs)
            checked += 1
    assert checked > 300


def test_compact_user_defers_to_dspy_for_enums_marked_strings_and_cycles():
    import enum

    from teammed.adapter import SchemaAdapter, _compact_value, _expand_custom_types
    from teammed.signatures import InitialAssessment

    class Letter(str, enum.Enum):  # noqa: UP042 - the str mixin is the case DSPy formats differently
        A = "A"

    adapter = SchemaAdapter()
    looped: list = []
    looped.append(looped)
    for value in (Letter.A, "see <<CUSTOM-TYPE-START-IDENTIFIER>>x<<CUSTOM-TYPE-END-IDENTIFIER>>", looped,
                  {"k": Letter.A}):
        inputs = {"question": value, "options": {"A": "x", "B": "y"}}
        kept = {k: _compact_value(v) for k, v in inputs.items()}
        expected = _expand_custom_types({"role": "user", "content": adapter.format_user_message_content(
            InitialAssessment, kept) + "\n"})["content"]
        assert _fields_text(adapter, InitialAssessment, kept) == expected


def test_cached_annotation_schemas_keep_each_annotations_own_order():
    from typing import Literal

    from teammed.schema import _annotation_schema

    assert _annotation_schema(Literal["B", "A"])["enum"] == ["B", "A"]
    assert _annotation_schema(Literal["A", "B"])["enum"] == ["A", "B"]
