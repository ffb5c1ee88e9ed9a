"""Issue 34's line budgets: the transport and concurrency modules, and all of backends/ with them.

``python scripts/line_budget.py`` prints both counts (``wc -l``: every line, docstrings included,
as the issue counted them) and exits 1 when one is over its budget.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRANSPORT = ["src/teammed/backends/openai_http.py", "src/teammed/backends/litellm_backend.py",
             "src/teammed/interrupts.py", "src/teammed/_litellm.py", "programs/parallel.py"]
TRANSPORT_BUDGET = 1300
ALL_BUDGET = 3000


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def counts() -> dict[str, int]:
    transport = sum(lines(ROOT / p) for p in TRANSPORT)
    backends = sum(lines(p) for p in (ROOT / "src/teammed/backends").rglob("*.py"))
    outside = sum(lines(ROOT / p) for p in TRANSPORT if not p.startswith("src/teammed/backends/"))
    return {"transport": transport, "all": backends + outside}


def main() -> int:
    found = counts()
    over = False
    for name, budget in (("transport", TRANSPORT_BUDGET), ("all", ALL_BUDGET)):
        ok = found[name] <= budget
        over |= not ok
        print(f"{name:9s} {found[name]:5d} lines (budget {budget}){'' if ok else '  OVER'}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
