"""ES's and ARS's policy: the catalog's network without a value head, its weights read and written as one vector."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from corral.core import ConfigError, Model, Optimizer, Policy, SampleBatch, build_model, build_optimizer
from corral.plugins.es.config import EvolutionConfig
from corral.plugins.es.slot_model import SlotModel


class ESPolicy(Policy):
    """A policy whose weights move by perturbation returns, not by a loss (RLlib's ``ESTorchPolicy``).

    It acts as any policy does (sampling its action distribution); the
    algorithm perturbs and updates its weights as one flat vector
    (:meth:`get_flat_weights`, :meth:`set_flat_weights`), RLlib's names.
    """

    config: EvolutionConfig

    def make_model(self) -> nn.Module:
        """The catalog's model, or a plain custom model, without a value head (nothing learns values)."""
        return build_model(
            self.model_observation_space, self.model_action_space, self.num_outputs, self.config.model, value_function=False
        )

    def make_optimizer(self) -> Optimizer:
        """Adam (ES) or SGD (ARS) over the weights, at the algorithm's step size."""
        return build_optimizer(self.model.parameters(), {"type": self.config.optimizer_type()}, lr=self.config.step_size())

    def scheduled(self, name: str) -> float:
        """The step size for ``"lr"`` (``stepsize`` or ``sgd_stepsize``; there is no schedule); other options as usual."""
        return self.config.step_size() if name == "lr" else super().scheduled(name)

    @property
    def num_params(self) -> int:
        """How many numbers the weights are (the length of :meth:`get_flat_weights`)."""
        return sum(p.numel() for p in self.model.parameters())

    def get_flat_weights(self) -> np.ndarray:
        """The weights as one float32 vector, in the model's parameter order."""
        return nn.utils.parameters_to_vector(self.model.parameters()).detach().cpu().numpy().astype(np.float32)

    def set_flat_weights(self, weights: np.ndarray) -> None:
        """Set the weights from one vector (:meth:`get_flat_weights`'s layout).

        Args:
            weights: the vector.

        Raises:
            ValueError: it has the wrong length.
        """
        if weights.shape != (self.num_params,):
            raise ValueError(f"flat weights of shape {weights.shape} for a policy of {self.num_params} weights")
        flat = torch.as_tensor(weights, device=self.device)
        start = 0
        with torch.no_grad():
            for param in self.model.parameters():  # copied in: vector_to_parameters would make them views of `weights`
                param.copy_(flat[start : start + param.numel()].view_as(param))
                start += param.numel()

    def side_by_side(self, weights: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """How to act in several episodes at once, each with its own weights (ES's perturbations, side by side).

        A model of linear layers acts once a step for all rows (a :class:`SlotModel`
        copy); any other model acts row by row, its weights set before each row.

        Args:
            weights: ``[rows, num_params]``, the weights row ``i`` acts with.

        Returns:
            A function from ``[rows, ...]`` model inputs to ``[rows, ...]`` actions, sampled
            from each row's action distribution.
        """
        slot_models: dict[int, SlotModel | None] = self.__dict__.setdefault("_slot_models", {})
        rows = len(weights)
        if rows not in slot_models:  # one copy per width, made at the first round
            slot_models[rows] = SlotModel.of(self.model, rows)
        slot_model = slot_models[rows]
        if slot_model is not None:
            slot_model.load(weights)

            def act_at_once(obs: np.ndarray) -> np.ndarray:
                with self.acting_with(cast(Model, slot_model.module)):
                    return self.compute_actions(obs, explore=True)[0]

            return act_at_once

        def act_row_by_row(obs: np.ndarray) -> np.ndarray:
            actions = []
            for row, row_weights in enumerate(weights):
                self.set_flat_weights(row_weights)
                actions.append(self.compute_actions(obs[row : row + 1], explore=True)[0])
            return np.concatenate(actions)

        return act_row_by_row

    def apply_flat_gradient(self, gradient: np.ndarray) -> list[torch.Tensor]:
        """Step the optimizer along one gradient vector (:meth:`get_flat_weights`'s layout), through the NaN guard.

        Args:
            gradient: the gradient of the weights, a vector.

        Returns:
            The gradient's norm, as :meth:`apply_gradients` measures it.
        """
        params = list(self.model.parameters())
        pieces = np.split(gradient.astype(np.float32), np.cumsum([p.numel() for p in params])[:-1])
        return self.apply_gradients([piece.reshape(p.shape) for piece, p in zip(pieces, params, strict=True)])

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """ES and ARS learn from perturbed episodes' returns, in their ``training_step``: never from a batch.

        Raises:
            ConfigError: always.
        """
        raise ConfigError(
            f"{type(self).__name__} learns from the returns of perturbed weights (ES.training_step), not from batches; "
            "train on batches with PG, A2C or PPO"
        )
