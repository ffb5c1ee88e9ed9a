from __future__ import annotations

import os

import dspy
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TEAMMED_OFFLINE", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-local-model", action="store_true", default=False,
                     help="run tests that start the embedded SmolLM2 model")


# Tests that share one outside resource run on one pytest-xdist worker, one after another: the
# embedded model's server (two at once would halve each one's cores) and the PostgreSQL database.
# The real-model tests are the longest group, so they are handed out first and run beside the rest.
# tryfirst: pytest-xdist's worker reads the groups in its own hook of this name, which runs before a
# conftest's otherwise (tests/test_xdist_groups.py).
_SERIAL_GROUPS = ("local_model", "postgres")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    real = config.getoption("--run-local-model") or os.environ.get("TEAMMED_RUN_LOCAL_MODEL") == "1"
    skip = pytest.mark.skip(reason="needs --run-local-model (CI runs it)")
    for item in items:
        if "local_model" in item.keywords and not real:
            item.add_marker(skip)
            continue
        for group in _SERIAL_GROUPS:
            if group in item.keywords:
                item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: "local_model" not in item.keywords)  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def _fresh_dspy_settings():
    """No test sees another's LM, adapter or trace."""
    with dspy.context(lm=None, adapter=None, trace=[]):
        yield


@pytest.fixture
def hub_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline, no data directory from the environment, and a tripwire on the hub's probe: a data
    test that would contact the Hugging Face hub fails instead of waiting on the network."""
    from teammed.data import _hub, registry

    monkeypatch.setenv("TEAMMED_OFFLINE", "1")
    monkeypatch.delenv(registry.DATA_DIR_VARIABLE, raising=False)

    def tripwire(*args: object, **kwargs: object) -> None:
        raise AssertionError("the hub was contacted")

    monkeypatch.setattr(_hub, "_probe", tripwire)
