"""The tests that share one outside resource (the embedded model's server, the PostgreSQL database) run on one
xdist worker, one after another, as tests/conftest.py marks them. Two ways CI started two llama.cpp servers
at once: the conftest's marks came after xdist's worker had read the groups (its hook needs ``tryfirst``), and
pytest 9 ignores pytest-xdist 3.8's group suffix (a node's id is no longer its ``_nodeid``; the dev extra
pins pytest below 9). This runs our conftest in a pytest of its own, on two workers, and reads which worker
ran each grouped test; it fails on either fault."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

GROUPED = '''
import os, time, pytest

@pytest.mark.{marker}
@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    time.sleep(0.3)
    with open(os.environ["WORKERS_LOG"], "a") as log:
        log.write("{marker} " + os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")
'''


def test_tests_of_one_outside_resource_run_on_one_worker(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    shutil.copy(HERE / "conftest.py", project / "tests" / "conftest.py")
    for marker in ("local_model", "postgres"):
        (project / "tests" / f"test_{marker}.py").write_text(GROUPED.format(marker=marker))
    (project / "pytest.ini").write_text("[pytest]\nmarkers =\n    local_model: x\n    postgres: x\n")
    log = tmp_path / "workers.log"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                           "--dist", "loadgroup", "--run-local-model", "tests"], cwd=project, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "WORKERS_LOG": str(log)})
    assert done.returncode == 0, done.stdout + done.stderr
    ran: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        marker, worker = line.split()
        ran.setdefault(marker, set()).add(worker)
    assert {marker: len(workers) for marker, workers in ran.items()} == {"local_model": 1, "postgres": 1}, ran
