"""Exploration: how a policy turns its action distribution into the action it takes.

Each class here is a plugin in entry-point group ``corral.explorations`` (so a
third party can add one) and is chosen by ``exploration_config={"type": ...}``;
the other keys are the class's keyword arguments. An exploration's state
(timestep, noise) is saved in checkpoints through :meth:`Exploration.get_state`.
Random draws come from ``self.generator``, the policy's own ``torch.Generator``
(see :mod:`corral.core.seeding`), set by the policy after it builds the exploration.
"""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import torch

from corral.core.contracts.plugin_classes import exploration_class, validate_exploration_config
from corral.core.learning.schedules import linear_schedule
from corral.core.networks.distributions import ActionDistribution, uniform_like
from corral.errors import ConfigError


class Exploration:
    """Base class: choose actions from a distribution, given the training timestep.

    Args:
        action_space: the space the policy acts in (for Box actions with
            ``normalize_actions`` this is [-1, 1]).
    """

    supports: tuple[type[gym.Space[Any]], ...] = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.Box, gym.spaces.Tuple)
    """the action spaces it works in; a Tuple is a Tuple or Dict action space's leaves, acted in as one flat vector"""

    def __init__(self, action_space: gym.Space[Any]) -> None:
        if not isinstance(action_space, self.supports):
            allowed = " or ".join(s.__name__ for s in self.supports)
            raise ConfigError(
                f"exploration {type(self).__name__} works with {allowed} actions, not {action_space}; "
                "choose another exploration_config type"
            )
        self.action_space = action_space
        self.generator: torch.Generator | None = None
        """the policy's generator, which every random draw uses (None: torch's global one)"""
        self.action_mask: torch.Tensor | None = None
        """``[B, n]`` legal actions of the batch being acted on, set by the policy before each call when the
        env masks actions (None: all legal); the distribution's inputs are masked already, and :meth:`_uniform` draws
        from it"""
        self.worker_index = 0
        """the env runner whose policy copy explores (0: the learner's or the local runner's), set when built"""
        self.num_workers = 0
        """the algorithm's remote env runners (``num_env_runners``), set when built"""

    def get_exploration_action(self, dist: ActionDistribution, timestep: int, explore: bool) -> torch.Tensor:
        """The actions to take; ``explore=False`` asks for the deterministic action.

        Args:
            dist: the action distributions of a batch of ``B`` observations, in the
                policy's action space (``[-1, 1]`` for Box actions with ``normalize_actions``).
            timestep: env steps sampled so far (the policy's ``global_timestep`` unless the
                caller passes another); annealed values (epsilon, noise scale) and the
                initial uniform-random phase are read at it.
            explore: True while collecting training samples (unless ``config.explore``
                is off); False asks for the deterministic action.

        Returns:
            One action per row of ``dist`` (``[B]`` for Discrete, ``[B, ...]`` otherwise),
            on the device of ``dist``'s inputs.
        """
        raise NotImplementedError

    def get_state(self) -> dict[str, Any]:
        """Tensors and numbers to save in a checkpoint."""
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned."""

    def get_info(self, timestep: int) -> dict[str, float]:
        """Numbers to report under the learner stats (e.g. current epsilon)."""
        return {}

    def _uniform(self, batch: int, like: torch.Tensor, space: gym.Space[Any] | None = None) -> torch.Tensor:
        space = self.action_space if space is None else space
        g = self.generator
        if isinstance(space, gym.spaces.Tuple):  # each leaf's uniform actions, side by side as floats
            parts = [self._uniform(batch, like, leaf) for leaf in space.spaces]
            return torch.cat([part.reshape(batch, -1).float() for part in parts], dim=-1)
        if isinstance(space, gym.spaces.Discrete) and self.action_mask is not None:
            return torch.multinomial(self.action_mask.float(), 1, generator=g).squeeze(1)
        if isinstance(space, gym.spaces.Discrete):
            return torch.randint(0, int(space.n), (batch,), device=like.device, generator=g)
        if isinstance(space, gym.spaces.MultiDiscrete):
            nvec = torch.as_tensor(space.nvec.ravel(), device=like.device)
            return (torch.rand(batch, len(nvec), device=like.device, generator=g) * nvec).long()
        box = cast(gym.spaces.Box, space)  # the last of the spaces an exploration supports
        low = torch.as_tensor(box.low, dtype=torch.float32, device=like.device)
        high = torch.as_tensor(box.high, dtype=torch.float32, device=like.device)
        return low + torch.rand(batch, *box.shape, device=like.device, generator=g) * (high - low)


class StochasticSampling(Exploration):
    """Sample from the policy's distribution (on-policy methods); uniform for the first ``random_timesteps``."""

    def __init__(self, action_space: gym.Space[Any], random_timesteps: int = 0) -> None:
        super().__init__(action_space)
        self.random_timesteps = int(random_timesteps)

    def get_exploration_action(self, dist: ActionDistribution, timestep: int, explore: bool) -> torch.Tensor:
        """A sample of the distribution when exploring, its mode otherwise."""
        if not explore:
            return dist.deterministic_sample()
        if timestep < self.random_timesteps:
            return self._uniform(dist.inputs.shape[0], dist.inputs)
        return dist.sample(self.generator)


class EpsilonGreedy(Exploration):
    """The greedy action, or a uniformly random one with probability epsilon (annealed linearly)."""

    supports = (gym.spaces.Discrete,)

    def __init__(
        self,
        action_space: gym.Space[Any],
        initial_epsilon: float = 1.0,
        final_epsilon: float = 0.05,
        epsilon_timesteps: int = 100_000,
        warmup_timesteps: int = 0,
    ) -> None:
        super().__init__(action_space)
        for name, value in (("initial_epsilon", initial_epsilon), ("final_epsilon", final_epsilon)):
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"EpsilonGreedy {name}={value} must be in [0, 1]")
        self.epsilon = linear_schedule(initial_epsilon, final_epsilon, int(epsilon_timesteps), int(warmup_timesteps))
        self.initial_epsilon = initial_epsilon
        self.warmup_timesteps = int(warmup_timesteps)

    def current_epsilon(self, timestep: int) -> float:
        """Epsilon at ``timestep`` (initial during warm-up)."""
        return self.initial_epsilon if timestep < self.warmup_timesteps else self.epsilon(timestep)

    def get_exploration_action(self, dist: ActionDistribution, timestep: int, explore: bool) -> torch.Tensor:
        """A uniformly random action with probability epsilon, the greedy one otherwise."""
        greedy = dist.deterministic_sample()
        if not explore:
            return greedy
        random_rows = torch.rand(greedy.shape[0], device=greedy.device, generator=self.generator) < self.current_epsilon(timestep)
        return torch.where(random_rows, self._uniform(greedy.shape[0], greedy), greedy)

    def get_info(self, timestep: int) -> dict[str, float]:
        """The current epsilon, reported as ``cur_epsilon``."""
        return {"cur_epsilon": self.current_epsilon(timestep)}


class PerWorkerEpsilonGreedy(EpsilonGreedy):
    """Ape-X's exploration: each remote env runner explores with a constant epsilon of its own.

    Runner ``i`` of ``N`` (1-based) takes ``0.4 ** (1 + (i - 1) / (N - 1) * 7)``,
    from 0.4 down to 0.4**8 (Horgan et al., 2018, as RLlib has it); the
    learner's copy and the local runner act greedily when remote runners
    sample. Without remote runners this is :class:`EpsilonGreedy` with its
    arguments' schedule.
    """

    def current_epsilon(self, timestep: int) -> float:
        """The runner's constant epsilon, or the schedule's without remote runners."""
        if self.num_workers <= 0:
            return super().current_epsilon(timestep)
        if self.worker_index <= 0:
            return 0.0
        return per_worker_epsilon(self.worker_index, self.num_workers)


def per_worker_epsilon(worker_index: int, num_workers: int) -> float:
    """Ape-X's epsilon of remote runner ``worker_index`` (1..``num_workers``): 0.4 for the first, 0.4**8 for the last.

    Args:
        worker_index: the runner's index, from 1.
        num_workers: the remote runners, at least 1.

    Returns:
        ``0.4 ** (1 + (worker_index - 1) / max(num_workers - 1, 1) * 7)``.
    """
    return float(0.4 ** (1 + (worker_index - 1) / max(num_workers - 1, 1) * 7))


class SoftQ(Exploration):
    """Boltzmann exploration: sample from softmax(logits / temperature)."""

    supports = (gym.spaces.Discrete,)

    def __init__(self, action_space: gym.Space[Any], temperature: float = 1.0) -> None:
        super().__init__(action_space)
        if temperature <= 0:
            raise ConfigError(f"SoftQ temperature={temperature} must be > 0")
        self.temperature = float(temperature)

    def get_exploration_action(self, dist: ActionDistribution, timestep: int, explore: bool) -> torch.Tensor:
        """When exploring, a Gumbel-max sample of softmax(logits / temperature); the greedy action otherwise."""
        if not explore:
            return dist.deterministic_sample()
        logits = dist.inputs / self.temperature
        noise = uniform_like(logits, self.generator).clamp_(min=1e-20)
        return torch.argmax(logits - torch.log(-torch.log(noise)), dim=-1)


class GaussianNoise(Exploration):
    """The deterministic action plus Gaussian noise of annealed scale; uniform for the first ``random_timesteps``."""

    supports = (gym.spaces.Box,)

    def __init__(
        self,
        action_space: gym.spaces.Box,
        stddev: float = 0.1,
        initial_scale: float = 1.0,
        final_scale: float = 0.02,
        scale_timesteps: int = 10_000,
        random_timesteps: int = 1_000,
    ) -> None:
        super().__init__(action_space)
        self.stddev = float(stddev)
        self.random_timesteps = int(random_timesteps)
        self.scale = linear_schedule(initial_scale, final_scale, int(scale_timesteps), self.random_timesteps)
        self._low = torch.as_tensor(action_space.low, dtype=torch.float32)
        self._high = torch.as_tensor(action_space.high, dtype=torch.float32)

    def _noise(self, shape: torch.Size, device: torch.device) -> torch.Tensor:
        return torch.randn(shape, device=device, generator=self.generator) * self.stddev

    def get_exploration_action(self, dist: ActionDistribution, timestep: int, explore: bool) -> torch.Tensor:
        """Uniform for the first ``random_timesteps``, then the mode plus scaled noise in bounds; the mode unless exploring."""
        action = dist.deterministic_sample()
        if not explore:
            return action
        if timestep < self.random_timesteps:
            return self._uniform(action.shape[0], action)
        noisy = action + self.scale(timestep) * self._noise(action.shape, action.device)
        return torch.max(torch.min(noisy, self._high.to(action.device)), self._low.to(action.device))

    def get_info(self, timestep: int) -> dict[str, float]:
        """The current noise scale, reported as ``cur_noise_scale``."""
        return {"cur_noise_scale": self.scale(timestep)}


class OrnsteinUhlenbeckNoise(GaussianNoise):
    """Temporally correlated noise (an Ornstein-Uhlenbeck process per row), as in DDPG.

    The noise added is ``scale * ou_base_scale * state * (high - low)``: in units
    of the action space's width, as RLlib's is.
    """

    def __init__(
        self,
        action_space: gym.spaces.Box,
        ou_theta: float = 0.15,
        ou_sigma: float = 0.2,
        ou_base_scale: float = 0.1,
        initial_scale: float = 1.0,
        final_scale: float = 0.02,
        scale_timesteps: int = 10_000,
        random_timesteps: int = 1_000,
    ) -> None:
        super().__init__(action_space, 1.0, initial_scale, final_scale, scale_timesteps, random_timesteps)
        self.theta, self.sigma, self.base_scale = float(ou_theta), float(ou_sigma), float(ou_base_scale)
        self.state = torch.zeros(0, *action_space.shape)
        width = self._high - self._low
        self._width = torch.where(torch.isinf(width), torch.ones_like(width), width)
        """the noise is in units of each dimension's width (high - low; 1 where unbounded), as RLlib scales it"""

    def _noise(self, shape: torch.Size, device: torch.device) -> torch.Tensor:
        if self.state.shape != shape:
            self.state = torch.zeros(shape)
        draw_on = self.generator.device if self.generator is not None else None  # the generator's device draws the noise
        drawn = torch.randn(shape, generator=self.generator, device=draw_on).to(self.state.device)
        self.state = self.state + (-self.theta * self.state + self.sigma * drawn)
        return (self.base_scale * self._width * self.state).to(device)

    def get_state(self) -> dict[str, Any]:
        """The Ornstein-Uhlenbeck process's state: where the correlated noise stands."""
        return {"ou_state": self.state.clone()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`."""
        self.state = state["ou_state"].clone()


class Random(Exploration):
    """Uniformly random actions, ignoring the policy (a baseline, or for pure data collection)."""

    def get_exploration_action(self, dist: ActionDistribution, timestep: int, explore: bool) -> torch.Tensor:
        """Uniformly random actions when exploring, the mode otherwise."""
        if not explore:
            return dist.deterministic_sample()
        return self._uniform(dist.inputs.shape[0], dist.inputs)


def make_exploration(
    exploration_config: dict[str, Any], action_space: gym.Space[Any], worker_index: int = 0, num_workers: int = 0
) -> Exploration:
    """Build the exploration named by ``exploration_config['type']`` for ``action_space``.

    Args:
        exploration_config: ``{"type": registered exploration name, **its keyword arguments}``;
            ``type`` is required.
        action_space: the space the policy acts in (``[-1, 1]`` for Box actions with
            ``normalize_actions``).
        worker_index: the env runner whose policy copy explores (0: the learner's or the local runner's).
        num_workers: the algorithm's remote env runners.

    Returns:
        The exploration, its ``generator`` still None until the policy sets its own.

    Raises:
        ConfigError: the type is unknown or not an :class:`Exploration` subclass, a key is
            not one of its arguments, or it does not support ``action_space`` or a value.
    """
    validate_exploration_config(exploration_config)
    options = dict(exploration_config)
    cls = cast(type[Exploration], exploration_class(options.pop("type")))
    exploration = cls(action_space, **options)
    exploration.worker_index, exploration.num_workers = worker_index, num_workers
    return exploration
