"""The Python API refuses what the CLI refuses (issue 47, item 7), and takes a mapping of a spec's fields."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from teammed import experiments as ex
from teammed.cli import main


@pytest.mark.parametrize(("field", "flag"), [("timeout", "--timeout"), ("temperature", "--temperature"),
                                             ("retry_cap", "--retry-cap"), ("retry_base", "--retry-base")])
@pytest.mark.parametrize("value", [math.inf, math.nan])
def test_an_infinite_or_nan_setting_is_refused_as_the_flag_is(field: str, flag: str, value: float, capsys) -> None:
    with pytest.raises(ValidationError, match="finite number"):
        ex.BackendSpec(**{field: value})
    with pytest.raises(SystemExit) as refused:
        main(["run", "--dataset", "demo", "--model", "scripted", flag, str(value)])
    assert refused.value.code == 2


def test_repeated_seeds_and_no_run_directory_are_refused() -> None:
    with pytest.raises(ValidationError, match="seeds 111 named twice"):
        ex.RunSpec(data="demo", seeds=(111, 111))
    with pytest.raises(ValidationError, match="named twice"):
        ex.ReproduceSpec(seeds=(1, 2, 1))
    with pytest.raises(ValidationError, match="at least 1 item"):
        ex.ReportSpec(dirs=())


def test_a_mapping_of_fields_runs_and_anything_else_names_the_spec(tmp_path) -> None:
    done = ex.run({"data": "demo", "backend": "scripted", "n": 2, "out": str(tmp_path / "r")})
    assert len(done.cells) == 1 and done.cells[0].out.is_dir()
    with pytest.raises(TypeError, match=r"expected a RunSpec .* teammed.experiments.RunSpec"):
        ex.run(42)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        ex.run({"data": "demo", "backend": "scripted", "no_such_field": 1})


def test_a_cost_ratio_without_the_adaptive_front_is_refused(capsys) -> None:
    with pytest.raises(ValidationError, match="add adaptive"):
        ex.SearchSpec(data="demo", max_cost_ratio=0.5)
    assert ex.SearchSpec(data="demo", max_cost_ratio=0.5, adaptive=True).max_cost_ratio == 0.5
    assert main(["search", "--dataset", "demo", "--model", "scripted", "--max-cost-ratio", "0.5"]) == 2
    assert "--adaptive" in capsys.readouterr().err
