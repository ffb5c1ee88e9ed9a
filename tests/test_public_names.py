"""Public names that fit DSPy, an import without side effects, backends a user can reach (issue 21, item 4)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import dspy
import pytest

import teammed.backends
import teammed.programs
import teammed.programs.peers


def _environ_around(code: str, env: dict[str, str]) -> dict[str, dict[str, str]]:
    script = ("import json, os\n"
              "before = dict(os.environ)\n"
              f"{code}\n"
              "print(json.dumps({'before': before, 'after': dict(os.environ)}))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}


def test_import_teammed_changes_nothing_in_the_environment() -> None:
    seen = _environ_around("import teammed\nteammed.TeamworkConfig, teammed.DataError", _clean_env())
    assert seen["after"] == seen["before"]


def test_library_code_leaves_the_environment_and_litellms_settings_as_they_were() -> None:
    """Importing teammed and importing litellm through it writes nothing to the environment and turns
    no litellm setting: a library user's process is theirs (issue 34, item 2)."""
    code = ("import teammed.backends, teammed.programs, sys\n"
            "assert 'litellm' not in sys.modules, 'importing teammed imported litellm'\n"
            "from teammed._litellm import litellm\n"
            "assert litellm().suppress_debug_info is False\n"
            "import importlib.util\n"
            "assert importlib.util.find_spec('teammed._litellm_env') is None")
    seen = _environ_around(code, _clean_env())
    assert seen["after"] == seen["before"] and "LITELLM_LOCAL_MODEL_COST_MAP" not in seen["after"]


def test_litellm_imported_through_teammed_neither_stalls_nor_warns_and_the_environment_is_restored() -> None:
    """From Python, teammed's first import of litellm takes its packaged price map (no fetch, so no stall and no
    warning offline) and leaves ``LITELLM_LOCAL_MODEL_COST_MAP`` unset again (issue 46, item 4). The stall was the
    fetch: litellm's own record of where the map came from shows it was not tried, which a wall-clock bound on a
    loaded two-core machine showed only by chance."""
    code = ("import os\nfrom teammed._litellm import litellm\nm = litellm()\n"
            "from litellm.litellm_core_utils import get_model_cost_map as g\n"
            "info = g.get_model_cost_map_source_info()\n"
            "print(len(m.model_cost), 'LITELLM_LOCAL_MODEL_COST_MAP' in os.environ, info['source'], info['url'],"
            " info['is_env_forced'], info['fallback_reason'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=_clean_env())
    assert done.returncode == 0, done.stderr
    entries, left, source, url, forced, fallback = done.stdout.split()
    assert "LiteLLM:WARNING" not in done.stderr and "fetch" not in done.stderr
    assert int(entries) > 1000 and left == "False"
    assert (source, url, forced, fallback) == ("local", "None", "True", "None")  # the packaged map, no URL tried


def test_the_command_line_takes_litellms_packaged_price_map_unless_the_user_chose() -> None:
    """`teammed` (its `main`) asks for the installed litellm's packaged price map and quiet lookups
    before anything imports litellm; a user's own value of the variable is kept."""
    code = ("import contextlib, io\n"
            "from teammed.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['cache', 'info', '--cache-dir', '/tmp/teammed-env-test-cache'])\n"
            "from teammed._litellm import litellm\n"
            "from litellm.litellm_core_utils import get_model_cost_map as g\n"
            "info = g.get_model_cost_map_source_info()\n"
            "assert litellm().suppress_debug_info is True\n"
            "print('SOURCE', info['source'], info['is_env_forced'])")
    seen = _environ_around(code, _clean_env())
    assert seen["after"]["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    mine = _environ_around(code.replace("print('SOURCE'", "assert not info['is_env_forced']\nprint('SOURCE'"),
                           {**_clean_env(), "LITELLM_LOCAL_MODEL_COST_MAP": "False"})
    assert mine["after"]["LITELLM_LOCAL_MODEL_COST_MAP"] == "False"


_GLOBAL_WRITES = re.compile(r"environ\[[^]]*\] *=[^=]|environ\.(setdefault|update|pop|clear)\(|putenv|unsetenv|"
                           r"\bgc\.(freeze|set_threshold|disable)\(|setswitchinterval|"
                           r"\b(litellm|module)\.\w+ *=[^=]|"
                           # a stream swapped for every thread, or another library's method replaced (tqdm's)
                           r"\bredirect_std(out|err)\b|\bsys\.std(out|err) *=[^=]|\.__(init|call|new)__ *=[^=]|"
                           # the same through setattr, which no library code needs on a module or a class
                           r"\bsetattr\(\s*(sys|os|tqdm|litellm|logging|warnings|dspy|optuna)\b|\bsetattr\([^)]*\"__\w+__\"")


def test_no_library_code_writes_process_global_state() -> None:
    """Issues 34 and 46: the environment, the garbage collector, the switch interval and litellm's settings
    are changed only by the command line's own `for_the_command_line`; stdout/stderr are swapped and tqdm is
    quieted only by the command line's display (`teammed.progress.relaying` and `quiet_libraries`)."""
    root = Path(__file__).resolve().parents[1]
    found = []
    for folder in ("src/teammed", "programs", "optimizers", "evals", "data", "signatures"):
        for path in sorted((root / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                if _GLOBAL_WRITES.search(line.split("#")[0]):
                    found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    # `for_the_command_line` and what it asks `litellm()` for, the price-map variable set for litellm's import
    # only (and removed); the command line's display
    allowed = {"src/teammed/_litellm.py": 4, "src/teammed/progress.py": 4}
    assert [f for f in found if f.split(":")[0] not in allowed] == []
    assert {f: sum(x.split(":")[0] == f for x in found) for f in allowed} == allowed, found


@pytest.mark.parametrize("line", ["    with contextlib.redirect_stdout(printed):",
                                  "    tqdm.tqdm.__init__ = quiet  # type: ignore", "    sys.stdout = io.StringIO()",
                                  "from contextlib import redirect_stdout as _hush",
                                  '    setattr(tqdm.tqdm, "__init__", quiet)', '    setattr(sys, "stdout", sink)'])
def test_the_process_state_check_catches_stream_swaps_and_patched_libraries(line: str) -> None:
    """The two kinds issue 46 found in library code (compile's tqdm patch, tune's redirect_stdout)."""
    assert _GLOBAL_WRITES.search(line.split("#")[0])


@pytest.mark.parametrize("module", [teammed.programs, teammed.programs.peers, teammed.backends])
def test_no_public_name_shadows_a_dspy_name_with_another_meaning(module) -> None:
    clashes = [name for name in module.__all__
               if hasattr(dspy, name) and getattr(module, name) is not getattr(dspy, name)]
    assert clashes == []


def test_the_chain_of_thought_peer_is_single_agent_cot_and_keeps_its_system_name() -> None:
    from teammed.programs import SYSTEMS, SingleAgentCoT, build_system

    assert SYSTEMS["cot"] is SingleAgentCoT and type(build_system("cot")) is SingleAgentCoT
    assert SingleAgentCoT is not dspy.ChainOfThought


@pytest.mark.parametrize("module", ["teammed.programs", "teammed.programs.peers", "teammed.programs.peers.baselines"])
def test_the_old_name_is_a_deprecated_alias_of_the_same_class(module: str) -> None:
    import importlib

    from teammed.programs import SingleAgentCoT

    imported = importlib.import_module(module)
    for _ in range(2):  # never cached: every use warns
        with pytest.warns(DeprecationWarning, match=rf"{module}\.ChainOfThought is deprecated.*SingleAgentCoT"):
            assert imported.ChainOfThought is SingleAgentCoT
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert imported.SingleAgentCoT is SingleAgentCoT  # the new name does not warn
    assert "ChainOfThought" not in imported.__all__


def test_the_backends_a_user_constructs_are_exported() -> None:
    from teammed.backends.litellm_backend import LiteLLMBackend
    from teammed.backends.openai_http import OpenAICompatibleClient

    assert teammed.backends.LiteLLMBackend is LiteLLMBackend
    assert teammed.backends.OpenAICompatibleClient is OpenAICompatibleClient
    assert {"LiteLLMBackend", "OpenAICompatibleClient", "ScriptedLM"} <= set(teammed.backends.__all__)
    assert {"LiteLLMBackend", "OpenAICompatibleClient"} <= set(dir(teammed.backends))
    with pytest.raises(AttributeError):
        teammed.backends.NoSuchBackend  # noqa: B018


def test_the_dependency_check_finds_a_declared_package_nothing_imports() -> None:
    """Issue 46, item 5: the check runs both ways; a runtime package the code stops importing is named."""
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("check_deps", root / "scripts" / "check_deps.py")
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    files = [p for d in check.CODE for p in (root / d).rglob("*.py")]
    modules = check.imported_modules(files)
    assert check.unused_declarations(files, modules) == []  # today: every declared package is used
    without_httpx = {m: where for m, where in modules.items() if m != "httpx"}
    unused = check.unused_declarations([], without_httpx)
    assert any(line.startswith("httpx: declared in pyproject.toml but never imported") for line in unused)


def test_the_dependency_check_counts_only_the_places_a_module_is_found_by_name() -> None:
    """The review's two loopholes: a dict key that spells a package's name is not a use of it, and a module
    imported by ``import_module`` must be declared as an ``import`` must; ``find_spec`` probes only count as a use."""
    import ast
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("check_deps", root / "scripts" / "check_deps.py")
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)

    def names(code: str) -> list[tuple[str, bool]]:
        return check.names_found_in(ast.parse(code))

    assert names('calls = {"requests": 3}\nprint("requests")') == []
    assert names('importlib.import_module("requests")') == [("requests", False)]
    assert names('[sys.executable, "-m", "llama_cpp.server"]') == [("llama_cpp.server", False)]
    assert names('CODE = "import sys, xllamacpp"') == [("sys", False), ("xllamacpp", False)]
    assert sorted(names('any(find_spec(m) for m in ("psycopg", "psycopg2"))')) == [("psycopg", True),
                                                                                  ("psycopg2", True)]
