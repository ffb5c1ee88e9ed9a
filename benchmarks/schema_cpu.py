"""Framework CPU per predictor call without HTTP, with and without the schema caches (not a test).

Two behaviours (an initial assessment and a final ranking) on a MedQA-length vignette, answered by
the in-process scripted backend, so what is timed is DSPy's predictor plus teammed's adapter:
output schema, prompt layout and parsing. Each variant runs three times, interleaved, in one
process; the figure is the ratio of the best times.

    python benchmarks/schema_cpu.py [--calls 300]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import dspy  # noqa: E402
from dspy.adapters.utils import parse_value  # noqa: E402
from prefix_cache import VIGNETTES  # noqa: E402

from teammed import adapter, schema  # noqa: E402
from teammed.backends.scripted import ScriptedLM  # noqa: E402
from teammed.signatures import FinalRanking, InitialAssessment  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="predictor calls per timing (each of two behaviours)")
    args = parser.parse_args(argv)
    logging.getLogger("dspy").setLevel(logging.ERROR)
    lm, case = ScriptedLM(keep_calls=False), VIGNETTES[0]
    assess, rank = dspy.Predict(InitialAssessment), dspy.Predict(FinalRanking)

    def go(n: int) -> None:
        with dspy.context(lm=lm, adapter=adapter.SchemaAdapter(), disable_history=True, trace=[]):
            for _ in range(n):
                assess(question=case["question"], options=case["options"], role="Cardiologist")
                rank(question=case["question"], options=case["options"], role="Cardiologist")

    def afresh(signature, inputs=None, *, title=None):  # type: ignore[no-untyped-def]
        return schema._build_output_schema(signature, inputs or {}, title=title)

    variants = {"cached": (schema.output_schema, schema._parse_value), "afresh": (afresh, parse_value)}
    best: dict[str, float] = {}
    for _ in range(3):
        for name, (build, parse) in variants.items():
            adapter.output_schema, schema._parse_value = build, parse
            go(20)
            started = time.process_time()
            go(args.calls)
            ms = (time.process_time() - started) / (2 * args.calls) * 1000
            best[name] = min(best.get(name, ms), ms)
    adapter.output_schema, schema._parse_value = variants["cached"]
    print(f"CPU per predictor call, no HTTP: built afresh {best['afresh']:.3f} ms, cached {best['cached']:.3f} ms "
          f"(ratio {best['cached'] / best['afresh']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
