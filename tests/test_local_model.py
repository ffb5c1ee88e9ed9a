"""Real deliberations with the embedded SmolLM2 model over real HTTP and litellm (CI runs these)."""

from __future__ import annotations

import socket

import dspy
import pytest

from teammed import usage
from teammed.adapter import SchemaAdapter
from teammed.backends.litellm_backend import LiteLLMBackend
from teammed.backends.local import LocalServer
from teammed.backends.retry import RetryPolicy
from teammed.config import preset
from teammed.data import load_dataset
from teammed.programs.accounting import expected_calls
from teammed.programs.teamwork import TeamworkProgram
from tests.helpers import still_running

pytestmark = pytest.mark.local_model


@pytest.fixture(scope="module")
def local_lm():
    # one thread: under pytest-xdist another worker holds the other core, and llama.cpp's threads
    # wait on each other at every step when one of them is descheduled
    with LocalServer(n_threads=1) as server:
        yield LiteLLMBackend("openai/local", api_base=server.api_base, structured_output="json_object_schema",
                             retry=RetryPolicy(attempts=2, base_s=1, cap_s=2), max_parallel_requests=1,
                             max_tokens=384, api_key="sk-local-no-key", timeout_s=600)  # a loaded CI box
    port = int(server.api_base.rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as probe:  # stopped: nothing answers on its port any more
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_real_deliberation(local_lm):
    """Every behaviour of the deliberation (``all``, a superset of ``base``'s calls) on the real model."""
    question = load_dataset("demo")[0]
    config = preset("all", n_agents=2)
    with dspy.context(lm=local_lm, adapter=SchemaAdapter()), usage.track() as used:
        out = TeamworkProgram(config)(question=question.question, options=dict(question.options))
    assert out.answer in question.options
    record = out.record
    tie = record.tie is not None and config.leadership
    assert used.calls == expected_calls(config, 2, tie=tie, early_consensus=record.early_consensus)
    assert used.prompt_tokens > 0 and used.completion_tokens > 0
    # The grammar keeps every reply JSON, but the 135M model sometimes rambles inside a string until
    # max_tokens cuts it (about one reply in six with the case-first layout): that reply is counted as
    # a parse failure, never read as an answer. Most replies must still parse.
    assert used.parse_failures <= used.calls // 3, (used.parse_failures, used.calls)


def test_sigterm_stops_the_run_and_its_server(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    command = [sys.executable, "-m", "teammed.cli", "run", "--dataset", "demo", "--n", "2", "--no-cache",
               "--model", "local", "--out", str(tmp_path / "run")]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children: list[str] = []
    deadline = time.time() + 120
    while time.time() < deadline and not children:  # wait for the server to be started
        time.sleep(0.5)
        children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
    assert children, "the local server never started"
    time.sleep(5)
    os.kill(process.pid, signal.SIGTERM)
    process.wait(timeout=60)
    assert still_running(children) == []
