"""Issue 36, item 4: no Optuna or DSPy INFO line is interleaved with teammed's own output (without -v)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOREIGN = re.compile(r"^\[I \d{4}-|A new study created|Trial \d+ finished|^INFO (optuna|dspy)", re.M)


@pytest.mark.parametrize("argv", [
    ["search", "--dataset", "demo", "--n", "2", "--trials", "2", "--model", "scripted"],
    ["compile", "--dataset", "demo", "--optimizer", "bootstrap", "--train", "2", "--val", "2", "--test", "2",
     "--model", "scripted"],
], ids=["search", "compile"])
def test_no_library_info_line_between_teammeds(tmp_path, argv) -> None:
    out = ["--out", str(tmp_path / ("p.json" if argv[0] == "compile" else "s"))]
    done = subprocess.run([sys.executable, "-m", "teammed", *argv, *out], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-1500:]
    assert not FOREIGN.search(done.stderr + done.stdout), FOREIGN.search(done.stderr + done.stdout)
    loud = subprocess.run([sys.executable, "-m", "teammed", "-v", *argv, *out[:1], str(tmp_path / "again")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if argv[0] == "search":  # with -v, Optuna's own lines are back: the quiet default is a choice, not a loss
        assert FOREIGN.search(loud.stderr + loud.stdout)
