"""The component table (`teammed.components.TABLE`) is the one declaration every layer derives from."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from teammed.backends.simulated import infer_components
from teammed.components import ALIASES, PRESET_COMPONENTS, TABLE, CallShape, completed, satisfied, valid
from teammed.config import COMPONENTS, PRESETS, TeamworkConfig, config_from_components
from teammed.errors import ConfigError
from teammed.optimizers._space import SearchSpace, valid_subsets
from teammed.optimizers.tune import TuneSettings, neighbours
from teammed.programs.accounting import expected_calls

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("c", TABLE, ids=lambda c: c.name)
def test_every_row_of_the_table_reaches_every_layer(c):
    assert TeamworkConfig.model_fields[c.name].default is False
    for alias in (c.name, *c.aliases):
        assert ALIASES[alias] == c.name
    assert c.name in PRESET_COMPONENTS[c.presets[0]] and c.name in PRESETS[c.presets[0]].components
    assert all(c.name in PRESET_COMPONENTS[p] for p in c.presets)
    needed = {"n_turns": max(2, c.min_turns), **{r: True for r in c.requires}}
    for lead in {c.name == "leadership", True}:  # its term in the call count, with and without a leader
        on = config_from_components([c.name, *(["leadership"] if lead else [])], **needed)
        off = on.model_copy(update={c.name: False})
        for n, tie in ((2, False), (4, True)):
            shape = CallShape(n=n, turns=on.n_turns, lead=on.leadership, tie=tie, corrects=on.corrects)
            assert expected_calls(on, n, tie=tie) - expected_calls(off, n, tie=tie) == c.calls(shape)
    for r in c.requires:
        with pytest.raises(ConfigError, match=f"{c.name} requires {r}"):
            config_from_components([c.name], n_turns=needed["n_turns"], **{k: v for k, v in needed.items()
                                                                            if k not in (r, "n_turns")})
    if c.min_turns > 1:
        with pytest.raises(ConfigError, match=f"requires n_turns >= {c.min_turns}"):
            config_from_components([c.name, *c.requires], n_turns=c.min_turns - 1)
    assert any(c.name in s for s in valid_subsets(min_turns=max(2, c.min_turns)))
    assert completed({c.name}) == tuple(n for n in COMPONENTS if n in {c.name, *c.requires})
    for field, text in c.evidence:  # the simulated team sees it act
        assert c.name in infer_components({field: text})


def test_the_derived_space_is_the_brute_force_space_of_the_rules():
    for turns in (1, 2):
        brute = [s for n in range(len(COMPONENTS) + 1) for s in itertools.combinations(COMPONENTS, n)
                 if _builds(s, turns)]
        assert sorted(valid_subsets(min_turns=turns)) == sorted(brute)
    # the papers' six components: 48 subsets at two turns, 16 at one (a component of one's own adds to these)
    papers = [c.name for c in TABLE if c.papers]
    for turns, n in ((2, 48), (1, 16)):
        assert sum(valid(s, turns) for k in range(len(papers) + 1) for s in itertools.combinations(papers, k)) == n


def _builds(subset, turns):
    try:
        config_from_components(list(subset), n_turns=turns)
        return True
    except ConfigError:
        return False


def test_tune_moves_follow_the_requirements():
    settings = TuneSettings(dataset="demo", model="scripted", n_turns=2)
    everything = config_from_components(list(COMPONENTS)).model_dump(mode="json")
    moves = [tuple(n for n in COMPONENTS if m[n]) for m in neighbours(everything, settings)]
    assert satisfied(set(COMPONENTS) - {"leadership"}) in moves  # leadership off takes monitoring with it
    assert "mutual_monitoring" not in satisfied({"mutual_monitoring", "trust"})
    assert all(_builds(m, 2) for m in moves)


def test_a_table_that_breaks_its_own_rules_is_refused_at_import(tmp_path):
    src = _copy_package(tmp_path)
    table = src / "components.py"
    text = table.read_text()
    table.write_text(text.replace('requires=("leadership",)', 'requires=("closed_loop",)', 1))
    out = subprocess.run([sys.executable, "-c", "import teammed.config"], cwd=tmp_path, env=_env(tmp_path),
                         capture_output=True, text=True)
    assert out.returncode != 0 and "requires ['closed_loop'], which must be declared before it" in out.stderr


DUMMY = '''    Component(
        "second_opinion", ("so",), "a member outside the team reviews the leading answer each turn",
        calls=lambda s: s.turns * int(s.discussed), presets=("second_opinion",), min_turns=2, papers=(),
        evidence=(("history", "second opinion:"),)),
'''


def test_a_new_component_added_by_the_documented_path_is_toggled_by_flags_search_and_calls(tmp_path):
    """docs/add-a-component.md: one record in the table (its signature, module and hook are its own files
    and one line in a phase); the flags, presets, search space, tune's moves and the call count follow.
    The dummy is not the page's example, so a user who follows the page keeps this test green."""
    src = _copy_package(tmp_path)
    table = src / "components.py"
    text = table.read_text()
    anchor = "\n)\n\n# The presets of several components"
    assert anchor in text
    table.write_text(text.replace(anchor, "\n" + DUMMY.rstrip("\n") + anchor, 1))
    probe = """
import json
from teammed.config import COMPONENTS, PRESETS, config_from_components
from teammed.optimizers._space import SearchSpace, valid_subsets
from teammed.programs.accounting import expected_calls
from teammed.backends.simulated import infer_components
import optuna
cfg = config_from_components("smm,so")
space = SearchSpace(base=cfg.model_copy(update={"shared_mental_model": False, "second_opinion": False}))
study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
seen = set()
for _ in range(40):
    t = study.ask(); seen.add(space.suggest(t).second_opinion); study.tell(t, 0.0)
print(json.dumps({
  "components": cfg.components, "names": COMPONENTS, "in_all": "second_opinion" in PRESETS["all"].components,
  "own_preset": PRESETS["second_opinion"].components,
  "calls": expected_calls(cfg, 3) - expected_calls(cfg.model_copy(update={"second_opinion": False}), 3),
  "subsets": len(valid_subsets(min_turns=2)), "one_turn": len(valid_subsets(min_turns=1)),
  "suggested": sorted(seen),
  "inferred": infer_components({"history": "second opinion: no"}),
}))
"""
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=_env(tmp_path), capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["components"] == ["shared_mental_model", "second_opinion"]
    assert got["names"][-1] == "second_opinion"
    assert got["in_all"] is False  # a group preset gains it only if its record says so
    assert got["own_preset"] == ["second_opinion"]
    assert got["calls"] == 2  # its term: one call per turn, two turns
    # doubled with two turns (96 on the papers' table); absent with one
    assert got["subsets"] == 2 * len(valid_subsets(min_turns=2))
    assert got["one_turn"] == len(valid_subsets(min_turns=1))
    assert got["suggested"] == [False, True] and got["inferred"] == ["second_opinion"]
    run = subprocess.run([sys.executable, "-m", "teammed", "run", "--components", "so,smm", "--model", "scripted",
                          "--dataset", "demo", "--n", "1", "--dry-run"], cwd=tmp_path, env=_env(tmp_path),
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "shared_mental_model+second_opinion seed" in run.stdout + run.stderr
    helped = subprocess.run([sys.executable, "-m", "teammed", "run", "--help"], cwd=tmp_path, env=_env(tmp_path),
                            capture_output=True, text=True)
    assert "second_opinion (so)" in " ".join(helped.stdout.split())


def _copy_package(tmp_path: Path) -> Path:
    """The installed layout of teammed (src/teammed with its top-level subpackages) under ``tmp_path``."""
    pkg = tmp_path / "teammed"
    shutil.copytree(ROOT / "src" / "teammed", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for sub in ("programs", "signatures", "optimizers", "data", "evals"):
        shutil.copytree(ROOT / sub, pkg / sub, ignore=shutil.ignore_patterns("__pycache__"))
    return pkg


def _env(tmp_path: Path) -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(tmp_path), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def test_the_copied_package_is_the_one_imported(tmp_path):
    """The dummy test above would pass vacuously if the subprocess imported the installed package."""
    _copy_package(tmp_path)
    out = subprocess.run([sys.executable, "-c", "import teammed.config, teammed.programs; "
                          "print(teammed.config.__file__); print(teammed.programs.__file__)"],
                         cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert all(line.startswith(str(tmp_path)) for line in out.stdout.split())


def test_search_space_describes_every_component():
    assert SearchSpace(base=TeamworkConfig()).describe()["components"] == list(COMPONENTS)


def test_the_index_page_lists_every_component_of_the_table():
    """docs/index.md's table of components is drawn from the table when the site is built (the mkdocs hook):
    every component, its first short name and its summary; the page itself holds no list of them."""
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", root / "scripts" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    source = (root / "docs" / "index.md").read_text()
    assert source.count(hooks.COMPONENTS_MARKER) == 1 and not any(f"`{c.aliases[0]}` |" in source for c in TABLE)
    page = hooks.on_page_markdown(source)
    rows = [line for line in page.splitlines() if line.startswith("| ") and line.count("|") == 4][1:]
    assert len(rows) == len(TABLE)
    for row, component in zip(rows, TABLE, strict=True):
        _, short, summary = (cell.strip() for cell in row.strip("|").split("|"))
        assert short == f"`{component.aliases[0]}`", component.name
        assert summary.startswith(component.summary), component.name
        assert bool(component.requires) == ("(needs " in summary), component.name
