"""The call-count formula holds exactly, for every component subset, team size and turn count."""

from __future__ import annotations

import itertools

import pytest

from teammed.config import COMPONENTS, TeamworkConfig
from teammed.errors import ConfigError
from teammed.optimizers._space import valid_subsets
from teammed.programs.accounting import expected_calls
from teammed.programs.teamwork import TeamworkProgram
from tests.helpers import run


def _valid_subsets():
    for flags in itertools.product([False, True], repeat=len(COMPONENTS)):
        values = dict(zip(COMPONENTS, flags, strict=True))
        if values["leadership"]:  # the correction authority on (the default) and off
            for correction in (True, False):
                yield {**values, "leader_correction": correction}
            continue
        try:
            TeamworkConfig.build(**values)
        except ConfigError:
            continue
        yield values


SUBSETS = list(_valid_subsets())


def test_every_valid_subset_is_enumerated():
    # the table's valid subsets, those with leadership twice (the correction authority on and off): on the
    # papers' six, 48 + 32 (64 subsets, of which the 16 with mutual monitoring but no leadership are invalid)
    valid = valid_subsets(min_turns=2)
    assert len(SUBSETS) == len(valid) + sum("leadership" in s for s in valid)


@pytest.mark.parametrize("n_turns", [2, 3])
@pytest.mark.parametrize("n_agents", [2, 3, 4])
def test_formula_matches_calls_for_every_subset(n_agents, n_turns):
    for values in SUBSETS:
        config = TeamworkConfig(**values, n_agents=n_agents, n_turns=n_turns)
        prediction, usage, lm = run(TeamworkProgram(config))  # unanimous rankings: no tie
        assert prediction.json_record["tie"] is None
        assert usage.calls == len(lm.calls) == expected_calls(config, n_agents), values
        assert sum(c.signature == "CorrectionAuthority" for c in lm.calls) == int(config.corrects)


def test_auto_count_adds_one_call_and_sets_team_size():
    config = TeamworkConfig(n_agents="auto", leadership=True)
    prediction, usage, _ = run(TeamworkProgram(config),
                               lambda call: {"n_agents": 4} if call.signature == "AgentCount" else None)
    assert len(prediction.json_record["agents"]) == 4
    assert usage.calls == expected_calls(config, 4) == 1 + 4 + 4 * 2 + 2 + 1  # +1: the leader's review


def _split_vote(call):
    """Two agents rank A first, two rank B first: a Borda tie between A and B."""
    if call.signature in ("FinalRanking", "InitialAssessment"):
        role = str(call.inputs.get("role"))
        first = "A" if role.endswith(("1", "3")) else "B"
        second = "B" if first == "A" else "A"
        return {"ranking": [first, second, "C", "D"]}
    return None


@pytest.mark.parametrize("leadership", [False, True])
def test_tie_adds_the_leaders_call_only_with_leadership(leadership):
    config = TeamworkConfig(n_agents=4, leadership=leadership)
    prediction, usage, lm = run(TeamworkProgram(config), _split_vote)
    tie = prediction.json_record["tie"]
    assert tie["tied"] == ["A", "B"]
    assert tie["resolved_by"] == ("leader" if leadership else "rule")
    assert usage.calls == expected_calls(config, 4, tie=True)
    assert sum(c.signature == "TieResolution" for c in lm.calls) == int(leadership)


def test_early_consensus_skips_discussion_and_is_recorded():
    config = TeamworkConfig(n_agents=3, leadership=True, mutual_monitoring=True, early_consensus=1.0)
    prediction, usage, lm = run(TeamworkProgram(config))
    assert prediction.json_record["early_consensus"] is True
    assert usage.calls == expected_calls(config, 3, early_consensus=True) == 3 + 1  # +1: the leader's review
    assert not any(c.signature in ("DiscussionTurn", "FinalRanking", "Mediation") for c in lm.calls)


def test_early_consensus_threshold_not_met_runs_discussion():
    config = TeamworkConfig(n_agents=4, early_consensus=0.8)
    prediction, usage, _ = run(TeamworkProgram(config), _split_vote)
    assert prediction.json_record["early_consensus"] is False
    assert usage.calls == expected_calls(config, 4, tie=False) == 4 + 8


def test_spec_example_base_n3_two_turns():
    # The spec's §4.1 says 15 for Base (N=3, n_turns=2); as built it is 1 + 3 + 6 = 10.
    assert expected_calls(TeamworkConfig(), 3) == 10
    assert expected_calls(TeamworkConfig(n_agents=3), 3) == 9
