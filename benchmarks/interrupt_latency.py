"""How fast Ctrl-C and SIGTERM end a run waiting on a hung server, two trees side by side (not a test).

Each round starts ``teammed run`` (``--concurrency 4``, team of 3) from each tree against
`benchmarks/fake_server.py` answering after 60 s, waits until the server has received requests,
sends the signal, and times how long the process takes to exit. Rounds alternate the trees.

    python benchmarks/interrupt_latency.py --before /tmp/bench-before [--after .] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fake_server import FakeServer  # noqa: E402
from run import LAUNCH  # noqa: E402


def one(tree: Path, sig: signal.Signals, work: Path) -> float:
    log = work / f"requests-{time.monotonic_ns()}.jsonl"
    with FakeServer(latency_s=60.0, log_path=log) as server:
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "sk-fake-benchmark"}
        proc = subprocess.Popen([sys.executable, "-c", LAUNCH, str(tree), "run", "--dataset", "demo", "--n", "8",
                                 "--n-agents", "3", "--concurrency", "4", "--model", "openai/fake", "--api-base",
                                 server.api_base, "--no-cache", "--out", str(work / f"run-{time.monotonic_ns()}")],
                                env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while server.count < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        started = time.monotonic()
        proc.send_signal(sig)
        proc.wait(timeout=30)
        return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, default=HERE.parent)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for name, tree in (("before", args.before.resolve()), ("after", args.after.resolve())):
                for sig in (signal.SIGINT, signal.SIGTERM):
                    times.setdefault((name, sig.name), []).append(one(tree, sig, work))
    for (name, sig), values in sorted(times.items()):
        print(f"{name:6} {sig:7} median {statistics.median(values):.2f} s, max {max(values):.2f} s "
              f"over {len(values)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
