"""RLlib's custom action distributions: ``TorchDistributionWrapper`` subclasses, named by ``model.custom_action_dist``.

An RLlib user's distribution subclasses one of RLlib's torch distributions::

    class Tempered(TorchCategorical):
        def __init__(self, inputs, model=None, temperature=0.5):
            super().__init__(inputs, model, temperature)

registered with ``ModelCatalog.register_custom_action_dist("tempered",
Tempered)`` and named by ``model={"custom_action_dist": "tempered"}``. Its
``required_model_output_shape(action_space, model_config)`` sets the model's
``num_outputs``; the policy then acts and learns with it (``sample``,
``deterministic_sample``, ``logp``, ``entropy``, ``kl``), each built from the
model's outputs and the model (RLlib's ``(inputs, model)``). RLlib's
distributions draw from torch's global generator: corral seeds it from the
policy's own generator for each sample, so a seeded run repeats.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch

from corral.core.networks.distributions import ActionDistribution, flat_actions
from corral.core.seeding import isolated_torch_seed
from corral.errors import ConfigError


class TorchDistributionWrapper:
    """RLlib's base of torch action distributions: a ``torch.distributions`` object in ``self.dist``.

    Args:
        inputs: the model's outputs for a batch (``action_dist_inputs``).
        model: the model that produced them.
    """

    def __init__(self, inputs: Any, model: Any = None) -> None:
        self.inputs = inputs if isinstance(inputs, torch.Tensor) else torch.as_tensor(np.asarray(inputs))
        self.model = model
        self.dist: torch.distributions.Distribution | None = None
        self.last_sample: torch.Tensor | None = None

    @staticmethod
    def required_model_output_shape(action_space: gym.Space[Any], model_config: dict[str, Any]) -> int:
        """The model outputs one distribution needs: override this.

        Args:
            action_space: the space the policy acts in.
            model_config: the model options (a dict).

        Returns:
            The width of ``num_outputs``.
        """
        raise NotImplementedError

    def _distribution(self) -> torch.distributions.Distribution:
        if self.dist is None:
            raise NotImplementedError(f"{type(self).__qualname__} sets no self.dist; set one or override its methods")
        return self.dist

    def sample(self) -> torch.Tensor:
        """Random actions."""
        self.last_sample = self._distribution().sample()
        return self.last_sample

    def deterministic_sample(self) -> torch.Tensor:
        """The most likely actions: override this."""
        raise NotImplementedError(f"{type(self).__qualname__} must implement deterministic_sample()")

    def sampled_action_logp(self) -> torch.Tensor:
        """The log-likelihood of the last :meth:`sample`."""
        if self.last_sample is None:
            raise ValueError("sampled_action_logp() comes after sample()")
        return self.logp(self.last_sample)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """The log-likelihood of ``actions``, one per row."""
        return self._distribution().log_prob(actions)

    def entropy(self) -> torch.Tensor:
        """The entropy, one per row."""
        return self._distribution().entropy()

    def kl(self, other: TorchDistributionWrapper) -> torch.Tensor:
        """``KL(self || other)``, one per row."""
        return torch.distributions.kl.kl_divergence(self._distribution(), other._distribution())


class TorchCategorical(TorchDistributionWrapper):
    """RLlib's categorical over logits, optionally tempered: ``softmax(inputs / temperature)``.

    Args:
        inputs: ``[B, n]`` logits.
        model: the model that produced them.
        temperature: divides the logits (below 1: sharper, above 1: flatter).
    """

    def __init__(self, inputs: Any, model: Any = None, temperature: float = 1.0) -> None:
        super().__init__(inputs, model)
        self.dist = torch.distributions.Categorical(logits=self.inputs / temperature)

    @staticmethod
    def required_model_output_shape(action_space: gym.Space[Any], model_config: dict[str, Any]) -> int:
        """One logit per action of a Discrete space."""
        return int(action_space.n)  # type: ignore[attr-defined]  # a Discrete space

    def deterministic_sample(self) -> torch.Tensor:
        """The action with the largest logit."""
        self.last_sample = self.inputs.argmax(dim=-1)
        return self.last_sample


class TorchDiagGaussian(TorchDistributionWrapper):
    """RLlib's diagonal Gaussian: the inputs are means and log standard deviations, half and half.

    Args:
        inputs: ``[B, 2 * d]``.
        model: the model that produced them.
    """

    def __init__(self, inputs: Any, model: Any = None) -> None:
        super().__init__(inputs, model)
        mean, log_std = torch.chunk(self.inputs, 2, dim=-1)
        self.dist = torch.distributions.Normal(mean, torch.exp(log_std))

    @staticmethod
    def required_model_output_shape(action_space: gym.Space[Any], model_config: dict[str, Any]) -> int:
        """A mean and a log standard deviation per action dimension of a Box."""
        return 2 * int(np.prod(action_space.shape or ()))

    def deterministic_sample(self) -> torch.Tensor:
        """The means."""
        self.last_sample = self._distribution().mean
        return self.last_sample

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """The log-likelihood of ``actions``, summed over their dimensions."""
        return self._distribution().log_prob(actions).sum(dim=-1)

    def entropy(self) -> torch.Tensor:
        """The entropy, summed over the dimensions."""
        return self._distribution().entropy().sum(dim=-1)

    def kl(self, other: TorchDistributionWrapper) -> torch.Tensor:
        """``KL(self || other)``, summed over the dimensions."""
        return super().kl(other).sum(dim=-1)


class _Custom(ActionDistribution):
    """A user's distribution as corral's: built from the outputs and the policy's model, its methods passed through."""

    user_class: ClassVar[type]
    model: ClassVar[Any]

    def __init__(self, inputs: torch.Tensor) -> None:
        super().__init__(inputs)
        self.wrapped = self.user_class(inputs, self.model)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """The user's ``sample()``, drawing from torch's global generator seeded from ``generator`` for the call.

        RLlib's distributions draw from the global generator; seeding it from the
        policy's own for each call keeps a seeded run reproducible, and leaves the
        global generator as it was.
        """
        if generator is None:
            return flat_actions(self.wrapped.sample())
        seed = int(torch.randint(2**62, (1,), generator=generator, device=generator.device))
        with isolated_torch_seed(seed):
            return flat_actions(self.wrapped.sample())

    def deterministic_sample(self) -> torch.Tensor:
        """The user's ``deterministic_sample()``."""
        return flat_actions(self.wrapped.deterministic_sample())

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """The user's ``logp(actions)``."""
        logp: torch.Tensor = self.wrapped.logp(actions)
        return logp

    def entropy(self) -> torch.Tensor:
        """The user's ``entropy()``."""
        entropy: torch.Tensor = self.wrapped.entropy()
        return entropy

    def kl(self, other: ActionDistribution) -> torch.Tensor:
        """The user's ``kl(other)``, given the other's user distribution."""
        kl: torch.Tensor = self.wrapped.kl(other.wrapped if isinstance(other, _Custom) else other)
        return kl


def custom_outputs(cls: type, action_space: gym.Space[Any], model_config: dict[str, Any]) -> int:
    """The model outputs a custom distribution needs (its ``required_model_output_shape``).

    Args:
        cls: the distribution class.
        action_space: the space the policy acts in.
        model_config: the model options as a dict.

    Returns:
        The width, an int >= 1.

    Raises:
        ConfigError: it raised, or did not give a positive int.
    """
    try:
        width = cls.required_model_output_shape(action_space, model_config)  # type: ignore[attr-defined]
    except Exception as exc:  # whatever a user's method raises
        raise ConfigError(
            f"model.custom_action_dist {cls.__qualname__}.required_model_output_shape raised {type(exc).__name__}: {exc}"
        ) from exc
    shape = np.asarray(width).reshape(-1)
    if shape.size != 1 or int(shape[0]) < 1:
        raise ConfigError(
            f"model.custom_action_dist {cls.__qualname__}.required_model_output_shape gave {width!r}; it must give the "
            "model's output width, an int >= 1 (corral's actions are flat)"
        )
    return int(shape[0])


def custom_distribution(cls: type, model: Any) -> type[ActionDistribution]:
    """A user's distribution class as corral's, bound to the policy's model (RLlib passes it to each one).

    Args:
        cls: the ``custom_action_dist`` class.
        model: the policy's model.

    Returns:
        A corral :class:`~corral.core.networks.distributions.ActionDistribution` class.
    """
    return type(f"Custom{cls.__name__}", (_Custom,), {"user_class": cls, "model": model})
