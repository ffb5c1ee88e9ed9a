"""How far the tokens= plan's estimate over-counts the text it renders (not a test; not in CI).

For every demo vignette (MedQA format) and the base and all configurations, the deliberation is
rendered offline against `ScriptedLM`, as `teammed.optimizers.tune_rate.estimate_rate` does, and
each call's text is counted twice: in bytes (the estimate) and in cl100k tokens (GPT-4's
tokenizer, from litellm's bundled copy). Prints the ratio per call (min, mean, max) and the mean
bytes and tokens per call.

    python benchmarks/tune_rate.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from fake_server import encoder  # noqa: E402

from teammed.answering import answer  # noqa: E402
from teammed.backends.scripted import ScriptedLM  # noqa: E402
from teammed.config import COMPONENTS, TeamworkConfig, config_from_components  # noqa: E402
from teammed.data import load_dataset  # noqa: E402
from teammed.optimizers.tune_rate import call_tokens  # noqa: E402
from teammed.programs.teamwork import TeamworkProgram  # noqa: E402


def main() -> int:
    enc = encoder()
    questions = load_dataset("demo")
    for label, components in (("base", []), ("all", list(COMPONENTS))):
        config = config_from_components(components, n_turns=2, n_agents="auto").model_dump(mode="json")
        ratios, counted, tokens = [], [], []
        for question in questions:
            lm = ScriptedLM()
            answer(TeamworkProgram(TeamworkConfig.build(**config)), question, lm)
            for call in lm.calls:
                est, _ = call_tokens(call.messages, max_tokens=0, demos=0)
                real = sum(len(enc.encode(str(m["content"]))) for m in call.messages)
                ratios.append(est / real)
                counted.append(est)
                tokens.append(real)
        print(f"{label}: {len(questions)} questions, {len(ratios)} calls; bytes/cl100k per call "
              f"min {min(ratios):.2f} mean {sum(ratios) / len(ratios):.2f} max {max(ratios):.2f}; "
              f"mean per call {sum(counted) / len(counted):,.0f} counted, {sum(tokens) / len(tokens):,.0f} cl100k")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
