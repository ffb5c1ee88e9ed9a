"""Systems are registered, not listed: a package's system runs under `--system` with no core file edited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from teammed.errors import ConfigError
from teammed.inputs import system_name
from teammed.systems import BUILTIN, System, registry

PLUGIN = '''
"""A two-agent debate: each side answers on its own, a judge picks between their letters."""
from typing import Literal

import dspy

from teammed.programs import Behaviour
from teammed.results import SystemRecord
from teammed.signatures.peer_single import DirectAnswer
from teammed.systems import System


class DebateRecord(SystemRecord):
    system: Literal["debate"] = "debate"
    sides: list[str] = []


class Debate(dspy.Module):
    system_name = "debate"

    def __init__(self):
        super().__init__()
        self.pro = Behaviour(DirectAnswer)
        self.con = Behaviour(DirectAnswer)

    def forward(self, question, options, context=None):
        sides = [self.pro(question=question, options=options).answer,
                 self.con(question=question, options=options).answer]
        answer = next(s for s in sides if s in options)
        return dspy.Prediction(answer=answer, rationale=f"the sides said {sides}", confidence="Medium",
                               record={"sides": sides}, transcript=[])


SYSTEM = System("debate", "debate_plugin:Debate", "debate_plugin:DebateRecord")
'''


def _install_plugin(root: Path, *, name: str = "debate", value: str = "debate_plugin:SYSTEM") -> dict[str, str]:
    """A package on ``root`` registering ``name`` under the ``teammed.systems`` entry-point group, as
    ``pip install`` of a package declaring it in pyproject.toml would leave it."""
    (root / "debate_plugin.py").write_text(PLUGIN)
    info = root / "debate_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: debate-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[teammed.systems]\n{name} = {value}\n")
    return {**os.environ, "PYTHONPATH": str(root), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def test_a_registered_system_runs_under_system_and_writes_typed_rows(tmp_path):
    env = _install_plugin(tmp_path)
    out = tmp_path / "run"
    run = subprocess.run([sys.executable, "-m", "teammed", "run", "--system", "debate", "--dataset", "demo",
                          "--model", "scripted", "--no-cache", "--n", "2", "--out", str(out)],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    probe = textwrap.dedent(f"""
        import json
        from teammed.results import load_rows
        rows = list(load_rows({str(out)!r}))
        print(json.dumps([[r.system, type(r.record).__name__, r.record.sides, r.prediction, r.calls,
                           r.custom_record] for r in rows]))
    """)
    read = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert read.returncode == 0, read.stderr
    rows = json.loads(read.stdout)
    assert len(rows) == 2
    for system, model, sides, prediction, calls, custom in rows:
        assert (system, model, custom) == ("debate", "DebateRecord", None)
        assert len(sides) == 2 and prediction in sides and calls == 2
    written = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(w["record"]["system"] == "debate" and len(w["record"]["sides"]) == 2 for w in written)


def test_a_registration_that_takes_a_built_in_name_is_refused_naming_the_package(tmp_path):
    env = _install_plugin(tmp_path, name="cot")
    run = subprocess.run([sys.executable, "-m", "teammed", "run", "--system", "cot", "--dataset", "demo",
                          "--model", "scripted", "--n", "1", "--dry-run"], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert run.returncode != 0
    assert "'debate-plugin' registers a system 'cot', a name already taken" in run.stderr


def test_a_registration_naming_something_else_is_refused(tmp_path):
    env = _install_plugin(tmp_path, value="debate_plugin:Debate")
    run = subprocess.run([sys.executable, "-m", "teammed", "run", "--system", "debate", "--dataset", "demo",
                          "--model", "scripted", "--n", "1", "--dry-run"], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert run.returncode != 0 and "must name a teammed.systems.System called 'debate'" in run.stderr


def test_the_built_ins_are_the_registry_and_each_loads():
    assert tuple(registry()) == tuple(s.name for s in BUILTIN)
    for system in BUILTIN:
        assert system.program_class().system_name == system.name
        model = system.record_model()
        assert model.model_fields["system"].default == system.name
    with pytest.raises(ConfigError, match="unknown system 'debat'"):
        system_name("debat")


def test_a_system_whose_paths_do_not_import_says_so():
    with pytest.raises(ConfigError, match="system 'x''s program 'no_such_module:X' cannot be imported"):
        System("x", "no_such_module:X").program_class()
