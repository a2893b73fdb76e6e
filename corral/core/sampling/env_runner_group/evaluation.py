"""Evaluation rounds on a group's remote runners: calls started at once, collected when they end.

A round splits its episodes (or timesteps) across the healthy runners; with
``evaluation_duration="auto"`` each runner runs one episode at a time, and
another as each ends, until the round is finished. Training goes on while a
round is in flight.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from corral.core.sampling.base_env_runner import evaluation_span
from corral.core.sampling.env_runner_group.remote_runners import RemoteRunners
from corral.core.sampling.metrics import EpisodeSummary
from corral.errors import EnvRunnerError

logger = logging.getLogger("corral")


@dataclasses.dataclass
class EvaluationRound:
    """Evaluation calls in flight on the remote runners, started by :meth:`EnvRunnerGroup.start_episodes`."""

    state: Any
    """the published sampling state every call acts with (a Ray object reference)"""
    explore: bool
    """whether the calls act with exploration"""
    pending: dict[int, Any]
    """by runner index: its call in flight"""
    continuous: bool = False
    """``evaluation_duration="auto"``: a runner whose episode ended starts another, until the round is finished"""
    episodes: list[EpisodeSummary] = dataclasses.field(default_factory=list)
    """the episodes of the calls that have ended"""


def start_round(runners: RemoteRunners, state: Any, duration: int | str, unit: str, explore: bool) -> EvaluationRound:
    """Start evaluating on the healthy runners with the published ``state`` (see ``EnvRunnerGroup.start_episodes``).

    Args:
        runners: the group's remote runners.
        state: the published sampling state (a Ray object reference).
        duration: episodes or timesteps in all, split as evenly as possible (a runner
            whose share is 0 gets no call); or ``"auto"``: one episode on each runner.
        unit: ``"episodes"`` or ``"timesteps"``.
        explore: act with exploration.

    Returns:
        The round in flight.

    Raises:
        EnvRunnerError: no healthy remote runner is left.
    """
    healthy = runners.healthy_remote_ids()
    if not healthy:
        raise EnvRunnerError("no remote env runner is left to evaluate on")
    if duration == "auto":
        pending = {
            index: runners.remote_env_runner(index).run_episodes.remote(state, explore, num_episodes=1) for index in healthy
        }
        return EvaluationRound(state, explore, pending, continuous=True)
    assert isinstance(duration, int)
    shares = [duration // len(healthy) + (i < duration % len(healthy)) for i in range(len(healthy))]
    pending = {
        index: runners.remote_env_runner(index).run_episodes.remote(state, explore, **evaluation_span(share, unit))
        for index, share in zip(healthy, shares, strict=True)
        if share > 0
    }
    return EvaluationRound(state, explore, pending)


def continue_round(runners: RemoteRunners, round_: EvaluationRound) -> None:
    """Collect the episodes of a continuous round's ended calls and start the next episode on each such runner.

    Args:
        runners: the group's remote runners.
        round_: the round; a round that is not continuous, or has no call in flight, is left as it is.
    """
    if not round_.continuous or not round_.pending:
        return
    done = runners.ended(list(round_.pending.values()), timeout=0)
    ended = {index: ref for index, ref in round_.pending.items() if ref in done}
    for episodes in runners.gather(ended).values():
        round_.episodes.extend(episodes)
    for index in ended:
        del round_.pending[index]
        if index in runners.healthy_remote_ids():
            actor = runners.remote_env_runner(index)
            round_.pending[index] = actor.run_episodes.remote(round_.state, round_.explore, num_episodes=1)


def finish_round(runners: RemoteRunners, round_: EvaluationRound, timeout: float | None) -> list[EpisodeSummary]:
    """The episodes of a round, once its calls end (a failed runner's are left out).

    Args:
        runners: the group's remote runners.
        round_: the round.
        timeout: ``evaluation_sample_timeout_s``: a call still running then is given up,
            and its runner restarted before the next call, so nothing queues behind it.

    Returns:
        The round's episodes.
    """
    pending = round_.pending
    done = runners.ended(list(pending.values()), timeout)
    late = sorted(index for index, ref in pending.items() if ref not in done)
    if late:
        logger.warning(
            "evaluation runners %s did not finish within evaluation_sample_timeout_s=%s; their episodes are left out "
            "and they are restarted. Evaluate fewer episodes (evaluation_duration) or raise the timeout.",
            late, timeout,
        )  # fmt: skip
        runners.give_up(late)
    finished = {index: ref for index, ref in pending.items() if index not in late}
    return round_.episodes + [episode for episodes in runners.gather(finished).values() for episode in episodes]
