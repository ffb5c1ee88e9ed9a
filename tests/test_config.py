from __future__ import annotations

import pytest
from pydantic import ValidationError

from teammed.components import TABLE
from teammed.config import PRESETS, TeamworkConfig, config_from_components, preset
from teammed.errors import ConfigError


def test_default_is_base_and_frozen():
    config = TeamworkConfig()
    assert config.components == ()
    assert config.n_turns == 2 and config.n_agents == "auto" and config.early_consensus is None
    with pytest.raises(ValidationError):
        config.leadership = True  # type: ignore[misc]


def test_mutual_monitoring_requires_leadership_with_rule_and_fix():
    with pytest.raises(ConfigError) as err:
        TeamworkConfig.build(mutual_monitoring=True)
    message = str(err.value)
    assert "mutual_monitoring requires leadership" in message
    assert "leadership=False" in message and "enable leadership" in message


@pytest.mark.parametrize("component", ["mutual_monitoring", "closed_loop"])
def test_between_turn_components_need_two_turns(component):
    with pytest.raises(ConfigError, match=rf"{component} requires n_turns >= 2 \(it acts between discussion turns\)"):
        TeamworkConfig.build(**{component: True, "leadership": True, "n_turns": 1})


@pytest.mark.parametrize("value", [0.5, 0.2, 1.01])
def test_early_consensus_bounds(value):
    with pytest.raises(ConfigError, match="early_consensus"):
        TeamworkConfig.build(early_consensus=value)


@pytest.mark.parametrize("bad", [{"n_agents": 5}, {"n_turns": 0}, {"n_turns": 6}, {"colour": "red"}])
def test_bad_values_refused(bad):
    with pytest.raises(ConfigError):
        TeamworkConfig.build(**bad)


def test_presets_follow_the_spec():
    assert PRESETS["base"].components == ()
    assert set(PRESETS["team_orientation"].components) == {"team_orientation", "leadership"}
    assert set(PRESETS["mutual_monitoring"].components) == {"mutual_monitoring", "leadership", "trust"}
    assert set(PRESETS["c6"].components) == {"shared_mental_model", "leadership", "team_orientation"}
    assert set(PRESETS["c7"].components) == {"leadership", "trust", "mutual_monitoring"}
    # all: the papers' six (a component of one's own joins it only if its record lists "all")
    assert PRESETS["all"].components == tuple(c.name for c in TABLE if c.papers)
    # The spec's C5 (MM with L and T) and C7 (L, T, MM) are the same set: one config, two names.
    assert PRESETS["c7"] == PRESETS["mutual_monitoring"]


def test_preset_overrides_and_suggestions():
    assert preset("all", n_turns=3).n_turns == 3
    with pytest.raises(ConfigError, match="Did you mean 'leadership'"):
        preset("leadershp")


def test_components_short_names():
    config = config_from_components("smm,l,mm", n_agents=3)
    assert set(config.components) == {"shared_mental_model", "leadership", "mutual_monitoring"}
    assert config.n_agents == 3
    with pytest.raises(ConfigError, match="unknown component"):
        config_from_components("telepathy")
    with pytest.raises(ConfigError, match="requires leadership"):
        config_from_components("mm")
