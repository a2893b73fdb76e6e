"""An env runner's state for checkpoints: where sampling stands, as JSON, and its restore.

Both kinds of runner save their generator, their next episode id and what
they were built for (the env, its config, the number of sub-environments): a
state saved by a runner built otherwise (``from_checkpoint`` with overrides,
as ``corral evaluate`` does) is not used, and the runner starts afresh. A
single-agent runner adds its counters, observations and the vector env's
state; a multi-agent runner each sub-environment's episode, to be replayed,
and the rows still open. Restored into a runner built from the same config,
the next sample call continues exactly where the saved one would. The
policies are not included (the algorithm saves them).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.core.common import state_codec
from corral.core.common.spaces import ObservationCheck
from corral.core.environments.env_state import get_env_state, set_env_state
from corral.core.environments.envs import env_name
from corral.core.environments.multi_agent_guard import plain_agent_id
from corral.core.sampling.base_env_runner import BaseEnvRunner
from corral.core.seeding import generator_state, set_generator_state

if TYPE_CHECKING:
    from corral.core.sampling.env_runner import EnvRunner
    from corral.core.sampling.multi_agent_env_runner import MultiAgentEnvRunner

logger = logging.getLogger("corral")


def built_for(runner: BaseEnvRunner) -> dict[str, Any]:
    """What every runner's saved state depends on: the env, its config and how many sub-environments.

    Args:
        runner: the runner.

    Returns:
        The ``built_for`` entry of its state (a kind of runner adds to it).
    """
    config = runner.config
    return {
        "env": env_name(config.env),
        "env_config": json.dumps(config.env_config, sort_keys=True, default=str),
        "num_envs": runner.num_envs,
    }


def state_fits(runner: BaseEnvRunner, state: dict[str, Any], built: dict[str, Any]) -> bool:
    """Whether ``state`` was saved by a runner built as this one; if not, the log says new episodes start.

    Args:
        runner: the runner restoring.
        state: the saved state.
        built: what ``runner`` was built for (:func:`built_for`, and what its kind adds).
    """
    if state.get("built_for") != built:
        logger.info("env runner %d starts new episodes: it is not built as the one whose state was saved", runner.worker_index)
        return False
    return True


def saved_episode_id(value: Any) -> int:
    """An episode id read back from a checkpoint, checked to be an integer.

    Raises:
        ValueError: it is not one.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"a saved episode id must be an integer, not {value!r:.40}")
    return value


def restore_generator(runner: BaseEnvRunner, state: dict[str, Any]) -> None:
    """Set the runner's generator and next episode id as saved.

    Args:
        runner: the runner restoring.
        state: the saved state (``np_rng`` and, optionally, ``next_episode_id``).

    Raises:
        ValueError: a saved value is malformed.
    """
    set_generator_state(runner.np_rng, state["np_rng"])
    runner.next_episode_id = saved_episode_id(state.get("next_episode_id", runner.next_episode_id))


# ---------------------------------------------------------------------- #
# the single-agent runner
# ---------------------------------------------------------------------- #
def _env_runner_built_for(runner: EnvRunner) -> dict[str, Any]:
    """As for every runner, and how the sub-environments are stepped."""
    return {**built_for(runner), "stepped_in_a_loop": not runner._native}


def env_runner_state(runner: EnvRunner) -> dict[str, Any]:
    """The single-agent runner's generator, the episodes in progress and the environments' state, as JSON.

    Args:
        runner: the runner.

    Returns:
        What :func:`set_env_runner_state` restores.
    """
    state: dict[str, Any] = state_codec.encode(  # a dict encodes to a dict
        {
            "built_for": _env_runner_built_for(runner),
            "np_rng": generator_state(runner.np_rng),
            "obs": runner._obs,
            "reset_pending": runner._reset_pending,
            "discarding": runner._discarding,
            "ep_return": runner._ep_return,
            "ep_len": runner._ep_len,
            "next_episode_id": runner.next_episode_id,
            "episode_ids": [None if episode_id < 0 else int(episode_id) for episode_id in runner._episode_ids],
            "env": get_env_state(runner.base_env) if runner._obs is not None else None,
            "recurrent": None if runner._carry is None else runner._carry.get_state(),
        }
    )
    return state


def set_env_runner_state(runner: EnvRunner, state: dict[str, Any]) -> None:
    """Restore :func:`env_runner_state`; the environments are brought to the same point (see ``environments.env_state``).

    Args:
        runner: the runner, built from the same config.
        state: the saved state.

    Raises:
        ValueError: the state is malformed.
    """
    if not isinstance(state, dict):
        raise ValueError("an env runner state must be a dict")
    if not state_fits(runner, state, _env_runner_built_for(runner)):
        return
    state = state_codec.decode(state)
    n = runner.num_envs
    counters = {key: np.asarray(state[key]) for key in ("reset_pending", "ep_return", "ep_len")}
    for key, value in counters.items():
        if value.shape != (n,):
            raise ValueError(f"env runner state {key!r} has shape {value.shape}, this runner {n} sub-environments")
    restore_generator(runner, state)
    if state["obs"] is None:
        runner._obs = None
        return
    episode_ids = state.get("episode_ids") or [None] * n
    if not isinstance(episode_ids, list) or len(episode_ids) != n:
        raise ValueError(f"env runner state 'episode_ids' must list {n} ids, one per sub-environment")
    found = (
        None
        if runner.config.disable_env_checking
        else ObservationCheck(runner.observation_space).problem(state["obs"], batched=True)
    )
    if found is not None:
        raise ValueError(f"the saved observations of sub-environment {found[0]} {found[1]}")
    set_env_state(runner.base_env, state["env"], counters["reset_pending"])
    runner._obs = state["obs"]
    runner._reset_pending = counters["reset_pending"].astype(bool)
    runner._ep_return = counters["ep_return"].astype(np.float64)
    runner._ep_len = counters["ep_len"].astype(np.int64)
    discarding = np.asarray(state.get("discarding", np.zeros(n, dtype=bool)), dtype=bool)
    if discarding.shape != (n,):
        raise ValueError(f"env runner state 'discarding' has shape {discarding.shape}, this runner {n} sub-environments")
    runner._discarding = discarding
    runner._carry = None
    if state.get("recurrent") is not None:  # a recurrent policy's state in each sub-environment
        carry = runner._recurrent_carry(runner.policy)
        if carry is None:
            raise ValueError("the env runner state holds a recurrent policy's state, but this runner's policy has no memory")
        carry.set_state(state["recurrent"])
    runner._resume_episodes(episode_ids)


# ---------------------------------------------------------------------- #
# the multi-agent runner
# ---------------------------------------------------------------------- #
def _multi_agent_built_for(runner: MultiAgentEnvRunner) -> dict[str, Any]:
    """As for every runner, the policies, and whether output is written.

    The open rows of a runner that writes output hold its columns (``eps_id``, ...);
    a runner that does not (or the other way round) starts its episodes anew.
    """
    built = {**built_for(runner), "policies": sorted(runner.policies)}
    return {**built, "writes_output": True} if runner.output is not None else built


def multi_agent_runner_state(runner: MultiAgentEnvRunner) -> dict[str, Any]:
    """The multi-agent runner's generator, each sub-environment's episode and the rows still open, as JSON.

    Each episode is kept as its reset and action dicts (see
    :class:`~corral.core.environments.multi_agent_guard.MultiAgentEnvGuard`), with
    the agents waiting to act, their policies, the episode's statistics and the
    open rows (an agent that acted and waits for its next turn). If an episode
    cannot be replayed (too long, or agent ids that are not strings or integers),
    only the generator is kept and every sub-environment starts anew after a restore.

    Args:
        runner: the runner.

    Returns:
        What :func:`set_multi_agent_runner_state` restores.
    """
    state: dict[str, Any] = {
        "built_for": _multi_agent_built_for(runner),
        "np_rng": generator_state(runner.np_rng),
        "next_episode_id": runner.next_episode_id,
    }
    if runner._obs is not None:
        episodes = [_episode_state(runner, i) for i in range(runner.num_envs)]
        if all(episode is not None for episode in episodes):
            state["episodes"] = episodes
            state["open_rows"] = runner._collector.get_state()
            state["recurrent"] = state_codec.encode(runner._carry.get_state())
    return state


def _episode_state(runner: MultiAgentEnvRunner, i: int) -> dict[str, Any] | None:
    """Sub-environment ``i``'s episode as JSON, None if it cannot be replayed."""
    assert runner._obs is not None
    if runner._reset_pending[i]:
        return {"reset_pending": True}
    record = runner.envs[i].episode_record()
    episode = runner._episodes[i]
    agents = {*runner._obs[i], *runner._open[i], *episode._policies, *episode.agent_steps}
    if record is None or not all(plain_agent_id(agent) for agent in agents):
        return None
    return {
        "reset_pending": False,
        "discarding": bool(runner._discarding[i]),
        "record": record,
        "obs": state_codec.encode([[agent, obs] for agent, obs in runner._obs[i].items()]),
        "open": list(runner._open[i]),
        "episode_id": episode.episode_id,
        "length": episode.length,
        "total_reward": episode.total_reward,
        "agent_rewards": [[agent, policy_id, reward] for (agent, policy_id), reward in episode.agent_rewards.items()],
        "agent_steps": [[agent, steps] for agent, steps in episode.agent_steps.items()],
        "policies": [[agent, policy_id] for agent, policy_id in episode._policies.items()],
    }


def set_multi_agent_runner_state(runner: MultiAgentEnvRunner, state: dict[str, Any]) -> None:
    """Restore :func:`multi_agent_runner_state`: the generator, and each sub-environment's episode replayed to where it was.

    A state without its episodes starts new episodes, as one saved by a runner built otherwise does.

    Args:
        runner: the runner, built from the same config.
        state: the saved state.

    Raises:
        ValueError: the state is malformed, names a policy the runner lacks, or an episode does not replay.
    """
    if not isinstance(state, dict) or "np_rng" not in state:
        raise ValueError("a multi-agent env runner state must be a dict with the runner's generator")
    runner._obs = None
    runner._forget_open_rows()
    if not state_fits(runner, state, _multi_agent_built_for(runner)):
        return
    restore_generator(runner, state)
    episodes = state.get("episodes")
    if episodes is None:
        logger.info("multi-agent env runner %d starts new episodes after the restore", runner.worker_index)
        return
    n = runner.num_envs
    if not isinstance(episodes, list) or len(episodes) != n or not all(isinstance(e, dict) for e in episodes):
        raise ValueError(f"a multi-agent env runner state must hold {n} episodes, one per sub-environment")
    runner._obs = [{} for _ in range(n)]
    runner._episodes = [runner._new_episode(i, episode_id=-1) for i in range(n)]
    for i, saved in enumerate(episodes):
        runner._reset_pending[i] = bool(saved.get("reset_pending"))
        runner._discarding[i] = bool(saved.get("discarding"))
        if not runner._reset_pending[i]:
            _restore_episode(runner, i, saved)
    runner._collector.set_state(state.get("open_rows"), runner.policies)
    runner._carry.set_state(state_codec.decode(state.get("recurrent", [])), runner.policies)
    if runner.callbacks.has_episode_start:  # callbacks see the episodes in progress anew (their user_data is not saved)
        for i, episode in enumerate(runner._episodes):
            if not runner._reset_pending[i]:
                runner.callbacks.episode_start(episode, runner, i)


def _restore_episode(runner: MultiAgentEnvRunner, i: int, saved: dict[str, Any]) -> None:
    """Replay sub-environment ``i``'s saved episode and take back its statistics, observations and open rows."""
    assert runner._obs is not None
    try:
        runner.envs[i].replay(saved["record"])
        episode = runner._episodes[i] = runner._new_episode(i, episode_id=saved_episode_id(saved["episode_id"]))
        episode.length, episode.total_reward = int(saved["length"]), float(saved["total_reward"])
        episode.agent_rewards = {(agent, str(policy_id)): float(r) for agent, policy_id, r in saved["agent_rewards"]}
        episode.agent_steps = {agent: int(steps) for agent, steps in saved["agent_steps"]}
        episode._policies = dict(saved["policies"])
        runner._obs[i] = dict(state_codec.decode(saved["obs"]))
        runner._open[i] = dict.fromkeys(saved["open"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"the saved episode of sub-environment {i} is malformed: {exc!r}") from None
    unknown = sorted({str(p) for p in episode._policies.values()} - set(runner.policies))
    if unknown:
        raise ValueError(f"the saved episode of sub-environment {i} maps agents to {unknown}, which are not policies")
    episode.last_observations.update(runner._obs[i])
