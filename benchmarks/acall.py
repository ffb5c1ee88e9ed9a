"""Coroutines: concurrent ``acall``s of whole systems from one event loop (not a test; not in CI).

Every LM call goes to `benchmarks/fake_server.py` in its own process (a fixed latency). Figures:

  k concurrent acalls / one acall, wall time    per system, k = 8, the same question (issue 19:
                                                "about the time of one")
  threads started during the acalls             each acall runs on one of teammed's workers
  slot efficiency with S acalls in flight       base team, 2 S questions, as in benchmarks/run.py

    python benchmarks/acall.py [--latency 0.3] [--k 8] [--slots 256]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import dspy  # noqa: E402

from benchmarks.run import Server, slot_busy_s, window_efficiency  # noqa: E402
from teammed.adapter import SchemaAdapter  # noqa: E402
from teammed.backends.litellm_backend import LiteLLMBackend  # noqa: E402
from teammed.config import preset  # noqa: E402
from teammed.programs import TeamworkProgram, build_system  # noqa: E402
from teammed.systems import names  # noqa: E402

QUESTIONS = [json.loads(line) for line in (HERE.parent / "data" / "demo.jsonl").read_text().splitlines() if line]


def build(system: str) -> dspy.Module:
    if system.startswith("teamwork:"):
        return TeamworkProgram(preset(system.split(":", 1)[1], n_agents=3, n_turns=2))
    return build_system(system)


async def answer(program: dspy.Module, k: int, *, same: bool = False, gate: int | None = None) -> tuple[float, int]:
    """k concurrent acalls (at most ``gate`` at once); (wall seconds, questions that failed). ``same``
    asks the first question k times (the server answers a request the same way each time, so each
    deliberation takes the same path: k at once against one is like against like); else k distinct ones."""
    limit = asyncio.Semaphore(gate or k)

    async def one(i: int) -> bool:
        q = QUESTIONS[0 if same else i % len(QUESTIONS)]
        async with limit:
            try:
                await program.acall(question=q["question"] if same else f"{q['question']} (#{i})",
                                    options=q["options"])
            except Exception:  # noqa: BLE001 - counted
                return False
        return True

    started = time.monotonic()
    done = await asyncio.gather(*(one(i) for i in range(k)))
    return time.monotonic() - started, done.count(False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--slots", type=int, default=256, help="acalls in flight for the efficiency figure")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="teammed-acall-"))
    print(f"{'system':<16} {'one (s)':>8} {f'{args.k} at once (s)':>15} {'ratio':>6} {'threads':>8}")
    for system in ["teamwork:base", "teamwork:all", *sorted(n for n in names() if n != "teamwork")]:
        with Server(latency_s=args.latency, log=work / f"{system.replace(':', '-')}.jsonl") as server:
            lm = LiteLLMBackend("openai/fake", api_base=server.api_base, api_key="x", temperature=0.0, max_tokens=512)
            program = build(system)
            with dspy.context(lm=lm, adapter=SchemaAdapter()):
                one, failed_one = asyncio.run(answer(program, 1, same=True))
                before = threading.active_count()
                many, failed_many = asyncio.run(answer(program, args.k, same=True))
                threads = threading.active_count() - before
            lm.close()
        note = f"  ({failed_one + failed_many} failed)" if failed_one + failed_many else ""
        print(f"{system:<16} {one:>8.2f} {many:>15.2f} {many / one:>6.2f} {threads:>8}{note}")
    with Server(latency_s=0.5, log=work / "efficiency.jsonl") as server:
        lm = LiteLLMBackend("openai/fake", api_base=server.api_base, api_key="x", max_parallel_requests=args.slots,
                            temperature=0.0, max_tokens=512)
        program = build("teamwork:base")
        cpu = time.process_time()
        with dspy.context(lm=lm, adapter=SchemaAdapter()):
            wall, failed = asyncio.run(answer(program, 2 * args.slots, gate=args.slots))
        cpu = time.process_time() - cpu
        lm.close()
        requests = server.requests()
    phase = max(r["end"] for r in requests) - min(r["start"] for r in requests)
    print(f"\n{args.slots} acalls in flight, 0.5 s server, {2 * args.slots} questions ({failed} failed), "
          f"{len(requests)} calls in {wall:.1f} s:")
    print(f"  question-phase slot efficiency  {slot_busy_s(requests) / (args.slots * phase):.3f}")
    print(f"  steady (middle half)            {window_efficiency(requests, args.slots):.3f}")
    print(f"  process CPU per call            {1000 * cpu / len(requests):.2f} ms (server excluded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
