"""The ES and ARS algorithms: perturb the weights, play episodes with each perturbation, step along the better ones.

Each iteration the learner's weights and the noise table go to the env
runners (one object-store copy each; the table once per run), which play
mirrored pairs of episodes in parallel (:mod:`corral.plugins.es.rollouts`).
The returns weight the perturbations into a gradient estimate, which the
policy's optimizer follows (Adam for ES, SGD for ARS) through the NaN guard.
The episodes played with the unperturbed weights (``eval_prob`` of the slots)
are the run's episodes: ``episode_reward_mean`` is their mean over the last
``report_length`` iterations, as RLlib reports it. Without remote runners
the learner's own runner plays them, and a seed gives the same run.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from typing import Any, ClassVar, cast

import numpy as np

from corral.core import PLUGIN_API_VERSION, Algorithm, AlgorithmConfig, ConfigError, restored_count
from corral.core.learning.learners.learner_group import ensure_ray
from corral.core.sampling.metrics import EpisodeHistory, EpisodeSummary
from corral.errors import EnvRunnerError
from corral.plugins.es.config import ARSConfig, ESConfig, EvolutionConfig
from corral.plugins.es.noise import centered_ranks, shared_noise, weighted_noise_sum
from corral.plugins.es.policy import ESPolicy
from corral.plugins.es.rollouts import RolloutRequest, RolloutResult, play_perturbations


class ES(Algorithm):
    """OpenAI's evolution strategies (RLlib's ``ES``): centered-rank returns of mirrored perturbations, Adam."""

    config_class: ClassVar[type[AlgorithmConfig]] = ESConfig
    config: EvolutionConfig
    policy_class = ESPolicy
    corral_api = PLUGIN_API_VERSION

    def setup(self, config: Any = None) -> None:
        """Check the policy fits the noise table, then make the table (once, in the object store with remote runners).

        Raises:
            ConfigError: a multi-agent env, or a noise table shorter than the policy's weights.
        """
        group = self.env_runner_group
        if group.is_multi_agent:
            raise ConfigError(f"{self.name} perturbs one policy in a single-agent env; train multi-agent envs with PPO")
        dim = self._perturbed.num_params
        if self.config.noise_size < dim:
            raise ConfigError(
                f"noise_size={self.config.noise_size} is shorter than the policy's {dim} weights; a perturbation is a "
                f"slice of the table: make noise_size several times {dim}"
            )
        self.noise, self._noise_handle = shared_noise(self.config.noise_size, on_ray=group.num_healthy_remote_runners > 0)
        self.episodes_so_far = 0

    def new_episode_history(self) -> EpisodeHistory:
        """The unperturbed episodes of the last ``report_length`` iterations (RLlib's reported return)."""
        return IterationHistory(self.config.report_length)

    @property
    def _perturbed(self) -> ESPolicy:
        """The one policy (ES and ARS perturb one)."""
        return cast(ESPolicy, self.policies["default_policy"])

    def training_step(self) -> dict[str, dict[str, Any]]:
        """Play this iteration's perturbed episodes on the runners, then step the weights along their returns.

        Returns:
            RLlib's info of the step (``weights_norm``, ``grad_norm``, ``update_ratio``, ``episodes_this_iter``,
            ``episodes_so_far``) as the policy's learner stats.
        """
        policy = self._perturbed
        theta = policy.get_flat_weights()
        results = self._play(theta)
        indices = np.array([i for r in results for i in r.noise_indices], dtype=np.int64)
        returns = np.array([pair for r in results for pair in r.returns], dtype=np.float32).reshape(-1, 2)
        lengths = np.array([pair for r in results for pair in r.lengths], dtype=np.int64).reshape(-1, 2)
        steps = int(lengths.sum())
        for key in ("num_env_steps_sampled", "num_agent_steps_sampled", "num_env_steps_trained", "num_agent_steps_trained"):
            self.counters[key] += steps
        self.episodes_so_far += lengths.size
        unperturbed = [zip(r.eval_returns, r.eval_lengths, strict=True) for r in results]
        self.env_runner_group.add_metrics([EpisodeSummary(reward, length) for pairs in unperturbed for reward, length in pairs])
        gradient = self.gradient(indices, returns, theta)
        policy.apply_flat_gradient(gradient)
        new_theta = policy.get_flat_weights()
        stats = {
            "weights_norm": float(np.square(new_theta).sum()),
            "grad_norm": float(np.square(gradient).sum()),
            "update_ratio": float(np.linalg.norm(new_theta - theta) / max(np.linalg.norm(theta), 1e-12)),
            "episodes_this_iter": int(lengths.size),
            "episodes_so_far": self.episodes_so_far,
        }
        return {"default_policy": stats}

    def episodes_wanted(self) -> tuple[int, int]:
        """Perturbed episodes and env steps an iteration plays at least: ``episodes_per_batch`` and ``train_batch_size``."""
        assert isinstance(self.config, ESConfig)
        return self.config.episodes_per_batch, self.config.train_batch_size

    def gradient(self, indices: np.ndarray, returns: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """ES's step direction: minus the centered-rank estimate of the return's gradient, plus ``l2_coeff`` x the weights.

        Args:
            indices: where each perturbation's slice of the noise table starts.
            returns: ``[n, 2]``, each perturbation's returns with the weights plus and minus it.
            theta: the weights the perturbations were added to.

        Returns:
            The gradient the optimizer descends.
        """
        assert isinstance(self.config, ESConfig)
        ranks = centered_ranks(returns)
        estimate = weighted_noise_sum(ranks[:, 0] - ranks[:, 1], indices, self.noise, theta.size) / returns.size
        return -estimate + self.config.l2_coeff * theta

    def _play(self, theta: np.ndarray) -> list[RolloutResult]:
        """Rounds of episodes on every healthy runner until the iteration has what :meth:`episodes_wanted` says.

        Each round asks every runner for an equal share of the pairs still missing (from the mean episode length so
        far, for the steps); the filters' deltas go into the learner's filter as each round ends.
        """
        group, cfg, policy = self.env_runner_group, self.config, self._perturbed
        min_episodes, min_steps = self.episodes_wanted()
        remote = group.num_healthy_remote_runners > 0
        put = ensure_ray().put if remote else (lambda value: value)  # one object-store copy for every runner
        weights = put(theta)
        results: list[RolloutResult] = []
        episodes = steps = 0
        while episodes < min_episodes or steps < min_steps:
            group.replace_failed()
            if remote and not group.num_healthy_remote_runners:
                raise EnvRunnerError("every remote env runner failed; no episodes are left to play")
            runners = max(1, group.num_healthy_remote_runners)
            pairs = math.ceil(max(min_episodes - episodes, 0) / 2 / runners)
            if steps < min_steps and episodes:
                pairs = max(pairs, math.ceil((min_steps - steps) / (steps / episodes) / 2 / runners))
            filter_ = policy.observation_filter
            request = RolloutRequest(
                weights=weights,
                noise=self._noise_handle,
                filter_state=None if filter_ is None else put(filter_.get_state()),  # the weights go as theta
                pairs=max(1, pairs),
                noise_stdev=cfg.noise_stdev,
                eval_prob=cfg.eval_prob,
                action_noise_std=cfg.action_noise_std,
                offset=cfg.offset if isinstance(cfg, ARSConfig) else 0.0,
            )
            played = group.foreach_env_runner(functools.partial(play_perturbations, request), local_env_runner=not remote)
            for result in played:
                if result.filter_delta is not None and policy.observation_filter is not None:
                    policy.observation_filter.merge(result.filter_delta)
                episodes += 2 * len(result.returns)
                steps += sum(a + b for a, b in result.lengths)
            results += played
        return results

    def get_state(self) -> dict[str, Any]:
        """The base state and the perturbed episodes so far."""
        return {**super().get_state(), "episodes_so_far": self.episodes_so_far}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`."""
        episodes = restored_count(state.get("episodes_so_far", 0), "episodes_so_far")
        super().set_state(state)
        self.episodes_so_far = episodes


class ARS(ES):
    """Augmented random search (RLlib's ``ARS``): the best directions' return differences, scaled, by plain SGD."""

    config_class = ARSConfig
    corral_api = PLUGIN_API_VERSION

    def episodes_wanted(self) -> tuple[int, int]:
        """``num_rollouts`` perturbed episodes, whatever their steps."""
        assert isinstance(self.config, ARSConfig)
        return self.config.num_rollouts, 0

    def gradient(self, indices: np.ndarray, returns: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """ARS's step direction: the ``rollouts_used`` best directions' return differences, over their returns' spread.

        Args:
            indices: where each perturbation's slice of the noise table starts.
            returns: ``[n, 2]``, each perturbation's returns with the weights plus and minus it.
            theta: the weights (for the vector's length).

        Returns:
            The gradient the optimizer descends (minus the ascent direction).
        """
        assert isinstance(self.config, ARSConfig)
        used = min(self.config.rollouts_used, self.config.num_rollouts)
        best = returns.max(axis=1)
        keep = best >= np.percentile(best, 100 * (1 - used / self.config.num_rollouts))
        kept = returns[keep]
        estimate = weighted_noise_sum(kept[:, 0] - kept[:, 1], indices[keep], self.noise, theta.size) / keep.sum()
        spread = float(np.std(kept))
        if not math.isclose(spread, 0.0, abs_tol=1e-8):
            estimate /= spread
        return -estimate


class IterationHistory(EpisodeHistory):
    """The episodes of the last ``iterations`` iterations (ES's reported return), not of the last N episodes.

    Args:
        iterations: how many iterations' episodes the window holds (``report_length``).
    """

    def __init__(self, iterations: int) -> None:
        super().__init__(window=1)
        self.episodes = deque()  # unbounded: add() drops whole iterations
        self._sizes: deque[int] = deque()
        self._iterations = iterations

    def add(self, episodes: list[EpisodeSummary]) -> None:
        """Record one iteration's unperturbed episodes (possibly none), dropping the oldest iteration's past the window."""
        super().add(episodes)
        self._sizes.append(len(episodes))
        while len(self._sizes) > self._iterations:
            for _ in range(self._sizes.popleft()):
                self.episodes.popleft()

    def set_state(self, state: Any) -> None:
        """Restore :meth:`get_state`; the restored episodes count as one iteration's."""
        super().set_state(state)
        self._sizes = deque([len(self.episodes)])
