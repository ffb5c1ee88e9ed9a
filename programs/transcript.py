"""The readable transcript of a deliberation, derived from its typed record (a pure function)."""

from __future__ import annotations

from teammed.deliberation import Deliberation, RoundTwo, Team
from teammed.programs.context import format_trust
from teammed.programs.team import Transcript
from teammed.results import TranscriptEvent

__all__ = ["transcript_of", "rationale_of"]


def transcript_of(d: Deliberation, *, team: Team, r2: RoundTwo) -> list[TranscriptEvent]:
    """Who said what, in which phase, in the order the algorithm runs the phases."""
    t = Transcript()
    _round_one(t, team)
    _round_two(t, d, team=team, r2=r2)
    if d.early_consensus:
        t.add("R3", "early_consensus", "Round-2 first choices agree; discussion skipped.")
    for number in sorted({v.turn for v in d.turns}):
        _turn(t, d, number, role=team.role_of)
    _aggregation(t, d)
    return t.events


def _round_one(t: Transcript, team: Team) -> None:
    """The team's size and why, the question's analysis, and who was recruited."""
    if team.count_reason or team.count_fell_back:
        said = team.count_reason if not team.count_fell_back else (
            f"the count named no team size; the default of {len(team.agents)} stands. {team.count_reason}".strip())
        t.add("R1", "agent_count", said, n_agents=len(team.agents), fell_back=team.count_fell_back)
    if team.question_analysis:
        t.add("R1", "question_analysis", team.question_analysis)
    for a in team.agents:
        t.add("R1", "recruited", a.brief(), agent=a.id, role=a.role, weight=a.weight)


def _round_two(t: Transcript, d: Deliberation, *, team: Team, r2: RoundTwo) -> None:
    """Each agent's assessment, the verified facts, the leader's report and the trust it earned."""
    role = team.role_of
    for a in d.r2:
        t.add("R2", "assessment", a.justification, agent=a.agent, role=role[a.agent], ranking=a.ranking,
              confidence=a.confidence, facts=a.facts, fell_back=a.fell_back)
    if d.smm.verified_facts:
        t.add("R2", "verified_facts", "\n".join(d.smm.verified_facts))
    if d.report:
        t.add("R2", "formal_report", d.report, agent="leader", role="Leader")
    post_r2 = next((s for s in d.trust_history if s.stage == "post_r2"), None)
    if post_r2 is not None:
        t.add("R2", "trust_update", format_trust(post_r2.scores), quality=r2.quality)


def _turn(t: Transcript, d: Deliberation, number: int, *, role: dict[str, str]) -> None:
    """One turn of the discussion: what each agent said, the leader's mediation, the closed loops and
    the challenges."""
    for said in [x for x in d.turns if x.turn == number]:
        final = said.ranking is not None
        t.add("R3", "final_ranking" if final else "discussion", said.message, agent=said.agent,
              role=role.get(said.agent), turn=number, choice=said.choice, ranking=said.ranking,
              confidence=said.confidence, fell_back=said.fell_back)
    if number - 1 < len(d.mediations):
        t.add("R3", "mediation", d.mediations[number - 1], agent="leader", role="Leader", turn=number)
    for loop in [lp for lp in d.closed_loop if lp.turn == number]:
        t.add("CL", "closed_loop", loop.restatement, agent=loop.receiver, turn=number, sender=loop.sender,
              confirmed=loop.confirmed, correction=loop.correction)
    for ch in [c for c in d.challenges if c.turn == number]:
        t.add("MM", "challenge", ch.concern, agent=ch.agent, role=role.get(ch.agent), turn=number,
              severity=ch.severity, response=ch.response, verdict=ch.verdict, choice_before=ch.choice_before,
              choice_after=ch.choice_after, trust_before=ch.trust_before, trust_after=ch.trust_after)


def _aggregation(t: Transcript, d: Deliberation) -> None:
    """The tie break, the vote and the leader's review of it."""
    if d.tie is not None:
        t.add("AGG", "tie_break", d.tie.reason, agent="leader" if d.tie.leader_pick is not None else None,
              **d.tie.model_dump(mode="json"))
    t.add("AGG", "vote", f"{d.aggregation}: " + ", ".join(f"{k}={v:.2f}" for k, v in d.scores.items()),
          answer=d.tie.answer if d.tie else max(d.scores, key=lambda k: d.scores[k]), abstained=d.abstained)
    if d.leader_override is not None:
        o = d.leader_override
        t.add("AGG", "leader_override" if o.overridden else "leader_review", o.flaw or "upheld", agent="leader",
              role="Leader", **o.model_dump(mode="json"))


def rationale_of(d: Deliberation, *, team: Team, options: dict[str, str]) -> str:
    """The answer, the vote behind it, the backers' reasons, the facts and the leader's last word."""
    answer = d.answer
    scores = ", ".join(f"{k} {v:.2f}" for k, v in sorted(d.scores.items(), key=lambda kv: -kv[1]))
    o = d.leader_override
    if o is not None and o.overridden:  # the leader's correction decided, not the vote
        lines = [f"Answer {answer} ({options[answer]}) by the leader's correction of the team's {o.original} "
                 f"({d.aggregation.replace('_', ' ')}: {scores})",
                 f"The leader overrode the team's {o.original} with {o.answer}: {o.flaw}"]
    else:
        lines = [f"Answer {answer} ({options[answer]}) by {d.aggregation.replace('_', ' ')}: {scores}"]
    lines += [f"- {v.agent} ({team.role_of.get(v.agent, '?')}): {v.rationale}"
              for v in d.final if v.first == answer and v.rationale and not v.fell_back]
    if d.smm.verified_facts:
        lines.append("Verified facts: " + "; ".join(d.smm.verified_facts))
    if d.mediations:
        lines.append("Leader's synthesis: " + d.mediations[-1])
    return "\n".join(lines)
