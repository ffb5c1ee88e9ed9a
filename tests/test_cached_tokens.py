"""Issue 18, item 3: prompt tokens the provider read from its prompt cache are accounted per call,
row and summary, on both transports and through teammed's own response cache; billable cost
applies the cached-input price; the report shows the cached share. And the benchmark server's
emulated block-level prefix cache (item 4's tooling) counts a repeated prefix, not a changed one."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from teammed.backends.base import cached_prompt_tokens
from teammed.cli import main
from teammed.records import ResultRow, load_row
from tests import schema_fake
from tests.fake_openai import FakeOpenAI, completion
from tests.helpers import fake_server_module

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- reading a response's usage
@pytest.mark.parametrize(("usage", "expected"), [
    ({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 64}}, 64),  # OpenAI, vLLM, llama.cpp
    ({"prompt_tokens": 100, "cache_read_input_tokens": 80}, 80),  # Anthropic's own name
    ({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 64}, "cache_read_input_tokens": 64}, 64),
    ({"prompt_tokens": 100, "prompt_tokens_details": None}, 0),
    ({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": None}}, 0),
    ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 64}}, 10),  # never more than the prompt
    ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": "many"}}, 0),
    (None, 0),
])
def test_cached_prompt_tokens_are_read_from_either_convention(usage, expected):
    assert cached_prompt_tokens(usage) == expected
    if usage is not None:  # objects (litellm's Usage, the direct client's) read like dicts
        details = usage.get("prompt_tokens_details")
        obj = SimpleNamespace(**{**usage, "prompt_tokens_details": SimpleNamespace(**details)
                                 if isinstance(details, dict) else details})
        assert cached_prompt_tokens(obj) == expected


def test_litellm_and_direct_response_models_carry_cached_tokens():
    import litellm

    from teammed.backends.openai_http import ChatResponse

    body = completion("{}", prompt_tokens=120)
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 96}
    direct = ChatResponse.model_validate(body)
    via_litellm = litellm.ModelResponse(**body)
    assert cached_prompt_tokens(direct.usage) == cached_prompt_tokens(via_litellm.usage) == 96
    # what the response cache stores and replays
    assert cached_prompt_tokens(ChatResponse.model_validate(direct.model_dump()).usage) == 96
    assert cached_prompt_tokens(litellm.ModelResponse(**via_litellm.model_dump()).usage) == 96


def test_billable_cost_applies_the_cached_input_price():
    import litellm

    from teammed.backends.litellm_backend import LiteLLMBackend

    prices = litellm.model_cost["gpt-4o"]
    assert prices["cache_read_input_token_cost"] < prices["input_cost_per_token"]
    lm = LiteLLMBackend("gpt-4o", api_key="sk-test")

    def cost(cached: int) -> float:
        body = completion("{}", prompt_tokens=1000, completion_tokens=10)
        body["model"] = "gpt-4o"
        body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
        return lm._cost(litellm.ModelResponse(**body))

    expected = (200 * prices["input_cost_per_token"] + 800 * prices["cache_read_input_token_cost"]
                + 10 * prices["output_cost_per_token"])
    assert cost(800) == pytest.approx(expected)
    assert cost(0) == pytest.approx(1000 * prices["input_cost_per_token"] + 10 * prices["output_cost_per_token"])


# ---------------------------------------------------------------- runs: rows and summary
class _CachingServer:
    """Answers every behaviour from its schema and reports a varying number of cached prompt tokens."""

    def __init__(self) -> None:
        self.reported: list[tuple[int, int]] = []  # (prompt, cached) per answered request
        self._lock = threading.Lock()

    def __call__(self, n: int, request: dict[str, Any]):
        prompt = 200 + n
        cached = (37 * n) % 180
        body = completion(schema_fake.respond(request), prompt_tokens=prompt, completion_tokens=10)
        body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
        with self._lock:
            self.reported.append((prompt, cached))
        return 200, {}, body


def _data(path: Path, n: int = 2) -> Path:
    rows = [{"id": f"c{i}", "question": f"A patient with finding {i}. Key: B. Which is next?",
             "options": {"A": "Observe", "B": "Treat", "C": "Refer"}, "answer_idx": "B"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(out: Path, server: FakeOpenAI, data: Path, transport: str, *cache: str) -> tuple[list[dict], dict]:
    args = ["run", "--dataset", str(data), "--split", "all", "--preset", "base", "--n-agents", "2",
            "--n-turns", "2", "--model", "openai/fake", "--api-base", server.api_base, "--retry-attempts", "2",
            "--concurrency", "2", "--out", str(out), *(["--transport", "litellm"] if transport == "litellm" else []),
            *(cache or ("--no-cache",))]
    assert main(args) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    return rows, json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_rows_and_summary_record_the_cached_tokens_the_server_reported(tmp_path, monkeypatch, transport):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    handler = _CachingServer()
    with FakeOpenAI(handler) as server:
        rows, summary = _run(tmp_path / "run", server, _data(tmp_path / "q.jsonl"), transport)
    assert not any(r["failed"] for r in rows)
    prompt, cached = (sum(x) for x in zip(*handler.reported, strict=True))
    assert 0 < cached < prompt
    assert sum(r["calls"] for r in rows) == len(handler.reported)
    assert sum(r["cached_prompt_tokens"] for r in rows) == cached
    assert sum(r["prompt_tokens"] for r in rows) == prompt
    assert all(0 < r["cached_prompt_tokens"] <= r["prompt_tokens"] for r in rows)
    assert summary["cached_prompt_tokens"] == cached
    assert summary["cached_prompt_tokens_per_question"] == pytest.approx(cached / len(rows), abs=1e-4)
    assert summary["cached_prompt_share"] == pytest.approx(cached / prompt, abs=1e-4)
    assert all(load_row(r).cached_prompt_tokens == r["cached_prompt_tokens"] for r in rows)


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_a_response_cache_replay_reports_the_same_cached_tokens(tmp_path, monkeypatch, transport):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    handler = _CachingServer()
    data = _data(tmp_path / "q.jsonl")
    cache = ("--cache-dir", str(tmp_path / "cache"))
    with FakeOpenAI(handler) as server:
        first, first_summary = _run(tmp_path / "first", server, data, transport, *cache)
        sent = len(server.requests)
        second, second_summary = _run(tmp_path / "second", server, data, transport, *cache)
        assert len(server.requests) == sent  # every call answered by teammed's response cache
    assert second_summary["cache_hits"] == second_summary["calls"] > 0
    by_id = {r["id"]: r for r in first}
    for row in second:
        assert row["cached_prompt_tokens"] == by_id[row["id"]]["cached_prompt_tokens"] > 0
        assert row["prompt_tokens"] == by_id[row["id"]]["prompt_tokens"]
        assert row["spent_prompt_tokens"] == 0
    for key in ("cached_prompt_tokens", "cached_prompt_tokens_per_question", "cached_prompt_share"):
        assert second_summary[key] == first_summary[key]


def test_rows_written_before_cached_tokens_load_and_leave_the_share_out():
    from teammed.evals._tables import efficiency_table
    from teammed.evals.metrics import efficiency

    old = load_row({"id": "1", "calls": 3, "prompt_tokens": 900, "completion_tokens": 30, "cost_usd": 0.01})
    assert old.cached_prompt_tokens == 0
    assert "cached_prompt_share" not in efficiency([old])
    table = efficiency_table([{"config": "c", "dataset": "d", "metrics": {"efficiency": efficiency([old])}}])
    assert "Cached %" not in table
    new = ResultRow(id="2", calls=3, prompt_tokens=1000, cached_prompt_tokens=600, completion_tokens=30,
                    cost_usd=0.01)
    stats = efficiency([old, new])
    assert stats["cached_prompt_share"] == pytest.approx(0.6)  # over the rows that record it
    table = efficiency_table([{"config": "c", "dataset": "d", "metrics": {"efficiency": stats}}])
    header = table.splitlines()[0]
    assert "Prompt tok | Cached % | Cost (USD)" in header  # side by side
    assert "| 60.0 |" in table.splitlines()[2]


# ---------------------------------------------------------------- the benchmark server's prefix cache
def test_block_hashes_chain_whole_blocks():
    fake = fake_server_module()
    tokens = list(range(40))
    hashes = fake.block_hashes(tokens)
    assert len(hashes) == 2  # the partial third block has no hash
    changed = fake.block_hashes([999, *tokens[1:]])
    assert changed[0] != hashes[0] and changed[1] != hashes[1]  # a block's hash covers its whole prefix
    assert fake.block_hashes(tokens[:32]) == hashes


def test_prefix_cache_counts_a_repeated_prefix_and_not_a_changed_one():
    fake = fake_server_module()
    cache = fake.PrefixCache()
    tokens = list(range(100))
    assert cache.lookup_and_store(tokens) == 0  # nothing seen yet
    assert cache.lookup_and_store(tokens) == 96  # 6 whole blocks; the 4-token tail is never a block
    assert cache.lookup_and_store([*tokens[:40], 7777, *tokens[41:]]) == 32  # blocks before the change
    assert cache.lookup_and_store([123456, *tokens[1:]]) == 0  # changed first token: no block is a prefix
    assert cache.lookup_and_store(tokens[:64]) == 48  # the last token is always computed, as in vLLM
    assert cache.lookup_and_store([*tokens, 5, 6, 7, 8]) == 96


def test_prefix_cache_forgets_the_least_recently_used_blocks():
    fake = fake_server_module()
    cache = fake.PrefixCache(capacity_blocks=2)
    a, b = list(range(33)), list(range(1000, 1033))
    cache.lookup_and_store(a)
    assert cache.lookup_and_store(a) == 32
    cache.lookup_and_store(b)  # two new blocks push a's out
    assert len(cache) == 2
    assert cache.lookup_and_store(a) == 0


def test_server_reports_and_logs_cached_tokens_of_a_shared_message_prefix(tmp_path):
    fake = fake_server_module()
    preamble = {"role": "system", "content": "You are a member of a clinical team. " * 20}
    case = "A 58-year-old man has crushing chest pain radiating to the jaw and ST elevations in II, III, aVF. " * 3

    def request(instruction: str, opening: dict[str, Any] = preamble) -> bytes:
        return json.dumps({"model": "fake", "messages": [opening, {"role": "user", "content": case + instruction}]
                           }).encode()

    with fake.FakeServer(log_path=tmp_path / "log.jsonl", prefix_cache=True, log_prompts=True) as server:
        first, _ = server.answer(json.loads(request("Rank the options.")), request("Rank the options."))
        body = request("Name the weakest reasoning.")
        second, record = server.answer(json.loads(body), body)
        other = {"role": "system", "content": "You lead a clinical team. " * 30}
        body = request("Rank the options.", other)
        third, _ = server.answer(json.loads(body), body)
    shared = len(fake.prompt_token_ids([preamble, {"role": "user", "content": case}])) - 4  # up to the case's end
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached % 16 == 0 and shared - 32 < cached <= shared  # whole blocks of the shared prefix
    assert record["cached_tokens"] == cached and case in record["prompt"]
    assert third["usage"]["prompt_tokens_details"]["cached_tokens"] == 0  # another preamble: no shared prefix
    for reply in (first, second, third):
        usage = reply["usage"]
        assert usage["prompt_tokens_details"]["cached_tokens"] <= usage["prompt_tokens"]


def test_prompt_token_ids_are_as_many_as_the_server_counts():
    fake = fake_server_module()
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there", "name": "x"},
                {"role": "user", "content": [{"type": "text", "text": "Part one."}, {"type": "image_url"}]}]
    assert len(fake.prompt_token_ids(messages)) == fake.count_prompt_tokens(messages)
