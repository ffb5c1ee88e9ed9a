"""Careless and hostile command lines: each ends in one line naming the value and the fix.

Every case asserts exit code 2 (a user mistake), exactly one line on stderr, no traceback,
and nothing written under the run's --out.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from teammed import cli
from teammed.cli import main
from teammed.cli_args import check_writable_dir, describe_os_error, parse_options
from teammed.errors import ConfigError

RUN = ["run", "--dataset", "demo", "--n", "2", "--model", "scripted"]
ASK = ["ask", "Most likely diagnosis?", "--model", "scripted"]


def _files(tmp: Path) -> None:
    (tmp / "adir").mkdir()
    (tmp / "afile").write_text("x")
    (tmp / "list.json").write_text("[1, 2]")
    (tmp / "notjson.json").write_text("{not json")
    (tmp / "binary.json").write_bytes(b"\x00\x01\xff\xfe")
    (tmp / "empty.json").write_text("")
    (tmp / "cfg_list.json").write_text(json.dumps({"config": []}))
    (tmp / "cfg_unknown.json").write_text(json.dumps({"leadership": True, "trusst": True}))
    (tmp / "cfg_range.json").write_text(json.dumps({"n_turns": 0}))
    (tmp / "cfg_type.json").write_text(json.dumps({"n_turns": "two"}))
    (tmp / "cfg_rule.json").write_text(json.dumps({"mutual_monitoring": True}))
    (tmp / "cfg_null.json").write_text("null")
    program = {"format": "teammed-program/1", "system": "teamwork", "behaviours": [], "state": {}, "meta": {}}
    (tmp / "prog_unknown.json").write_text(json.dumps({**program, "config": {"bogus": 1}}))
    (tmp / "prog_list_cfg.json").write_text(json.dumps({**program, "config": []}))
    (tmp / "prog_other.json").write_text(json.dumps({"format": "something-else/1"}))
    rows = [{"id": "q1", "question": "a?", "options": {"A": "x", "B": "y"}, "answer_idx": "A"},
            {"id": "q1", "question": "b?", "options": {"A": "x", "B": "y"}, "answer_idx": "B"},
            {"id": "q1-2", "question": "c?", "options": {"A": "x", "B": "y"}, "answer_idx": "A"}]
    (tmp / "dup_after_rename.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


TUNE = ["tune", "--dataset", "demo", "--model", "scripted", "--budget", "calls=100", "--out", "{tmp}/tune_out"]

CASES = {
    # --program
    "program missing": [*RUN, "--program", "{tmp}/missing.json"],
    "program not json": [*RUN, "--program", "{tmp}/notjson.json"],
    "program empty file": [*RUN, "--program", "{tmp}/empty.json"],
    "program a directory": [*RUN, "--program", "{tmp}/adir"],
    "program a json list": [*RUN, "--program", "{tmp}/list.json"],
    "program unknown config key": [*RUN, "--program", "{tmp}/prog_unknown.json"],
    "program config a list": [*RUN, "--program", "{tmp}/prog_list_cfg.json"],
    "program other format": [*RUN, "--program", "{tmp}/prog_other.json"],
    "program binary": [*RUN, "--program", "{tmp}/binary.json"],
    # --config
    "config binary": [*RUN, "--config", "{tmp}/binary.json"],
    "config a directory": [*RUN, "--config", "{tmp}/adir"],
    "config missing": [*RUN, "--config", "{tmp}/nope.json"],
    "config: [] ": [*RUN, "--config", "{tmp}/cfg_list.json"],
    "config unknown field": [*RUN, "--config", "{tmp}/cfg_unknown.json"],
    "config out of range": [*RUN, "--config", "{tmp}/cfg_range.json"],
    "config wrong type": [*RUN, "--config", "{tmp}/cfg_type.json"],
    "config breaks a rule": [*RUN, "--config", "{tmp}/cfg_rule.json"],
    "config null": [*RUN, "--config", "{tmp}/cfg_null.json"],
    "config and preset": [*RUN, "--config", "{tmp}/cfg_rule.json", "--preset", "all"],
    # lists
    "seeds empty item": [*RUN, "--seeds", "1,,2"],
    "seeds not numbers": [*RUN, "--seeds", "1,two"],
    "seeds repeated": [*RUN, "--seeds", "1,1"],
    "presets empty item": [*RUN, "--presets", "base,,trust"],
    "presets unknown": [*RUN, "--presets", "base,trsut"],
    "presets only commas": [*RUN, "--presets", ",,"],
    "preset unknown": [*RUN, "--preset", "everything"],
    # numbers
    "retry attempts 0": [*RUN, "--retry-attempts", "0"],
    "concurrency 0": [*RUN, "--concurrency", "0"],
    "concurrency negative": [*RUN, "--concurrency", "-2"],
    "concurrency a word": [*RUN, "--concurrency", "many"],
    "timeout negative": [*RUN, "--timeout", "-1"],
    "timeout nan": [*RUN, "--timeout", "nan"],
    "max tokens 0": [*RUN, "--max-tokens", "0"],
    "retry base negative": [*RUN, "--retry-base", "-5"],
    "n 0": [*RUN, "--n", "0"],
    "n negative": [*RUN, "--n", "-3"],
    "n-turns 0": [*RUN, "--n-turns", "0"],
    "n-turns 9": [*RUN, "--n-turns", "9"],
    "n-agents 7": [*RUN, "--n-agents", "7"],
    "early consensus 2": [*RUN, "--early-consensus", "2"],
    "early consensus word": [*RUN, "--early-consensus", "most"],
    # models and systems
    "model scripted:abc": ["run", "--dataset", "demo", "--n", "2", "--model", "scripted:abc"],
    "model scripted negative": ["run", "--dataset", "demo", "--n", "2", "--model", "scripted:-1"],
    "model empty": ["run", "--dataset", "demo", "--n", "2", "--model", ""],
    "model local missing gguf": ["run", "--dataset", "demo", "--n", "2", "--model", "local:{tmp}/none.gguf"],
    "system unknown": [*RUN, "--system", "foo"],
    "system typo": [*RUN, "--system", "zero-shoot"],
    "teamwork flag on a peer": [*RUN, "--system", "cot", "--preset", "all"],
    "components unknown": [*RUN, "--components", "smm,telepathy"],
    "components rule": [*RUN, "--components", "mm"],
    # data
    "dataset unknown": ["run", "--dataset", "dmeo", "--model", "scripted"],
    "dataset missing file": ["run", "--dataset", "{tmp}/none.jsonl", "--model", "scripted"],
    "duplicate ids after renaming": ["run", "--dataset", "{tmp}/dup_after_rename.jsonl", "--model", "scripted"],
    # output
    "out under a file": [*RUN, "--out", "{tmp}/afile/run"],
    "resume without out": [*RUN, "--resume"],
    # ask
    "ask one option": [*ASK, "--option", "A=aspirin"],
    "ask no options": [*ASK],
    "ask not lettered from A": [*ASK, "--option", "A=x", "--option", "C=y"],
    "ask letters out of order": [*ASK, "--option", "B=x", "--option", "C=y"],
    "ask option without =": [*ASK, "--option", "aspirin", "--option", "B=y"],
    "ask option twice": [*ASK, "--option", "A=x", "--option", "A=y"],
    "ask option empty text": [*ASK, "--option", "A=", "--option", "B=y"],
    "ask empty question": ["ask", "  ", "--model", "scripted", "--option", "A=x", "--option", "B=y"],
    # report
    "report no runs": ["report", "{tmp}/adir"],
    "report not a directory": ["report", "{tmp}/afile"],
    "report corrupt summary": ["report", "{tmp}/corrupt_run"],
    "report unknown baseline": ["report", "{tmp}/good_run", "--baseline", "nobody", "--out", "{tmp}/report"],
    # compile / search
    "compile train 0": ["compile", "--dataset", "demo", "--optimizer", "labeled", "--train", "0", "--out", "{tmp}/p"],
    "compile unknown optimizer": ["compile", "--dataset", "demo", "--optimizer", "sgd", "--out", "{tmp}/p"],
    "search trials 0": ["search", "--dataset", "demo", "--trials", "0"],
    "search batch -1": ["search", "--dataset", "demo", "--batch-size", "-1"],
    # more of our own
    "preset and presets": [*RUN, "--preset", "base", "--presets", "all"],
    "components only commas": [*RUN, "--components", ","],
    "api base not a url": [*RUN, "--api-base", "notaurl"],
    "cache dir under a file": [*RUN, "--cache-dir", "{tmp}/afile/cache"],
    "data dir a file": [*RUN, "--data-dir", "{tmp}/afile"],
    "split unknown": [*RUN, "--split", "nosuchsplit"],
    "stratify unknown": [*RUN, "--stratify", "nosuchfield"],
    "dataset a directory": ["run", "--dataset", "{tmp}/adir", "--model", "scripted"],
    "dataset binary": ["run", "--dataset", "{tmp}/binary.json", "--model", "scripted"],
    "seed not a number": [*RUN, "--seed", "abc"],
    "report out under a file": ["report", "{tmp}/good_run", "--out", "{tmp}/afile/rep"],
    "compile out a directory": ["compile", "--dataset", "demo", "--optimizer", "labeled", "--model", "scripted",
                                "--train", "2", "--val", "1", "--test", "1", "--out", "{tmp}/adir"],
    "compile bad config": ["compile", "--dataset", "demo", "--optimizer", "labeled", "--model", "scripted",
                           "--components", "mm", "--out", "{tmp}/p.json"],
    "search storage garbage": ["search", "--dataset", "demo", "--model", "scripted", "--storage", "foo"],
    "search sqlite under a file": ["search", "--dataset", "demo", "--model", "scripted", "--storage",
                                   "sqlite:///{tmp}/afile/x.db"],
    "search out under a file": ["search", "--dataset", "demo", "--model", "scripted", "--out", "{tmp}/afile/s"],
    "ask program missing": [*ASK, "--option", "A=x", "--option", "B=y", "--program", "{tmp}/missing.json"],
    # tune and reproduce: checked before a study or a directory is created
    "tune batch size 0": [*TUNE, "--batch-size", "0"],
    "tune negative batch size": [*TUNE, "--batch-size", "-3"],
    "tune pool size 0": [*TUNE, "--pool-size", "0"],
    "tune stage1 batches 0": [*TUNE, "--stage1-batches", "0"],
    "tune alpha 2": [*TUNE, "--alpha", "2"],
    "tune alpha 0": [*TUNE, "--alpha", "0"],
    "tune budget garbage": ["tune", "--dataset", "demo", "--model", "scripted", "--budget", "lots",
                            "--out", "{tmp}/tune_out"],
    "tune budget negative": ["tune", "--dataset", "demo", "--model", "scripted", "--budget", "calls=-1",
                             "--out", "{tmp}/tune_out"],
    "tune n-tune 0": [*TUNE, "--n-tune", "0"],
    "tune n-eval negative": [*TUNE, "--n-eval", "-1"],
    "reproduce seeds 1,,2": ["reproduce", "001-table1", "--model", "scripted", "--seeds", "1,,2",
                             "--out", "{tmp}/repro_out"],
    "reproduce seeds letters": ["reproduce", "001-table1", "--model", "scripted", "--seeds", "a,b",
                                "--out", "{tmp}/repro_out"],
    "reproduce n 0": ["reproduce", "001-table1", "--model", "scripted", "--n", "0", "--out", "{tmp}/repro_out"],
    "reproduce tune budget garbage": ["reproduce", "001-table1", "--model", "scripted", "--tune-budget", "x",
                                      "--out", "{tmp}/repro_out"],
    "cache dir a file": ["cache", "info", "--cache-dir", "{tmp}/afile"],
    "cache unknown action": ["cache", "bogus"],
    # the command itself
    "no command": [],
    "unknown command": ["runn"],
    "unknown flag": [*RUN, "--concurency", "2"],
}


def _call(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse
        return int(exc.code or 0)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("careless")
    _files(tmp)
    good = tmp / "good_run"
    assert _call([*RUN, "--out", str(good)]) == 0
    corrupt = tmp / "corrupt_run"
    corrupt.mkdir()
    (corrupt / "results.jsonl").write_text((good / "results.jsonl").read_text())
    (corrupt / "summary.json").write_text('{"accuracy": 0.5,')  # torn by a crash
    return tmp


@pytest.mark.parametrize("name", list(CASES))
def test_careless_input_is_one_line_exit_2(name, workspace, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(workspace)) for a in CASES[name]]
    out = tmp_path / "out"
    if argv and argv[0] == "run" and "--out" not in argv and "--resume" not in argv:
        argv += ["--out", str(out)]
    capsys.readouterr()
    code = _call(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (name, code, err)
    assert "Traceback" not in err
    assert len(lines) == 1, (name, err)
    assert "error" in lines[0]
    assert not out.exists(), f"{name}: something was written under --out"
    for made in ("tune_out", "repro_out"):
        assert not (workspace / made).exists(), f"{name}: {made} was created"


def test_messages_name_the_value_and_the_fix(workspace, capsys):
    expectations = {
        "config unknown field": ["trusst", "trust"],
        "config out of range": ["n_turns", "got 0"],
        "config wrong type": ["n_turns", "'two'"],
        "config: [] ": ["config", "list"],
        "seeds empty item": ["1,,2"],
        "presets empty item": ["base,,trust"],
        "system typo": ["zero-shoot", "zero_shot"],
        "concurrency 0": ["--concurrency", "0"],
        "model scripted:abc": ["scripted:abc", "scripted:0.5"],
        "duplicate ids after renaming": ["q1-2", "unique id"],
        "report corrupt summary": ["summary.json", "delete it"],
        "program unknown config key": ["bogus"],
        "ask not lettered from A": ["A, B", "A, C"],
    }
    for name, needles in expectations.items():
        argv = [a.replace("{tmp}", str(workspace)) for a in CASES[name]]
        _call(argv)
        err = capsys.readouterr().err
        for needle in needles:
            assert needle in err, (name, needle, err)


def test_plain_config_json_is_accepted(tmp_path):
    cfg = tmp_path / "team.json"
    cfg.write_text(json.dumps({"leadership": True, "trust": True, "n_turns": 3}))
    out = tmp_path / "run"
    assert main([*RUN, "--config", str(cfg), "--out", str(out)]) == 0
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["config"]["leadership"] and manifest["config"]["trust"] and manifest["config"]["n_turns"] == 3


def test_hyphenated_system_names_mean_the_same_system(tmp_path):
    out = tmp_path / "run"
    assert main([*RUN, "--system", "zero-shot", "--out", str(out)]) == 0
    assert json.loads((out / "run.json").read_text())["system"] == "zero_shot"


def test_unknown_system_is_found_before_anything_is_written(tmp_path, monkeypatch):
    def boom(*a, **k):  # pragma: no cover - must not be reached
        raise AssertionError("the dataset was loaded before the system was checked")

    monkeypatch.setattr("teammed.data.load_dataset", boom)
    assert _call([*RUN, "--system", "nope", "--out", str(tmp_path / "r")]) == 2
    assert not (tmp_path / "r").exists()


def test_a_bad_preset_late_in_the_grid_stops_before_the_first_cell(tmp_path):
    # base and trust are fine; the rule error of the third cell must be found before base runs
    out = tmp_path / "grid"
    assert _call([*RUN, "--presets", "base,trust,mutual_monitoring", "--n-turns", "1", "--out", str(out)]) == 2
    assert not out.exists()


def test_full_disk_is_one_line_exit_1(tmp_path, monkeypatch, capsys):
    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("teammed.runner.run_questions", full)
    assert main([*RUN, "--out", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line]
    assert len(errors) == 1 and "no space left" in errors[0] and "--out" in errors[0] and "Traceback" not in err


def test_read_only_out_is_refused_before_writing(tmp_path, monkeypatch, capsys):
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(tmp_path) else real_access(p, mode))
    assert main([*RUN, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "cannot be written" in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("code", "exit_code"), [(errno.ENOSPC, 1), (errno.EROFS, 2), (errno.EACCES, 2),
                                                 (errno.ENOTDIR, 2), (errno.EIO, 1)])
def test_os_errors_map_to_exit_codes(code, exit_code):
    message, got = describe_os_error(OSError(code, os.strerror(code), "/x/y"))
    assert got == exit_code and "\n" not in message and "/x/y" in message


def test_check_writable_dir_refuses_a_file_parent(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError, match="is a file"):
        check_writable_dir(tmp_path / "f" / "run")
    check_writable_dir(tmp_path / "new" / "deeper")  # creatable: fine, and nothing created
    assert not (tmp_path / "new").exists()


def test_parse_options_orders_and_uppercases():
    assert parse_options(["b=two", "a=one"]) == {"A": "one", "B": "two"}


def test_a_bug_is_one_line_without_v_and_a_traceback_with_v(monkeypatch, capsys):
    def bug(args):
        raise KeyError("oops")

    monkeypatch.setattr(cli, "cmd_report", bug)
    assert main(["report", "x"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "-v" in err and err.count("\n") == 1
    with pytest.raises(KeyError):
        main(["-v", "report", "x"])


def test_version_and_help_for_every_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("teammed ")
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    missing = [f"{name} {action.option_strings or action.dest}"
               for name, sub in subparsers.choices.items() for action in sub._actions
               if not action.help]
    assert not missing, f"flags without help: {missing}"


def test_report_baseline_defaults_to_base(tmp_path, capsys):
    grid = tmp_path / "grid"
    assert main([*RUN, "--presets", "base,trust", "--out", str(grid)]) == 0
    assert main(["report", str(grid), "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "Significance vs `base`" in text


def test_an_unreachable_study_database_is_one_line_exit_1(tmp_path, capsys):
    code = main(["search", "--dataset", "demo", "--model", "scripted", "--n", "2", "--trials", "1",
                 "--storage", "postgresql://nobody:x@127.0.0.1:9/none", "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line]
    assert code == 1 and len(errors) == 1 and "--storage" in errors[0] and "Traceback" not in err


def test_report_without_a_base_run_says_so_and_still_reports(tmp_path, capsys):
    grid = tmp_path / "grid"
    assert main([*RUN, "--presets", "trust,leadership", "--out", str(grid)]) == 0
    capsys.readouterr()
    assert main(["report", str(grid), "--out", str(tmp_path / "report")]) == 0
    assert "no run is labelled 'base'" in capsys.readouterr().err
    assert (tmp_path / "report" / "report.md").is_file()


def _parsers():
    import argparse

    from teammed.cli import build_parser

    root = build_parser()
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def test_every_stated_default_is_the_real_default():
    """Help that says ``(default: X)`` for a flag with a plain default must say that default."""
    import re

    checked = 0
    for command, parser in _parsers().items():
        for action in parser._actions:
            said = re.search(r"default:? ([^);]+)", action.help or "")
            if not said or action.default is None or isinstance(action.default, bool):
                continue
            value = action.default
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            shown = ",".join(map(str, value)) if isinstance(value, list) else str(value)
            assert said.group(1).strip().startswith(shown) or shown in said.group(1), \
                f"teammed {command} {action.option_strings}: help says {said.group(1)!r}, default is {shown!r}"
            checked += 1
    assert checked > 20


@pytest.mark.parametrize("flags", [["search", "--dataset", "demo", "--trials", "1", "--n", "2", "--sampler", "brute"]])
def test_search_writes_where_its_help_says(tmp_path, flags):
    from teammed.data import load_dataset
    from teammed.experiments._data import DatasetChoice  # noqa: F401  (the key's documented shape)
    from teammed.records import dataset_digest

    out = tmp_path / "sets"
    assert main([*flags, "--model", "scripted", "--out", str(out)]) == 0
    key = f"demo-{dataset_digest(load_dataset('demo'))[:8]}"
    assert (out / f"{key}.json").is_file() and (out / f"{key}_study" / "study.db").is_file()
    import optuna

    assert optuna.get_all_study_names(f"sqlite:///{out / f'{key}_study' / 'study.db'}") == [f"teammed-{key}"]


@pytest.mark.parametrize("flags, text", [
    (["--preset", "all"], "--preset configures the teamwork system, not mdagents; drop it or use --system teamwork"),
    (["--preset", "all", "--n-turns", "3"],
     "--preset and --n-turns configure the teamwork system, not mdagents; drop them or use --system teamwork"),
])
def test_teamwork_flags_for_a_peer_system_are_refused_in_a_sentence(capsys, flags, text):
    from teammed.cli import main

    assert main(["run", "--dataset", "demo", "--system", "mdagents", "--model", "scripted", *flags]) == 2
    assert text in capsys.readouterr().err
