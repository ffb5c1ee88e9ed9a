"""How close `--dry-run`'s estimate is to what a real server bills (issue 33, item 4; not a test).

On the ten MedQA-length vignettes of `benchmarks/prefix_cache.py` (stems of at least 750
characters, options of at least 250 in all), against the embedded model (SmolLM2-135M through
llama.cpp's server, the response cache off), one question at a time:

1. the answer lengths: preset ``all`` on the first ``--table-n`` vignettes, every call's completion
   tokens as the server counted them; the mean per behaviour is `teammed.estimate.ANSWER_TOKENS`
   (the mean, not the median: an estimate of a total is a sum of answers, and the model's lengths
   are skewed, many short answers and some that run to ``max_tokens``, so a median under-prices)
   (``--write-table`` writes it into src/teammed/estimate.py);
2. the check, on the vignettes after those: preset ``base`` on ``--base-n`` and preset ``all`` on
   ``--all-n`` of them, the server's billed prompt and completion tokens against
   `teammed.estimate.estimate_program` for the same program and questions (0 requests sent).

    python benchmarks/estimate_accuracy.py [--write-table] [--table-n 1] [--base-n 3] [--all-n 1] [--n-agents 3]

``--table-n 0`` keeps the table in src/teammed/estimate.py (measured on vignette 0, which the check
then leaves out). ``--n-agents`` fixes the team size (default: auto, the model chooses; the
estimate prices auto as a team of 3).

The embedded model answers one request at a time, 10-30 s a call on 2 busy cores: the defaults
take about 25 minutes.

Prints one JSON document: calls, prompt and completion tokens, billed and estimated, and
their ratios per preset.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from prefix_cache import VIGNETTES  # noqa: E402

import teammed.estimate as estimate_module  # noqa: E402
from teammed import usage  # noqa: E402
from teammed.answering import answer  # noqa: E402
from teammed.config import preset as make  # noqa: E402
from teammed.estimate import estimate_program  # noqa: E402
from teammed.experiments import BackendSpec  # noqa: E402
from teammed.experiments._backend import open_backends  # noqa: E402
from teammed.programs.teamwork import TeamworkProgram  # noqa: E402
from teammed.types import Question  # noqa: E402


class Calls:
    """A `teammed.usage` listener: every call's behaviour and billed tokens."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int]] = []
        self.lock = threading.Lock()

    def call_started(self, signature: str) -> None:
        pass

    def call_finished(self, signature: str, *, prompt_tokens: int = 0, completion_tokens: int = 0, **_: Any) -> None:
        with self.lock:
            self.seen.append((signature, prompt_tokens, completion_tokens))


def questions() -> list[Question]:
    return [Question(id=f"v{i}", question=v["question"], options=v["options"], answer_idx=v.get("answer_idx"))
            for i, v in enumerate(VIGNETTES)]


def billed(preset: str, asked: list[Question], lm: Any, n_agents: int | None = None) -> list[tuple[str, int, int]]:
    calls = Calls()
    with usage.listen(calls):
        for question in asked:
            row = answer(TeamworkProgram(make(preset, n_agents=n_agents or "auto")), question, lm).row
            print(f"  {preset} {question.id}: {row.calls} calls, failed={row.failed}", file=sys.stderr)
    return calls.seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-table", action="store_true", help="write the measured lengths into estimate.py")
    parser.add_argument("--table-n", type=int, default=1, help="vignettes the answer lengths are measured on")
    parser.add_argument("--base-n", type=int, default=3, help="vignettes preset base is checked on")
    parser.add_argument("--all-n", type=int, default=1, help="vignettes preset all is checked on")
    parser.add_argument("--n-agents", type=int, default=None, help="a fixed team size (default: auto)")
    args = parser.parse_args(argv)
    asked = questions()
    report: dict[str, Any] = {"model": "local (SmolLM2-135M-Instruct Q4_1, llama.cpp)"}
    with open_backends(BackendSpec(model="local", cache=False), command="run") as deployments:
        lm = deployments[0].lm
        lengths: dict[str, list[int]] = {}
        for signature, _, completion in billed("all", asked[:args.table_n], lm):
            lengths.setdefault(signature, []).append(completion)
        table = ({name: round(statistics.fmean(values)) for name, values in sorted(lengths.items())} if lengths
                 else dict(estimate_module.ANSWER_TOKENS))
        report["answer_tokens"] = table
        report["n_agents"] = args.n_agents or "auto"
        if args.write_table and lengths:
            path = HERE.parent / "src" / "teammed" / "estimate.py"
            text = path.read_text()
            body = "".join(f'    "{name}": {n},\n' for name, n in table.items())
            path.write_text(re.sub(r"ANSWER_TOKENS: dict\[str, int\] = \{.*?\}\n",
                                   "ANSWER_TOKENS: dict[str, int] = {\n" + body + "}\n", text, flags=re.S))
        estimate_module.ANSWER_TOKENS.clear()
        estimate_module.ANSWER_TOKENS.update(table)
        rest = asked[max(1, args.table_n):]
        for preset, part in (("base", rest[:args.base_n]), ("all", rest[:args.all_n])):
            seen = billed(preset, part, lm, args.n_agents)
            guess = estimate_program(lambda p=preset: TeamworkProgram(make(p, n_agents=args.n_agents or "auto")), part,
                                     model="local", max_tokens=512)
            prompt, completion = sum(s[1] for s in seen), sum(s[2] for s in seen)
            report[preset] = {
                "questions": len(part), "billed": {"calls": len(seen), "prompt_tokens": prompt,
                                                   "completion_tokens": completion},
                "estimated": {"calls": guess.calls, "prompt_tokens": guess.prompt_tokens,
                              "completion_tokens": guess.completion_tokens},
                "ratio": {"calls": round(guess.calls / len(seen), 3),
                          "prompt_tokens": round(guess.prompt_tokens / prompt, 3),
                          "completion_tokens": round(guess.completion_tokens / max(1, completion), 3),
                          "tokens": round((guess.prompt_tokens + guess.completion_tokens) / (prompt + completion), 3)},
            }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
