"""Perturbed and unperturbed episodes, played in an env runner's process (or this one, without remote runners).

The algorithm sends each runner a :class:`RolloutRequest` through
``foreach_env_runner``; :func:`play_perturbations` runs there, with the
runner's own sub-environment, policy copy and generator. It plays mirrored
pairs of episodes (weights plus and minus a perturbation) until it has
``pairs`` of them; each slot is, with probability ``eval_prob``, an episode
with the unperturbed weights instead. The policy's observation filter learns
from every step; a remote runner sends what it gathered back as a delta.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

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
        runner: the env runner whose sub-environment (the only one) and policy copy play.

    Returns:
        The returns, lengths and noise indices, and the filter's delta.
    """
    policy: ESPolicy = runner.policies["default_policy"]
    filter_ = policy.observation_filter
    if runner.worker_index > 0 and filter_ is not None and request.filter_state is not None:
        filter_.set_state(resolve(request.filter_state))  # a remote copy: the learner's statistics
    theta = resolve(request.weights)
    noise = resolve(request.noise)
    dim = policy.num_params
    result = RolloutResult()
    rng = policy.np_rng
    while len(result.noise_indices) < request.pairs:
        if rng.uniform() < request.eval_prob:
            policy.set_flat_weights(theta)
            reward, length = _episode(runner, policy, request, noisy=False)
            result.eval_returns.append(reward)
            result.eval_lengths.append(length)
            continue
        index = int(rng.integers(0, len(noise) - dim + 1))
        perturbation = request.noise_stdev * noise[index : index + dim]
        policy.set_flat_weights(theta + perturbation)
        plus = _episode(runner, policy, request, noisy=True)
        policy.set_flat_weights(theta - perturbation)
        minus = _episode(runner, policy, request, noisy=True)
        result.noise_indices.append(index)
        result.returns.append((plus[0], minus[0]))
        result.lengths.append((plus[1], minus[1]))
    policy.set_flat_weights(theta)  # the learner's own copy, without remote runners, keeps its weights
    if filter_ is not None and filter_.keeps_delta:
        result.filter_delta = filter_.take_delta()
    return result


def _episode(runner: Any, policy: ESPolicy, request: RolloutRequest, noisy: bool) -> tuple[float, int]:
    """One whole episode in the runner's sub-environment; returns its return (less the offset per step) and length."""
    env = runner.base_env
    # seeded from the policy's generator, which checkpoints keep: a resumed run plays the same episodes
    obs, _ = env.reset(seed=int(policy.np_rng.integers(2**31)))
    total, steps = 0.0, 0
    box = isinstance(policy.action_space, gym.spaces.Box)
    while True:
        actions, _ = policy.compute_actions(policy.preprocess(obs, update_filter=True), explore=True)
        if noisy and box and request.action_noise_std > 0:
            actions = actions + policy.np_rng.normal(0.0, request.action_noise_std, actions.shape).astype(actions.dtype)
        obs, rewards, terminated, truncated, _ = env.step(policy.action_adapter(actions))
        total += float(rewards[0]) - abs(request.offset)
        steps += 1
        if terminated[0] or truncated[0]:
            return total, steps
