"""Action distributions, parameterised by the flat output of a network.

Small and free of torch.distributions' argument validation, because they sit on
the sampling hot path. Each class knows how many network outputs it needs
(:meth:`ActionDistribution.required_inputs`).
"""

from __future__ import annotations

import math
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from corral.errors import EnvError


class ActionDistribution:
    """A batch of action distributions built from network outputs ``inputs``."""

    def __init__(self, inputs: torch.Tensor) -> None:
        self.inputs = inputs

    @staticmethod
    def required_inputs(space: gym.Space[Any]) -> int:
        """Network outputs per row for this action space."""
        raise NotImplementedError

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Random actions, drawn from ``generator`` (the policy's own; None: torch's global one)."""
        raise NotImplementedError

    def deterministic_sample(self) -> torch.Tensor:
        """The most likely actions (mode)."""
        raise NotImplementedError

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability (density) of ``actions``, one value per row."""
        raise NotImplementedError

    def entropy(self) -> torch.Tensor:
        """Entropy, one value per row."""
        raise NotImplementedError

    def kl(self, other: ActionDistribution) -> torch.Tensor:
        """KL(self || other), one value per row."""
        raise NotImplementedError


class Categorical(ActionDistribution):
    """Discrete actions from logits."""

    def __init__(self, inputs: torch.Tensor) -> None:
        super().__init__(inputs)
        self.log_probs = F.log_softmax(inputs, dim=-1)

    @staticmethod
    def required_inputs(space: gym.Space[Any]) -> int:
        """One logit per action."""
        return int(cast(gym.spaces.Discrete, space).n)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Gumbel-max: the argmax of the logits plus Gumbel noise drawn from ``generator``."""
        # Gumbel-max: one pass, no normalisation, no multinomial kernel.
        noise = uniform_like(self.inputs, generator).clamp_(min=1e-20)
        return torch.argmax(self.inputs - torch.log(-torch.log(noise)), dim=-1)

    def deterministic_sample(self) -> torch.Tensor:
        """The action with the largest logit."""
        return torch.argmax(self.inputs, dim=-1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability of each row's action."""
        return self.log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        """Entropy of each row's categorical."""
        return -(self.log_probs.exp() * self.log_probs).sum(-1)

    def kl(self, other: ActionDistribution) -> torch.Tensor:
        """KL(self || other) between categoricals over the same actions."""
        assert isinstance(other, Categorical)  # internal invariant, not user input
        return (self.log_probs.exp() * (self.log_probs - other.log_probs)).sum(-1)


class MultiCategorical(ActionDistribution):
    """Independent Categoricals, one per MultiDiscrete component."""

    def __init__(self, inputs: torch.Tensor, nvec: list[int]) -> None:
        super().__init__(inputs)
        self.parts = [Categorical(x) for x in torch.split(inputs, nvec, dim=-1)]

    @staticmethod
    def required_inputs(space: gym.Space[Any]) -> int:
        """One logit per action of every sub-space (the sum of ``nvec``)."""
        return int(np.sum(cast(gym.spaces.MultiDiscrete, space).nvec))

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """One categorical sample per sub-space, stacked on the last axis."""
        return torch.stack([p.sample(generator) for p in self.parts], dim=-1)

    def deterministic_sample(self) -> torch.Tensor:
        """Each sub-space's most likely action."""
        return torch.stack([p.deterministic_sample() for p in self.parts], dim=-1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """The sum of the sub-spaces' log-probabilities (they are independent)."""
        return sum(p.logp(actions[..., i]) for i, p in enumerate(self.parts))  # type: ignore[return-value]

    def entropy(self) -> torch.Tensor:
        """The sum of the sub-spaces' entropies."""
        return sum(p.entropy() for p in self.parts)  # type: ignore[return-value]

    def kl(self, other: ActionDistribution) -> torch.Tensor:
        """The sum of the sub-spaces' KL divergences."""
        assert isinstance(other, MultiCategorical)
        return sum(p.kl(q) for p, q in zip(self.parts, other.parts, strict=True))  # type: ignore[return-value]


class DiagGaussian(ActionDistribution):
    """Continuous actions: inputs are [mean, log_std] halves."""

    def __init__(self, inputs: torch.Tensor) -> None:
        super().__init__(inputs)
        self.mean, self.log_std = torch.chunk(inputs, 2, dim=-1)
        self.std = self.log_std.exp()

    @staticmethod
    def required_inputs(space: gym.Space[Any]) -> int:
        """A mean and a log standard deviation per action dimension."""
        return 2 * int(np.prod(cast(gym.spaces.Box, space).shape))

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """``mean + std * noise``, the noise drawn from ``generator``."""
        return self.mean + self.std * normal_like(self.mean, generator)

    def deterministic_sample(self) -> torch.Tensor:
        """The mean."""
        return self.mean

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Gaussian log-density of ``actions``, summed over action dimensions."""
        z = (actions - self.mean) / self.std
        return -(0.5 * z.pow(2) + self.log_std + 0.5 * math.log(2 * math.pi)).sum(-1)

    def entropy(self) -> torch.Tensor:
        """Gaussian entropy, summed over action dimensions."""
        return (self.log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)

    def kl(self, other: ActionDistribution) -> torch.Tensor:
        """KL(self || other) between diagonal Gaussians, in closed form."""
        assert isinstance(other, DiagGaussian)
        return (
            other.log_std - self.log_std + (self.std.pow(2) + (self.mean - other.mean).pow(2)) / (2.0 * other.std.pow(2)) - 0.5
        ).sum(-1)


class SquashedGaussian(ActionDistribution):
    """tanh of a Gaussian: actions in (-1, 1), as SAC's actor produces them.

    Inputs are ``[mean, log_std]`` halves; ``log_std`` is clamped to [-20, 2]
    for numerical safety. :meth:`rsample_with_logp` is reparameterised, so the
    actor's loss can differentiate through the sampled action.
    """

    LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0

    def __init__(self, inputs: torch.Tensor) -> None:
        super().__init__(inputs)
        mean, log_std = torch.chunk(inputs, 2, dim=-1)
        self.mean = mean
        self.log_std = log_std.clamp(self.LOG_STD_MIN, self.LOG_STD_MAX)
        self.std = self.log_std.exp()

    @staticmethod
    def required_inputs(space: gym.Space[Any]) -> int:
        """A mean and a log standard deviation per action dimension."""
        return 2 * int(np.prod(cast(gym.spaces.Box, space).shape))

    def rsample_with_logp(
        self, generator: torch.Generator | None = None, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised sample and its log-density (with the tanh correction).

        Args:
            generator: where the Gaussian noise is drawn from (None: torch's global generator).
            noise: the standard normal noise itself, shaped like the mean, drawn by the caller; then
                ``generator`` is not used.

        Returns:
            ``(actions, logp)``.
        """
        if noise is None:
            noise = normal_like(self.mean, generator)
        pre_tanh = self.mean + self.std * noise
        # the standardised sample is the noise itself: no division by std to differentiate through
        return torch.tanh(pre_tanh), self._logp_pre_tanh(pre_tanh, noise)

    def _logp_pre_tanh(self, pre_tanh: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
        if z is None:
            z = (pre_tanh - self.mean) / self.std
        gaussian = -(0.5 * z.pow(2) + self.log_std + 0.5 * math.log(2 * math.pi)).sum(-1)
        # log(1 - tanh(u)^2) written stably as 2 * (log 2 - u - softplus(-2u))
        correction = (2.0 * (math.log(2.0) - pre_tanh - F.softplus(-2.0 * pre_tanh))).sum(-1)
        return gaussian - correction

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """tanh of a Gaussian sample drawn from ``generator`` (not reparameterised: see :meth:`rsample_with_logp`)."""
        return torch.tanh(self.mean + self.std * normal_like(self.mean, generator))

    def deterministic_sample(self) -> torch.Tensor:
        """tanh of the mean."""
        return torch.tanh(self.mean)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-density of ``actions`` in (-1, 1) through atanh, clipped just inside the bounds."""
        clipped = actions.clamp(-1.0 + 1e-6, 1.0 - 1e-6)
        return self._logp_pre_tanh(torch.atanh(clipped))

    def entropy(self) -> torch.Tensor:
        """The Gaussian's entropy before the tanh: there is no closed form after it."""
        # No closed form after the tanh; the Gaussian's entropy is the usual stand-in.
        return (self.log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)


class Deterministic(ActionDistribution):
    """A point mass on the network's outputs: the action itself (DDPG's and TD3's actors; RLlib's TorchDeterministic).

    Exploration adds noise to its :meth:`deterministic_sample` (GaussianNoise,
    OrnsteinUhlenbeckNoise). A point mass has no density: :meth:`logp` and
    :meth:`entropy` are zero, as RLlib reports them.
    """

    @staticmethod
    def required_inputs(space: gym.Space[Any]) -> int:
        """One output per action dimension."""
        return int(np.prod(cast(gym.spaces.Box, space).shape))

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """The outputs: a point mass has nothing to draw."""
        return self.inputs

    def deterministic_sample(self) -> torch.Tensor:
        """The outputs."""
        return self.inputs

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Zero per row (RLlib's convention for a point mass)."""
        return torch.zeros(actions.shape[0], device=actions.device)

    def entropy(self) -> torch.Tensor:
        """Zero per row."""
        return torch.zeros(self.inputs.shape[0], device=self.inputs.device)


class MultiActionDistribution(ActionDistribution):
    """A Tuple or Dict action space's distribution: one per leaf, independent, over the policy's flat actions.

    The inputs are the leaves' inputs side by side and the actions the leaves'
    actions side by side (:mod:`corral.core.common.actions`); log-probabilities,
    entropies and KL divergences are the sums of the leaves'.

    Args:
        inputs: ``[B, sum of the leaves' inputs]``.
        parts: each leaf's distribution class, its input width and its action width.
    """

    def __init__(self, inputs: torch.Tensor, parts: list[tuple[type[ActionDistribution], int, int]]) -> None:
        super().__init__(inputs)
        pieces = torch.split(inputs, [width for _, width, _ in parts], dim=-1)
        self.parts = [cls(piece) for (cls, _, _), piece in zip(parts, pieces, strict=True)]
        self.action_widths = [width for _, _, width in parts]

    @staticmethod
    def required_inputs(space: gym.Space[Any]) -> int:
        """The sum of the leaves' inputs (``space`` is the Tuple of the leaves' policy spaces)."""
        return sum(distribution_for(leaf)[1] for leaf in cast("gym.spaces.Tuple[Any]", space).spaces)

    def _split(self, actions: torch.Tensor) -> list[torch.Tensor]:
        pieces = torch.split(actions, self.action_widths, dim=-1)
        # a Discrete leaf's distribution takes [B] indexes, the others [B, width]
        return [p[..., 0] if isinstance(d, Categorical) else p for d, p in zip(self.parts, pieces, strict=True)]

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Each leaf's sample, side by side as floats."""
        return flat_actions([p.sample(generator) for p in self.parts])

    def deterministic_sample(self) -> torch.Tensor:
        """Each leaf's most likely action, side by side as floats."""
        return flat_actions([p.deterministic_sample() for p in self.parts])

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """The sum of the leaves' log-probabilities (they are independent)."""
        return sum(p.logp(a) for p, a in zip(self.parts, self._split(actions), strict=True))  # type: ignore[return-value]

    def entropy(self) -> torch.Tensor:
        """The sum of the leaves' entropies."""
        return sum(p.entropy() for p in self.parts)  # type: ignore[return-value]

    def kl(self, other: ActionDistribution) -> torch.Tensor:
        """The sum of the leaves' KL divergences."""
        assert isinstance(other, MultiActionDistribution)
        return sum(p.kl(q) for p, q in zip(self.parts, other.parts, strict=True))  # type: ignore[return-value]


def flat_actions(actions: Any) -> torch.Tensor:
    """Actions as the policy stores them: a tensor as it is; a tuple, list or dict of ``[B, ...]`` tensors (a Tuple or
    Dict action space's leaves) side by side as one ``[B, n]`` float tensor.

    RLlib's autoregressive distributions return ``(a1, a2)`` from ``sample()``;
    their ``logp`` then reads ``actions[:, 0]`` and ``actions[:, 1]``.

    Args:
        actions: a distribution's sample, or its leaves' samples.

    Returns:
        The actions as one tensor.
    """
    if isinstance(actions, torch.Tensor):
        return actions
    leaves = [flat_actions(part) for part in (actions.values() if isinstance(actions, dict) else actions)]
    return torch.cat([leaf.reshape(leaf.shape[0], -1).float() for leaf in leaves], dim=-1)


def uniform_like(x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """``torch.rand_like(x)``, drawn from ``generator`` (``rand_like`` takes none).

    Args:
        x: gives the shape, dtype and device of the result.
        generator: where the draws come from (None: torch's global generator); it must
            be on ``x``'s device.

    Returns:
        Uniform samples in ``[0, 1)`` shaped like ``x``.
    """
    return torch.rand(x.shape, generator=generator, device=x.device, dtype=x.dtype)


def normal_like(x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """``torch.randn_like(x)``, drawn from ``generator``.

    Args:
        x: gives the shape, dtype and device of the result.
        generator: where the draws come from (None: torch's global generator); it must
            be on ``x``'s device.

    Returns:
        Standard normal samples shaped like ``x``.
    """
    return torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)


def distribution_for(space: gym.Space[Any]) -> tuple[type[ActionDistribution], int]:
    """The distribution class for an action space and the network outputs it needs.

    Returns a class (MultiDiscrete gets one that binds its ``nvec``, a Tuple of
    leaves one that binds their distributions).
    """
    if isinstance(space, gym.spaces.Discrete):
        return Categorical, Categorical.required_inputs(space)
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = [int(n) for n in space.nvec.ravel()]

        class _Bound(MultiCategorical):
            def __init__(self, inputs: torch.Tensor) -> None:
                super().__init__(inputs, nvec)

        return _Bound, MultiCategorical.required_inputs(space)
    if isinstance(space, gym.spaces.Box):
        return DiagGaussian, DiagGaussian.required_inputs(space)
    if isinstance(space, gym.spaces.Tuple):  # a Tuple or Dict action space's leaves (ActionAdapter.distribution_space)
        parts = [(*distribution_for(leaf), int(np.prod(leaf.shape or ()))) for leaf in space.spaces]

        class _Leaves(MultiActionDistribution):
            def __init__(self, inputs: torch.Tensor) -> None:
                super().__init__(inputs, parts)

        return _Leaves, sum(width for _, width, _ in parts)
    raise EnvError(f"action space {space} is not supported; use Discrete, MultiDiscrete, Box, or a Tuple or Dict of them")
