"""Every figure of issue 11, before and after, as ratios measured in the same run (not a test; not in CI).

Each source tree runs through the same launcher and the same Python environment, so only
the code differs. "Before" is main at c8a13d9 (``git worktree add /tmp/bench-before c8a13d9``),
"after" is this checkout. Every LM call goes to `benchmarks/fake_server.py` in its own
process: tokens come from the server's log (tiktoken cl100k_base), the chain of sequential
calls from its request timestamps, CPU and peak RSS from the teammed process's rusage.

    python benchmarks/run.py [--before /tmp/bench-before] [--after .] [--quick] [--only cpu,efficiency]

Figures (N=3 agents, T=2 turns, the 20 MedQA-format demo vignettes, cycled for long runs):
  prompt tokens / question, calls / question             base and all, from the server log
  longest chain of sequential calls                      base and all, c=1, fixed latency
  wall per question / (chain x latency)                  all, --concurrency 1, 16 and 64
  framework CPU per LM call                              all, zero latency, (CPU(n2)-CPU(n1))/calls
  one-call run CPU and wall, start to exit               `teammed ask --system zero_shot`
  `teammed --help` wall                                  best of 5
  peak RSS, RSS slope per question, RSS at 1,273         all, zero latency, two run lengths
  slot efficiency with 64 and 256 questions in flight    base, 0.5 s server, vs the request-slot bound

``--only`` picks groups of figures: tokens, chain, cpu, startup, memory, efficiency.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEMO = REPO / "data" / "demo.jsonl"
FAKE_MODEL = "openai/fake"
TEAM = ["--n-agents", "3", "--n-turns", "2"]

# Runs ``teammed`` from a source tree: src/teammed is the package, the tree's root holds its
# subpackages (programs, data, evals, ...), as pyproject's package-dir maps them.
# The tree's console entry point is used when it has one (it may exit faster than main() returns).
LAUNCH = ("import sys; tree = sys.argv.pop(1); sys.path.insert(0, tree + '/src'); import teammed; "
          "teammed.__path__.append(tree); from teammed import cli; entry = getattr(cli, 'console_main', None); "
          "sys.exit(entry() if entry else cli.main(sys.argv[1:]))")


# ---------------------------------------------------------------- processes
@dataclass
class Proc:
    rc: int
    wall_s: float
    cpu_s: float
    maxrss_mib: float
    stdout: str
    stderr: str


def run_teammed(tree: Path, args: list[str], *, cwd: Path, timeout_s: float = 3600) -> Proc:
    """Run ``teammed ARGS`` from ``tree``; wall, CPU (user + system) and peak RSS of that process."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "sk-fake-benchmark",
           "PYTHONDONTWRITEBYTECODE": "1"}
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, str(tree), *args], cwd=cwd, env=env, stdout=out,
                            stderr=err)
    deadline = started + timeout_s
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.01)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    err.seek(0)
    result = Proc(proc.returncode, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
                  out.read().decode(errors="replace"), err.read().decode(errors="replace"))
    if result.rc != 0:
        raise RuntimeError(f"teammed {' '.join(args)} exited {result.rc}:\n{result.stderr[-2000:]}")
    return result


class Server:
    """The fake server in its own process (its CPU is not the framework's)."""

    def __init__(self, *, latency_s: float, log: Path, extra: Sequence[str] = ()):
        """``extra``: more of fake_server.py's flags (``--prefix-cache``, ``--answer-tokens N``, ...)."""
        self.log = log
        self.proc = subprocess.Popen([sys.executable, str(HERE / "fake_server.py"), "--latency", str(latency_s),
                                      "--log", str(log), *extra], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.api_base = self.proc.stdout.readline().strip()
        if not self.api_base.startswith("http"):
            raise RuntimeError("the fake server did not start")

    def requests(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def emit(document: Any, out: Path | None) -> None:
    """Print a benchmark's JSON document, and write it to ``out`` when given."""
    text = json.dumps(document, indent=2)
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")


# ---------------------------------------------------------------- figures from logs
def longest_chain(requests: list[dict[str, Any]], slack: float = 0.0) -> int:
    """Longest sequence of requests each starting after the previous one ended (``slack`` seconds before at most)."""
    ordered = sorted(requests, key=lambda r: r["start"])
    best: list[int] = []
    for i, r in enumerate(ordered):
        best.append(1 + max((best[j] for j in range(i) if ordered[j]["end"] <= r["start"] + slack), default=0))
    return max(best, default=0)


def slot_busy_s(requests: list[dict[str, Any]]) -> float:
    return sum(r["end"] - r["start"] for r in requests)


def write_questions(path: Path, n: int, *, start: int = 0, eval_only: bool = False) -> Path:
    """``n`` MedQA-format questions: the demo vignettes, cycled under distinct ids.

    ``eval_only`` writes only ids of the evaluation part (`teammed.data.splits`), so that
    ``teammed run --n n`` runs all ``n``: a file of ``n`` ids holds about 0.7 n of them."""
    rows = [json.loads(line) for line in DEMO.read_text().splitlines() if line.strip()]
    written, i = 0, start
    with path.open("w") as sink:
        while written < n:
            qid = f"bench-{i:05d}"
            if not eval_only or _eval_part(qid):
                row = dict(rows[i % len(rows)])
                row["id"] = qid
                sink.write(json.dumps(row) + "\n")
                written += 1
            i += 1
    return path


def _eval_part(question_id: str) -> bool:
    """`teammed.data.splits.part_of` (0.3 of ids are for tuning), restated: the tree measured may be old."""
    digest = hashlib.sha256(f"teammed-split:{question_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 >= 0.3


def window_efficiency(requests: list[dict[str, Any]], slots: int, *, share: float = 0.5) -> float:
    """Slot efficiency over the middle ``share`` of the question phase: the slots are all wanted
    there (the ramp-up and the last questions, when fewer are left than slots, are outside it)."""
    first, last = min(r["start"] for r in requests), max(r["end"] for r in requests)
    lo = first + (last - first) * (1 - share) / 2
    hi = last - (last - first) * (1 - share) / 2
    busy = sum(max(0.0, min(r["end"], hi) - max(r["start"], lo)) for r in requests)
    return busy / (slots * (hi - lo))


# ---------------------------------------------------------------- one tree
class Tree:
    def __init__(self, name: str, path: Path, work: Path):
        self.name, self.path = name, path
        self.work = work / name
        self.work.mkdir(parents=True, exist_ok=True)
        self._k = 0
        help_text = run_teammed(path, ["run", "--help"], cwd=self.work).stdout
        self.parallel_flag = "--parallel-requests" if "--parallel-requests" in help_text else None
        # trees with the tune/eval partition evaluate its eval part by default: use every question
        self.split_args = ["--split", "all"] if "--split" in help_text else []

    def _next(self, tag: str) -> Path:
        self._k += 1
        return self.work / f"{self._k:02d}-{tag}"

    def run(self, *, preset: str, questions: Path, n: int, latency_s: float, concurrency: int,
            parallel: int | None = None, seed: int = 1, tag: str, server_flags: Sequence[str] = (),
            extra: Sequence[str] = ()) -> tuple[Proc, list[Any], list[Any]]:
        """One `teammed run` (``extra``: more of its flags) against a fresh fake server (``server_flags``: see
        `Server`); (process, server log, result rows)."""
        base = self._next(tag)
        with Server(latency_s=latency_s, log=base.with_suffix(".requests.jsonl"), extra=server_flags) as server:
            args = ["run", "--dataset", str(questions), "--n", str(n), "--preset", preset, *TEAM,
                    "--model", FAKE_MODEL, "--api-base", server.api_base, "--no-cache", "--out", str(base),
                    "--concurrency", str(concurrency), "--retry-attempts", "3", "--retry-base", "0.05",
                    "--seed", str(seed), *self.split_args, *extra]
            if parallel and self.parallel_flag:
                args += [self.parallel_flag, str(parallel)]
            proc = run_teammed(self.path, args, cwd=self.work)
            requests = server.requests()
        rows = [json.loads(line) for line in (base / "results.jsonl").read_text().splitlines() if line.strip()]
        failed = [r for r in rows if r.get("failed")]
        if failed:
            raise RuntimeError(f"{self.name} {tag}: {len(failed)} questions failed: {failed[0].get('error')}")
        return proc, requests, rows


GROUPS = ("tokens", "chain", "cpu", "startup", "memory", "efficiency")


def measure(tree: Tree, sizes: dict[str, Any], log: Any, only: frozenset[str] = frozenset(GROUPS)) -> dict[str, float]:
    f: dict[str, float] = {}
    qfile = write_questions(tree.work / "questions.jsonl", max(sizes["rss"][1], 2 * sizes["efficiency_n"], 64))
    n = sizes["tokens_n"]
    for preset in ("base", "all") if "tokens" in only else ():
        _, requests, rows = tree.run(preset=preset, questions=qfile, n=n, latency_s=0.0, concurrency=4,
                                     tag=f"tokens-{preset}")
        f[f"{preset}: prompt tokens / question"] = sum(r["prompt_tokens"] for r in requests) / n
        f[f"{preset}: calls / question"] = len(requests) / n
        f[f"{preset}: rows' prompt tokens = server's"] = float(
            sum(r.get("prompt_tokens", 0) for r in rows) == sum(r["prompt_tokens"] for r in requests))
        log(f"  {tree.name} tokens {preset}: done")
    latency, n = sizes["latency"], sizes["chain_n"]
    for preset in ("base", "all") if "chain" in only else ():
        chains: list[int] = []
        for i in range(n):  # one question per run: its chain as the code runs it (--concurrency 4)
            one = write_questions(tree.work / f"question-{i}.jsonl", 1, start=i)
            _, requests, _ = tree.run(preset=preset, questions=one, n=1, latency_s=latency, concurrency=4,
                                      tag=f"chain-{preset}-{i}")
            chains.append(longest_chain(requests))
        first = write_questions(tree.work / f"questions-{n}.jsonl", n)  # the same n questions, one at a time
        _, requests, rows = tree.run(preset=preset, questions=first, n=n, latency_s=latency, concurrency=1,
                                     tag=f"c1-{preset}")
        chain = sum(chains) / n
        f[f"{preset}: longest chain of sequential calls"] = chain
        f[f"{preset}: wall / (chain x latency), --concurrency 1"] = sum(r["latency_s"] for r in rows) / n / (
            chain * latency)
        log(f"  {tree.name} chain {preset}: done")
    chain = f.get("all: longest chain of sequential calls", 0.0)
    # k questions at once, all starting together: the bursts of a fixed-latency server
    for k in (16, 64) if "chain" in only else ():
        _, requests, rows = tree.run(preset="all", questions=qfile, n=k, latency_s=latency, concurrency=k,
                                     tag=f"chain-all-c{k}")
        f[f"all: wall / (chain x latency), --concurrency {k}"] = (
            sum(r["latency_s"] for r in rows) / k / (chain * latency))
        log(f"  {tree.name} concurrency {k}: done")

    if "cpu" in only:
        cpu_per_call(tree, sizes, qfile, f, log)
    if "startup" in only:
        startup(tree, f, log)
    if "memory" in only:
        memory(tree, sizes, qfile, f, log)
    if "efficiency" in only:
        efficiency(tree, sizes, qfile, f, log)
    return f


def cpu_per_call(tree: Tree, sizes: dict[str, Any], qfile: Path, f: dict[str, float], log: Any) -> None:
    small, large = sizes["cpu"]
    cpu = {}
    for k in (small, large):
        proc, requests, _ = tree.run(preset="all", questions=qfile, n=k, latency_s=0.0, concurrency=1,
                                     tag=f"cpu-{k}")
        cpu[k] = (proc.cpu_s, len(requests))
    f["framework CPU per LM call, ms (zero latency)"] = (
        1000 * (cpu[large][0] - cpu[small][0]) / (cpu[large][1] - cpu[small][1]))
    log(f"  {tree.name} cpu per call: done")


def startup(tree: Tree, f: dict[str, float], log: Any) -> None:
    with Server(latency_s=0.0, log=tree._next("ask").with_suffix(".requests.jsonl")) as server:
        ask = ["ask", "Which nerve innervates the deltoid?", "--option", "A=Radial", "--option", "B=Axillary",
               "--system", "zero_shot", "--model", FAKE_MODEL, "--api-base", server.api_base, "--no-cache"]
        runs = [run_teammed(tree.path, ask, cwd=tree.work) for _ in range(3)]
        calls = len(server.requests()) / 3
    best = min(runs, key=lambda p: p.cpu_s)
    f["one-call run: CPU s, start to exit"] = best.cpu_s
    f["one-call run: wall s, start to exit"] = min(p.wall_s for p in runs)
    f["one-call run: LM calls"] = calls
    helps = [run_teammed(tree.path, ["--help"], cwd=tree.work) for _ in range(5)]
    f["`teammed --help`: wall s"] = min(p.wall_s for p in helps)
    log(f"  {tree.name} start-up: done")


def memory(tree: Tree, sizes: dict[str, Any], qfile: Path, f: dict[str, float], log: Any) -> None:
    rss = {k: tree.run(preset="all", questions=qfile, n=k, latency_s=0.0, concurrency=16, tag=f"rss-{k}")[0].maxrss_mib
           for k in sizes["rss"]}
    a, b = sizes["rss"]
    slope = (rss[b] - rss[a]) / (b - a)
    f[f"peak RSS MiB, all, {a} questions"] = rss[a]
    f[f"peak RSS MiB, all, {b} questions"] = rss[b]
    f["RSS slope, MiB / question"] = slope
    f["peak RSS MiB extrapolated to 1,273 questions"] = rss[b] + slope * (1273 - b)
    log(f"  {tree.name} memory: done")


def efficiency(tree: Tree, sizes: dict[str, Any], qfile: Path, f: dict[str, float], log: Any) -> None:
    """Questions in flight = request slots, on a 0.5 s server: the share of slot-time spent answering.

    Each run has a whole number of questions per slot (``efficiency_n`` and at least two per slot,
    all of the evaluation part, so all of them run): a file of 512 ids gave 351 questions, and
    the last 95 had 256 slots to themselves, so the figure measured that tail as much as the
    framework. The steady figure is the middle half of the phase."""
    half = 0.5
    for slots in (64, 256):
        n = max(sizes["efficiency_n"], 2 * slots) if slots > 64 else sizes["efficiency_n"]
        questions = write_questions(tree.work / f"efficiency-{n}.jsonl", n, eval_only=True)
        proc, requests, _ = tree.run(preset="base", questions=questions, n=n, latency_s=half, concurrency=slots,
                                     parallel=slots, tag=f"efficiency-{slots}")
        # before c8a13d9's successors: --concurrency is also the request slots; after: --parallel-requests
        phase = max(r["end"] for r in requests) - min(r["start"] for r in requests)
        f[f"{slots} in flight, 0.5 s: question-phase slot efficiency"] = slot_busy_s(requests) / (slots * phase)
        f[f"{slots} in flight, 0.5 s: steady (middle half) slot efficiency"] = window_efficiency(requests, slots)
        f[f"{slots} in flight, 0.5 s: whole-process slot efficiency"] = slot_busy_s(requests) / (slots * proc.wall_s)
        # the process's CPU (start-up included) over its calls: the headroom one core leaves at 2 calls/s per slot
        f[f"{slots} in flight, 0.5 s: process CPU ms per LM call"] = 1000 * proc.cpu_s / len(requests)
        log(f"  {tree.name} efficiency {slots}: done")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, default=Path("/tmp/bench-before"), help="the tree at c8a13d9")
    parser.add_argument("--after", type=Path, default=REPO, help="the tree to compare (default: this checkout)")
    parser.add_argument("--work", type=Path, help="where runs and server logs go (default: a temporary directory)")
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke check of the script)")
    parser.add_argument("--latency", type=float, default=0.2, help="fixed server latency for the chain figures")
    parser.add_argument("--only", default=",".join(GROUPS), help=f"groups of figures, of {', '.join(GROUPS)}")
    parser.add_argument("--sizes", type=json.loads, default={},
                        help='override run sizes, e.g. \'{"rss": [50, 150], "efficiency_n": 128}\'')
    args = parser.parse_args(argv)
    sizes: dict[str, Any] = {"tokens_n": 10, "chain_n": 3, "cpu": (2, 10), "rss": (100, 300), "efficiency_n": 256,
                             "latency": args.latency}
    if args.quick:
        sizes.update(tokens_n=2, chain_n=1, cpu=(1, 2), rss=(4, 8), efficiency_n=64)
    sizes.update(args.sizes)
    for tree in (args.before, args.after):
        if not (tree / "src" / "teammed" / "cli.py").is_file():
            raise SystemExit(f"{tree} is not a teammed source tree; create the before tree with "
                             f"`git worktree add /tmp/bench-before c8a13d9`")
    work = args.work or Path(tempfile.mkdtemp(prefix="teammed-bench-"))

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log(f"runs and server logs: {work}")
    only = frozenset(g.strip() for g in args.only.split(",") if g.strip())
    if not only or only - set(GROUPS):
        raise SystemExit(f"--only takes groups of {', '.join(GROUPS)}")
    before = measure(Tree("before", args.before.resolve(), work), sizes, log, only)
    after = measure(Tree("after", args.after.resolve(), work), sizes, log, only)
    width = max(len(k) for k in before)
    print(f"{'figure':<{width}}  {'before':>10}  {'after':>10}  {'after/before':>12}")
    for key, old in before.items():
        new = after.get(key, float("nan"))
        ratio = new / old if old else float("nan")
        print(f"{key:<{width}}  {old:>10.3f}  {new:>10.3f}  {ratio:>12.3f}")
    (work / "figures.json").write_text(json.dumps({"before": before, "after": after, "sizes": sizes}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
