"""Two `search` workers on one journal study against one worker alone (not a test; not in CI).

Each worker is a process running the same search (same seed, default TPE sampler, ``--trials``)
on the same journal file, answering with a scripted team whose every call sleeps ``--latency``
seconds (a served model's latency; the scripted answers cost no CPU). Wall time is the search's,
from the moment every worker has imported teammed to the last one's end. One worker alone runs the
same search on its own journal first. Prints, per arm: wall time, distinct configurations
evaluated, trials closed as duplicates, and LM calls made; then the wall-time ratio of two
workers to one, measured in the same run.

    python benchmarks/search_workers.py [--trials 8] [--questions 4] [--latency 0.05] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = """
import json, sys, time
from pathlib import Path
from teammed.backends import ScriptedLM
from teammed.config import TeamworkConfig
from teammed.optimizers import search_special_set
from teammed.types import Question
ready = Path({barrier!r}); (ready / "{index}").touch()
while len(list(ready.iterdir())) < {workers}:
    time.sleep(0.01)
started = time.monotonic()  # imports done: the search itself is timed
options = {{"A": "alpha", "B": "beta", "C": "gamma", "D": "delta"}}
questions = [Question(id=f"q{{i}}", question=f"Case {{i}}: finding {{i}}. Diagnosis?", options=options,
                      answer_idx="ABCD"[i % 4]) for i in range({questions})]
lms = []
def lm():
    lms.append(ScriptedLM(lambda call: None, delay_s={latency}))
    return lms[-1]
search_special_set(questions=questions, lm_factory=lm, trials={trials}, storage={storage!r}, study_name="bench",
                   sampler="tpe", seed=0, batch_size=2, out_dir={out!r}, base_config=TeamworkConfig(n_agents=2))
print(json.dumps({{"calls": sum(len(x.calls) for x in lms), "search_s": time.monotonic() - started}}))
"""


def arm(workers: int, args: argparse.Namespace, root: Path) -> dict[str, float]:
    import optuna

    from teammed.optimizers._storage import open_storage

    storage = str(root / f"w{workers}.journal")
    barrier = root / f"ready{workers}"
    barrier.mkdir()
    scripts = [WORKER.format(barrier=str(barrier), index=i, workers=workers, questions=args.questions,
                             latency=args.latency, trials=args.trials, storage=storage, out=str(root / f"o{i}"))
               for i in range(workers)]
    procs = [subprocess.Popen([sys.executable, "-c", s], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for s in scripts]
    outs = [p.communicate(timeout=900) for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit("a worker failed:\n" + "\n".join(err[-1500:] for _, err in outs))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name="bench", storage=open_storage(storage, root)[0])
    evaluated = [t for t in study.get_trials() if t.state.name in ("COMPLETE", "PRUNED")
                 and t.user_attrs.get("duplicate_of") is None]
    ends = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
    distinct = {json.dumps(t.user_attrs["config"], sort_keys=True) for t in evaluated}
    return {"wall_s": max(e["search_s"] for e in ends), "distinct": len(distinct),
            "evaluations": len(evaluated),
            "duplicates": sum(t.user_attrs.get("duplicate_of") is not None for t in study.get_trials()),
            "calls": sum(json.loads(o.strip().splitlines()[-1])["calls"] for o, _ in outs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    ratios = []
    for round_ in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory() as tmp:
            one, two = arm(1, args, Path(tmp)), arm(2, args, Path(tmp))
        ratios.append(two["wall_s"] / one["wall_s"])
        for name, a in (("1 worker ", one), ("2 workers", two)):
            print(f"round {round_} {name}: {a['wall_s']:.1f} s, {a['distinct']} distinct of {a['evaluations']} "
                  f"evaluations, {a['duplicates']} duplicates closed, {a['calls']} LM calls")
    print(f"wall time, 2 workers / 1 worker: {', '.join(f'{r:.2f}' for r in ratios)}")


if __name__ == "__main__":
    main()
