"""--teacher-model and --reflection-model take the main model's backend options and shutdown:
their requests reach --api-base (never a public endpoint), use the retry flags, and stop on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from teammed.cli import main
from tests.fake_openai import FakeOpenAI
from tests.schema_fake import respond


class _Server:
    """Answers from the schema; the first request of ``flaky`` models gets a 500 (to be retried)."""

    def __init__(self, flaky: str = "", hang: str = ""):
        self.models: list[str] = []
        self.flaky, self.hang = flaky, hang
        self.failed_once = False
        self.lock = threading.Lock()

    def __call__(self, n: int, request: dict):
        model = request.get("model", "")
        with self.lock:
            self.models.append(model)
            fail = model == self.flaky and not self.failed_once
            self.failed_once = self.failed_once or fail
        if fail:
            return 500, {}, {"error": {"message": "overloaded", "type": "server_error"}}
        if model == self.hang:
            return 60.0  # hangs: only shutdown can end it
        from tests.fake_openai import completion

        return 200, {}, completion(respond(request))


def _compile(server: FakeOpenAI, tmp_path, *extra: str) -> list[str]:
    return ["compile", "--dataset", "demo", "--train", "2", "--val", "1", "--test", "1", "--system", "cot",
            "--model", "openai/student", "--api-base", server.api_base, "--no-cache", "--retry-attempts", "3",
            "--retry-base", "0.05", "--retry-cap", "0.1", "--out", str(tmp_path / "p.json"), *extra]


def test_the_teacher_uses_api_base_and_the_retry_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    logic = _Server(flaky="teacher")
    with FakeOpenAI(logic) as server:
        started = time.perf_counter()
        code = main(_compile(server, tmp_path, "--optimizer", "bootstrap", "--teacher-model", "openai/teacher"))
        took = time.perf_counter() - started
    assert code == 0
    assert "teacher" in logic.models and "student" in logic.models  # both reached the fake server
    assert logic.failed_once  # the teacher's 500 was retried with --retry-base 0.05, not the default 2 s
    assert took < 30


def test_the_reflection_model_uses_api_base(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    logic = _Server()
    with FakeOpenAI(logic) as server:
        code = main(_compile(server, tmp_path, "--optimizer", "gepa", "--reflection-model", "openai/reflect"))
    assert code == 0, logic.models
    assert set(logic.models) == {"student", "reflect"}, set(logic.models)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_hung_teacher_call_ends_compile_promptly(tmp_path, sig):
    logic = _Server(hang="teacher")
    env = {**os.environ, "OPENAI_API_KEY": "sk-fake", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with FakeOpenAI(logic) as server:
        process = subprocess.Popen([sys.executable, "-m", "teammed.cli",
                                    *_compile(server, tmp_path, "--optimizer", "bootstrap",
                                              "--teacher-model", "openai/teacher")],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.time() + 90
        while time.time() < deadline and "teacher" not in logic.models:
            time.sleep(0.1)
        assert "teacher" in logic.models, "the teacher was never called"
        time.sleep(0.5)
        sent = time.perf_counter()
        process.send_signal(sig)
        _, err = process.communicate(timeout=30)
        took = time.perf_counter() - sent
    assert took < 5, f"took {took:.1f}s to stop"
    assert process.returncode != 0 and "Traceback" not in err
    assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_hung_search_ends_it_promptly_and_the_study_resumes(tmp_path, sig):
    import optuna

    logic = _Server(hang="student")
    env = {**os.environ, "OPENAI_API_KEY": "sk-fake", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = tmp_path / "sets"
    with FakeOpenAI(logic) as server:
        process = subprocess.Popen([sys.executable, "-m", "teammed.cli", "search", "--dataset", "demo", "--n", "2",
                                    "--trials", "2", "--sampler", "brute", "--model", "openai/student",
                                    "--api-base", server.api_base, "--no-cache", "--out", str(out)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.time() + 90
        while time.time() < deadline and not logic.models:
            time.sleep(0.1)
        assert logic.models, "the search never called the model"
        time.sleep(0.5)
        sent = time.perf_counter()
        process.send_signal(sig)
        _, err = process.communicate(timeout=30)
        took = time.perf_counter() - sent
    assert took < 5, f"took {took:.1f}s to stop"
    assert process.returncode != 0 and "Traceback" not in err and "cannot schedule new futures" not in err
    assert not list(out.glob("*.json"))  # no Special Set from an interrupted search
    (db,) = out.glob("*_study/study.db")
    storage = f"sqlite:///{db}"
    (name,) = optuna.get_all_study_names(storage)
    assert optuna.load_study(study_name=name, storage=storage)  # the study is there to resume


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_hung_tune_ends_it_promptly(tmp_path, sig):
    logic = _Server(hang="student")
    env = {**os.environ, "OPENAI_API_KEY": "sk-fake", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with FakeOpenAI(logic) as server:
        process = subprocess.Popen([sys.executable, "-m", "teammed.cli", "tune", "--dataset", "demo",
                                    "--budget", "calls=1e5", "--optimizer", "none", "--batch-size", "2",
                                    "--n-eval", "2", "--model", "openai/student", "--api-base", server.api_base,
                                    "--no-cache", "--out", str(tmp_path / "tuned")],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.time() + 90
        while time.time() < deadline and not logic.models:
            time.sleep(0.1)
        assert logic.models, "tune never called the model"
        time.sleep(0.5)
        sent = time.perf_counter()
        process.send_signal(sig)
        _, err = process.communicate(timeout=30)
        took = time.perf_counter() - sent
    assert took < 5, f"took {took:.1f}s to stop"
    assert process.returncode != 0 and "Traceback" not in err, err[-2000:]
