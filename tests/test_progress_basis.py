"""Every figure names its basis (issue 48, item 2): the progress line's calls and tokens are both billable, as the
summary's are, whether or not the response cache answered."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from teammed.cli import main
from teammed.progress import format_count
from tests.fake_openai import FakeOpenAI, completion


def _answers(n: int, body: dict[str, Any]) -> Any:
    schema = json.dumps(body.get("response_format") or {})
    fields = {"answer": "A", "confidence": "High", "reasoning": "r"}
    return 200, {}, completion(json.dumps({k: v for k, v in fields.items() if f'"{k}"' in schema}),
                               prompt_tokens=700, completion_tokens=50)


def _last_line(err: str) -> str:
    return [line for line in err.splitlines() if " billable calls | " in line][-1]


def test_a_rerun_from_the_cache_shows_the_same_billable_calls_and_tokens(tmp_path: Path, capsys) -> None:
    with FakeOpenAI(_answers) as server:
        args = ["run", "--dataset", "demo", "--n", "3", "--system", "zero_shot", "--model", "openai/fake",
                "--api-base", server.api_base, "--cache-dir", str(tmp_path / "cache")]
        lines = []
        for k in range(2):
            assert main([*args, "--out", str(tmp_path / f"r{k}")]) == 0
            lines.append(_last_line(capsys.readouterr().err))
        assert len(server.requests) == 3  # the rerun came from the cache
    summary = json.loads((tmp_path / "r1" / "summary.json").read_text())
    billable = summary["calls_per_question"] * 3, (summary["prompt_tokens_per_question"]
                                                   + summary["completion_tokens_per_question"]) * 3
    for line in lines:
        calls, tokens = re.search(r"(\d+) billable calls \| ([\d.]+k?) billable tokens", line).groups()  # type: ignore[union-attr]
        assert (int(calls), tokens) == (round(billable[0]), format_count(billable[1])), line
