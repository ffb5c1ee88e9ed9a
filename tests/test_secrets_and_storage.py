"""A refusal never prints a password, and storage URLs mean what they say (issue 47, items 3 and 5)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from teammed import experiments as ex

SECRET = "PW-s3cret"
BAD_BASES = [f"htp://u:{SECRET}@host:1/v1", f"http//u:{SECRET}@host/v1", f"u:{SECRET}@host"]
BAD_STORAGES = [f"postgresql:/u:{SECRET}@host/db", f"mysql://u:{SECRET}@host/db", f"sqlite://u:{SECRET}@x.db",
                f"oracle://u:{SECRET}@host/db"]
URL_COMMANDS = {"run": ["--dataset", "demo"], "ask": ["--question", "q?", "--option", "A=a", "--option", "B=b"],
                "compile": ["--dataset", "demo"], "search": ["--dataset", "demo"],
                "tune": ["--dataset", "demo", "--budget", "calls=10"], "reproduce": ["001-table1"]}


def _teammed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "teammed", *args], capture_output=True, text=True, timeout=120,
                          env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("command", sorted(URL_COMMANDS))
def test_a_mistyped_api_base_is_refused_without_its_password(command: str) -> None:
    for base in BAD_BASES:
        done = _teammed(command, *URL_COMMANDS[command], "--model", "openai/x", "--api-base", base)
        assert done.returncode == 2 and "--api-base" in done.stderr, done.stderr
        assert SECRET not in done.stderr + done.stdout


@pytest.mark.parametrize("command", ["search", "tune", "reproduce"])
def test_a_bad_storage_is_refused_before_any_work_without_its_password(command: str) -> None:
    for storage in BAD_STORAGES:
        done = _teammed(command, *URL_COMMANDS[command], "--model", "scripted", "--storage", storage)
        assert done.returncode == 2 and "storage" in done.stderr, (storage, done.stderr)
        assert SECRET not in done.stderr + done.stdout
        assert "Traceback" not in done.stderr and "a bug" not in done.stderr


def test_specs_mask_passwords_in_repr_dumps_and_validation_errors() -> None:
    good = f"http://u:{SECRET}@127.0.0.1:1/v1"
    backend = ex.BackendSpec(model="openai/x", api_base=good)
    assert backend.api_base == good  # the value the backend needs is kept
    spec = ex.SearchSpec(data="demo", backend=backend, storage=f"postgresql://u:{SECRET}@127.0.0.1/db")
    for shown in (repr(backend), repr(spec), str(spec), spec.model_dump_json(), str(spec.model_dump()),
                  str(spec.model_dump(mode="json"))):
        assert SECRET not in shown and "u:***@" in shown
    for make in (lambda: ex.BackendSpec(api_base=BAD_BASES[0]),
                 lambda: ex.SearchSpec(data="demo", storage=BAD_STORAGES[0]),
                 lambda: ex.RunSpec(data="demo", backend={"model": "openai/x", "api_base": BAD_BASES[2]})):
        with pytest.raises(ValidationError) as caught:
            make()
        assert SECRET not in str(caught.value) and SECRET not in repr(caught.value)


@pytest.mark.parametrize(("storage", "said"), [
    ("journal://x.log", "ambiguous"),
    ("mysql://u@host/db", "mysql is not supported"),
    ("sqlite://x.db", "names a host"),
])
def test_storage_forms_that_do_not_mean_what_they_say_are_refused_at_the_flag(storage: str, said: str) -> None:
    done = _teammed("search", "--dataset", "demo", "--model", "scripted", "--trials", "1", "--storage", storage)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert "search: 1 trials" not in done.stderr  # refused before the search started


def test_journal_forms_relative_and_absolute(tmp_path) -> None:
    from teammed.inputs import storage_url

    assert storage_url("journal:x.log") == "journal:x.log"
    assert storage_url(f"journal:{tmp_path}/x.log") == f"journal:{tmp_path}/x.log"
    assert storage_url(f"journal://{tmp_path}/x.log") == f"journal://{tmp_path}/x.log"  # three slashes: absolute


def test_a_full_disk_under_the_study_database_says_the_disk() -> None:
    from sqlalchemy.exc import OperationalError

    from teammed.messages import storage_message

    full = OperationalError("INSERT INTO trials ...", {}, Exception("database or disk is full"))
    said = storage_message(full)
    assert said is not None and "the disk is full" in said and "df -h" in said and "credentials" not in said
    other = storage_message(OperationalError("SELECT 1", {}, Exception("could not connect to server")))
    assert other is not None and "credentials" in other
