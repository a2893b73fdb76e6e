"""Perturbed and unperturbed episodes, played in an env runner's process (or this one, without remote runners).

The algorithm sends each runner a :class:`RolloutRequest` through
``foreach_env_runner``; :func:`play_perturbations` runs there, with the
runner's own sub-environments, policy copy and generator. It plays mirrored
pairs of episodes (weights plus and minus a perturbation) until it has
``pairs`` of them; each slot is, with probability ``eval_prob``, an episode
with the unperturbed weights instead. The episodes are played side by side,
one per sub-environment (``num_envs_per_env_runner`` at a time), each with its
own weights. The policy's observation filter learns from every step of every
episode (none after an episode's end); a remote runner sends what it gathered
back as a delta.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from corral.plugins.es.noise import resolve
from corral.plugins.es.policy import ESPolicy


@dataclass(frozen=True)
class RolloutRequest:
    """What a runner needs to play one round of episodes."""

    weights: Any
    """the unperturbed weights: a vector, or its Ray reference"""
    noise: Any
    """the noise table, or its Ray reference"""
    filter_state: Any
    """the learner policy's observation filter (``MeanStdFilter.get_state``), its Ray reference, or None"""
    pairs: int
    """mirrored pairs of perturbed episodes to play"""
    noise_stdev: float
    eval_prob: float
    action_noise_std: float
    offset: float = 0.0


@dataclass
class RolloutResult:
    """What a runner played, for the update."""

    noise_indices: list[int] = field(default_factory=list)
    returns: list[tuple[float, float]] = field(default_factory=list)
    """by perturbation, the returns with the weights plus and minus it"""
    lengths: list[tuple[int, int]] = field(default_factory=list)
    eval_returns: list[float] = field(default_factory=list)
    eval_lengths: list[int] = field(default_factory=list)
    filter_delta: dict[str, Any] | None = None
    """the observation statistics a remote runner gathered (None in the learner's own process: its filter learned them)"""


def play_perturbations(request: RolloutRequest, runner: Any) -> RolloutResult:
    """Play ``request.pairs`` mirrored pairs of perturbed episodes (and the unperturbed ones ``eval_prob`` draws).

    Args:
        request: the round.
        runner: the env runner whose sub-environments and policy copy play.

    Returns:
        The returns, lengths and noise indices, and the filter's delta.
    """
    policy: ESPolicy = runner.policies["default_policy"]
    filter_ = policy.observation_filter
    if runner.worker_index > 0 and filter_ is not None and request.filter_state is not None:
        filter_.set_state(resolve(request.filter_state))  # a remote copy: the learner's statistics
    theta = resolve(request.weights)
    noise = resolve(request.noise)
    # the round's episodes, as (where the perturbation starts, its sign); sign 0 plays theta itself
    episodes: list[tuple[int, int]] = []
    rng, pairs = policy.np_rng, 0
    while pairs < request.pairs:
        if rng.uniform() < request.eval_prob:
            episodes.append((0, 0))
            continue
        index = int(rng.integers(0, len(noise) - theta.size + 1))  # theta: the policy's weights, flat
        episodes += [(index, 1), (index, -1)]
        pairs += 1
    slots = runner.base_env.num_envs
    outcomes: list[tuple[float, int]] = []
    for begin in range(0, len(episodes), slots):
        outcomes += _side_by_side(runner, policy, request, theta, noise, episodes[begin : begin + slots])
    policy.set_flat_weights(theta)  # the learner's own copy, without remote runners, keeps its weights
    result = RolloutResult()
    for k, ((index, sign), (reward, length)) in enumerate(zip(episodes, outcomes, strict=True)):
        if sign == 0:
            result.eval_returns.append(reward)
            result.eval_lengths.append(length)
        elif sign > 0:  # its mirror, minus, is the next episode
            result.noise_indices.append(index)
            result.returns.append((reward, outcomes[k + 1][0]))
            result.lengths.append((length, outcomes[k + 1][1]))
    if filter_ is not None and filter_.keeps_delta:
        result.filter_delta = filter_.take_delta()
    return result


def _side_by_side(
    runner: Any, policy: ESPolicy, request: RolloutRequest, theta: np.ndarray, noise: np.ndarray, episodes: list[tuple[int, int]]
) -> list[tuple[float, int]]:
    """Whole episodes, one per sub-environment, each with its weights; their returns (less the offset a step) and lengths.

    Sub-environments past ``len(episodes)`` step with the unperturbed weights, and nothing they do counts.
    """
    env = runner.base_env
    slots = env.num_envs
    weights = np.repeat(theta[None, :], slots, axis=0)
    for row, (index, sign) in enumerate(episodes):
        if sign:
            weights[row] += sign * (request.noise_stdev * noise[index : index + theta.size])
    act = policy.side_by_side(weights)
    # seeded from the policy's generator, which checkpoints keep: a resumed run plays the same episodes
    obs, _ = env.reset(seed=int(policy.np_rng.integers(2**31)))
    live = np.arange(slots) < len(episodes)
    noisy = np.array([sign != 0 for _, sign in episodes] + [False] * (slots - len(episodes)))
    box = isinstance(policy.action_space, gym.spaces.Box) and request.action_noise_std > 0
    returns, lengths = np.zeros(slots), np.zeros(slots, dtype=np.int64)
    while live.any():
        actions = act(policy.preprocess(obs, update_filter=live))
        if box:  # Gaussian noise on the perturbed episodes' actions
            mask = noisy.reshape(-1, *[1] * (actions.ndim - 1))
            actions = actions + (mask * policy.np_rng.normal(0.0, request.action_noise_std, actions.shape)).astype(actions.dtype)
        obs, rewards, terminated, truncated, _ = env.step(policy.action_adapter(actions))
        returns[live] += np.asarray(rewards, dtype=np.float64)[live] - abs(request.offset)
        lengths[live] += 1
        live &= ~(np.asarray(terminated) | np.asarray(truncated))  # an ended episode's sub-environment idles on
    return [(float(returns[row]), int(lengths[row])) for row in range(len(episodes))]
