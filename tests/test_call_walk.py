"""Issue 46, item 6: the walk from the CLI to the first LM call stays short. The stack at that
call (`scripts/call_walk.py`, worker threads joined to the code that handed them their job) passes
few of teammed's files, and few of its steps go up a layer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOST_FILES = {"compile": 12, "tune": 13, "search": 11}  # measured at this test's commit (and at edc68db)
MOST_CLIMBS = 3


def test_each_command_reaches_the_model_through_few_files() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "call_walk.py"), *MOST_FILES, "--json"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr[-2000:]
    walks = json.loads(done.stdout.strip().splitlines()[-1])
    for command, most in MOST_FILES.items():
        stack = walks[command]["stack"]
        # the whole way, a worker's stack joined to its submitter's; tune's LM is wrapped by its memo
        assert stack[0] == "src/teammed/cli.py", (command, stack)
        assert stack[-1] in ("src/teammed/backends/base.py", "optimizers/tune_memo.py"), (command, stack)
        assert len(set(stack)) <= most, (command, stack)
        assert walks[command]["stack_climbs"] <= MOST_CLIMBS, (command, stack)
