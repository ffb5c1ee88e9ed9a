"""Issue 22, items 1 and 7: exit statuses that tell the truth, model strings litellm cannot route
refused before any call, and a CLI that composes (plain `--help`, quiet closed pipes, `--json`)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from teammed.cli import main
from teammed.errors import ConfigError

from .fake_openai import FakeOpenAI, completion

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ("ask", "run", "report", "compile", "search", "tune", "reproduce", "cache")
FAST = ["--no-cache", "--retry-attempts", "2", "--retry-base", "0.01", "--retry-cap", "0.02", "--timeout", "5"]


def _dead_port() -> str:
    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _garbage(n: int, body: dict) -> tuple[int, dict, dict]:
    return 200, {}, completion("no idea at all")


def _env() -> dict[str, str]:
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TEAMMED_OFFLINE": "1",
            "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


# ---------------------------------------------------------------- item 1: every question failed
@pytest.mark.parametrize("server", ["dead port", "garbage"])
def test_reproduce_exits_non_zero_when_every_question_failed(tmp_path, monkeypatch, capsys, server):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    out = tmp_path / "rep"
    args = ["reproduce", "001-table1", "--datasets", "demo", "--n", "2", "--seeds", "111", "--rows",
            "Zero-Shot;Leadership", "--out", str(out), "--model", "openai/fake", *FAST]
    if server == "dead port":
        code = main([*args, "--api-base", _dead_port()])
    else:
        with FakeOpenAI(_garbage) as fake:
            code = main([*args, "--api-base", fake.api_base])
    assert code == 1
    assert "all 4 questions of the table failed" in capsys.readouterr().err
    assert (out / "table1.json").is_file()  # the table is still written, with its failed counts


def test_search_compile_and_tune_exit_non_zero_on_a_dead_port(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    backend = ["--model", "openai/fake", "--api-base", _dead_port(), *FAST]
    assert main(["search", "--dataset", "demo", "--n", "2", "--trials", "1", "--sampler", "brute",
                 "--out", str(tmp_path / "s"), *backend]) == 1
    assert not list((tmp_path / "s").glob("*.json"))
    assert main(["compile", "--dataset", "demo", "--optimizer", "bootstrap", "--train", "2", "--val", "1",
                 "--test", "2", "--system", "zero_shot", "--out", str(tmp_path / "p.json"), *backend]) == 1
    assert not (tmp_path / "p.json").exists()
    assert main(["tune", "--dataset", "demo", "--budget", "calls=100000", "--optimizer", "none", "--n-eval", "2",
                 "--batch-size", "2", "--pool-size", "2", "--stage1-batches", "1",
                 "--out", str(tmp_path / "t"), *backend]) == 1


# ---------------------------------------------------------------- item 1: unroutable model strings
def test_a_typod_model_is_refused_before_any_call_with_the_nearest_names(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    out = tmp_path / "run"
    assert main(["run", "--dataset", "demo", "--n", "2", "--model", "gpt-4o-mnii", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "gpt-4o-mnii" in captured.err and "did you mean gpt-4o-mini" in captured.err
    assert "Provider List" not in captured.out + captured.err  # litellm's banner stays quiet
    assert not out.exists()
    assert main(["compile", "--dataset", "demo", "--optimizer", "bootstrap", "--train", "2", "--val", "1",
                 "--test", "2", "--model", "scripted", "--teacher-model", "gpt-4o-mnii",
                 "--out", str(tmp_path / "p.json")]) == 2
    assert "--teacher-model 'gpt-4o-mnii'" in capsys.readouterr().err


@pytest.mark.parametrize(("model", "api_base"), [
    ("gpt-4o-mini", None),  # a bare name litellm knows
    ("anthropic/claude-x", None),  # a provider prefix: the model is the provider's to judge
    ("ollama/x", None),
    ("groq/llama3-8b-8192", None),
    ("hosted_vllm/x", "http://127.0.0.1:8000/v1"),
    ("openai/my-alias", "http://127.0.0.1:8000/v1"),
    ("openai/gpt-4o-mnii", None),  # an explicit provider: OpenAI answers for its own names
])
def test_routable_model_strings_are_accepted(model, api_base):
    from teammed.backends.resolve import check_routable

    check_routable(model, api_base=api_base)


@pytest.mark.parametrize(("model", "api_base", "suggested"), [
    ("gpt-4o-mnii", None, "gpt-4o-mini"),
    ("antropic/claude-3-haiku", None, "anthropic/claude-3-haiku"),
    ("llama3", "http://127.0.0.1:8080/v1", "openai/llama3"),  # a server's alias needs openai/
])
def test_unroutable_model_strings_are_refused_naming_the_nearest(model, api_base, suggested, capsys):
    from teammed.backends.resolve import check_routable

    with pytest.raises(ConfigError, match="litellm cannot route") as refused:
        check_routable(model, api_base=api_base)
    assert suggested in str(refused.value)
    assert capsys.readouterr().out == ""


def test_a_deployments_file_with_an_unroutable_model_is_refused(tmp_path, capsys):
    path = tmp_path / "deployments.yaml"
    path.write_text("model_list:\n  - model_name: team\n    litellm_params: {model: gpt-4o-mnii}\n")
    assert main(["run", "--dataset", "demo", "--n", "1", "--deployments", str(path),
                 "--out", str(tmp_path / "run")]) == 2
    assert "model_list entry 0 model 'gpt-4o-mnii'" in capsys.readouterr().err


# ---------------------------------------------------------------- item 7: --help and closed pipes
def test_help_lists_every_command_in_plain_text(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    description = text.split("positional arguments", 1)[0]
    assert all(name in description for name in COMMANDS), description
    assert "``" not in text


def test_help_piped_into_head_exits_zero_quietly():
    shell = subprocess.run(["bash", "-o", "pipefail", "-c", f"{sys.executable} -m teammed run --help | head -1"],
                           capture_output=True, text=True, env=_env(), timeout=120)
    assert shell.returncode in (0, 141), shell.stderr
    assert shell.stdout.startswith("usage: teammed run") and shell.stderr == ""


def test_output_into_a_closed_pipe_ends_quietly_the_shells_way():
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written: every write to stdout fails
    try:
        done = subprocess.run([sys.executable, "-m", "teammed", "ask", "Which?", "--option", "A=x", "--option",
                               "B=y", "--model", "scripted", "--no-cache"], stdout=write, stderr=subprocess.PIPE,
                              text=True, env=_env(), timeout=120)
    finally:
        os.close(write)
    assert done.returncode in (0, 141), done.stderr
    assert "Errno 32" not in done.stderr and "Broken pipe" not in done.stderr and "error" not in done.stderr


# ---------------------------------------------------------------- item 7: --json, trial k/N and an ETA
SEARCH = ["search", "--dataset", "demo", "--n", "3", "--trials", "2", "--sampler", "brute", "--model", "scripted",
          "--no-cache"]


def test_search_json_is_one_document_on_stdout_and_progress_on_stderr(tmp_path, capsys):
    assert main([*SEARCH, "--out", str(tmp_path / "s"), "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert set(document) >= {"special_set", "dev_accuracy", "trials", "special_set_path", "report"}
    assert Path(document["special_set_path"]).is_file()
    assert "trial 1/2" in captured.err and "trial 2/2" in captured.err and "ETA" in captured.err
    assert "special set:" in captured.err  # the human lines moved to stderr


def test_search_without_json_prints_human_text_only(tmp_path, capsys):
    assert main([*SEARCH, "--out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "special set:" in out and "dev accuracy" in out
    assert "{" not in out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


def test_tune_and_reproduce_json_are_one_document_on_stdout(tmp_path, capsys):
    assert main(["tune", "--dataset", "demo", "--budget", "calls=1e6", "--model", "scripted", "--optimizer", "none",
                 "--n-eval", "2", "--batch-size", "2", "--pool-size", "2", "--stage1-batches", "1", "--no-cache",
                 "--out", str(tmp_path / "t"), "--json"]) == 0
    tuned = json.loads(capsys.readouterr().out)
    assert tuned["status"] == "done" and "winner" in tuned["held_out"] and Path(tuned["special_set_path"]).is_file()
    reproduce = ["reproduce", "001-table1", "--model", "scripted", "--datasets", "demo", "--n", "2", "--seeds", "111",
                 "--rows", "Zero-Shot;Leadership", "--no-cache"]
    assert main([*reproduce, "--out", str(tmp_path / "r"), "--json"]) == 0
    captured = capsys.readouterr()
    table = json.loads(captured.out)
    assert [r["row"] for r in table["rows"]] == ["Zero-Shot", "Leadership"] and "| Zero-Shot |" in captured.err
    assert main([*reproduce, "--out", str(tmp_path / "r2")]) == 0
    out = capsys.readouterr().out
    assert "| Zero-Shot | demo |" in out and not out.lstrip().startswith("{")
