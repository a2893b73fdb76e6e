"""SAC's hyperparameters, each written once with its default, constraint and meaning."""

from __future__ import annotations

from typing import Literal

from corral.core import ConfigError, ModelConfig, option
from corral.core.learning.off_policy import OffPolicyConfig


class SACConfig(
    OffPolicyConfig,
    defaults={
        "train_batch_size": 256,
        "tau": 0.005,
        "learning_starts": 1000,
        "training_intensity": 256.0,
        "num_envs_per_env_runner": 1,
        "replay_buffer_config": {"type": "ReplayBuffer", "capacity": 1_000_000},
        "model": ModelConfig(fcnet_hiddens=[256, 256], fcnet_activation="relu"),
    },
):
    """Config of :class:`~corral.plugins.sac.SAC`: Box actions, or Discrete with the discrete variant.

    The default replay ratio (256 rows per env step with batches of 256) is one
    gradient step per env step, as in the paper. ``lr`` is not used: SAC has
    a learning rate per network.
    """

    actor_lr: float = option(3e-4, "training", gt=0)
    """learning rate of the actor (policy network)"""
    critic_lr: float = option(3e-4, "training", gt=0)
    """learning rate of the twin Q networks"""
    alpha_lr: float = option(3e-4, "training", gt=0)
    """learning rate of the entropy temperature alpha"""
    initial_alpha: float = option(1.0, "training", gt=0)
    """the entropy temperature at the start"""
    target_entropy: float | Literal["auto"] = option("auto", "training")
    """entropy alpha is tuned towards; 'auto': -dim(actions) for Box, 0.98 * log(n) * target_entropy_scale for Discrete"""
    target_entropy_scale: float = option(0.98, "training", gt=0, le=1)
    """for Discrete actions with target_entropy='auto': the fraction of the maximum entropy log(n) to aim for"""
    twin_q: bool = option(True, "training")
    """learn two Q networks and use the smaller estimate (clipped double Q)"""

    def validate(self) -> None:  # type: ignore[override]  # replaces pydantic's deprecated classmethod, as AlgorithmConfig's does
        """SAC's own checks on top of the shared ones."""
        super().validate()
        if self.lr_schedule is not None:
            raise ConfigError("SAC does not use lr_schedule; set actor_lr, critic_lr and alpha_lr")
        if not self.normalize_actions:
            raise ConfigError(
                "SAC's actor produces actions in [-1, 1]; keep normalize_actions=True so they are scaled to the env's bounds"
            )
