"""DDPG's and TD3's hyperparameters: RLlib's names and defaults, each written once with its meaning."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from corral.core import ConfigError, option
from corral.core.contracts.config import MAX_LAYER_SIZE
from corral.core.learning.off_policy import OffPolicyConfig

Hiddens = list[Annotated[int, Field(ge=1, le=MAX_LAYER_SIZE)]]
Activation = Literal["relu", "tanh", "swish", "elu", "linear"]


class DDPGConfig(
    OffPolicyConfig,
    defaults={
        "train_batch_size": 256,
        "tau": 0.002,
        "learning_starts": 1500,
        "num_envs_per_env_runner": 1,
        "replay_buffer_config": {"type": "PrioritizedReplayBuffer", "capacity": 50_000, "alpha": 0.6},
        "exploration_config": {
            "type": "OrnsteinUhlenbeckNoise",
            "random_timesteps": 1000,
            "ou_base_scale": 0.1,
            "ou_theta": 0.15,
            "ou_sigma": 0.2,
            "initial_scale": 1.0,
            "final_scale": 0.02,
            "scale_timesteps": 10_000,
        },
    },
):
    """Config of :class:`~corral.plugins.ddpg.DDPG` (Box actions only), with RLlib's defaults.

    An actor of ``actor_hiddens`` maps observations to actions in [-1, 1]
    (scaled to the env's bounds, so ``normalize_actions`` stays on); critics of
    ``critic_hiddens`` read the observations with the actions. One update per
    env step on one env (RLlib's natural replay ratio), Polyak-averaged
    targets (``tau``), prioritized replay, Ornstein-Uhlenbeck exploration
    after 1,000 uniformly random steps. ``twin_q``, ``policy_delay`` and
    ``smooth_target_policy`` are TD3's tricks, which :class:`TD3Config` turns on.
    ``lr`` is not used: the actor and the critics have their own rates.
    """

    twin_q: bool = option(False, "training")
    """learn two critics and bootstrap from the smaller estimate (clipped double Q, TD3)"""
    policy_delay: int = option(1, "training", ge=1, le=2**31 - 1)
    """update the actor once every policy_delay critic updates (TD3: 2)"""
    smooth_target_policy: bool = option(False, "training")
    """add clipped Gaussian noise to the target actor's actions in the critics' targets (TD3)"""
    target_noise: float = option(0.2, "training", ge=0)
    """the standard deviation of the target actions' noise, in the actor's [-1, 1] units"""
    target_noise_clip: float = option(0.5, "training", ge=0)
    """the target actions' noise is clipped to [-target_noise_clip, target_noise_clip]"""
    use_state_preprocessor: bool = option(False, "training")
    """read the observations through model's network first (its fcnet_hiddens, or its CNN for images), then the
    actor's and critics' own layers; False: the layers read the flat observations (images: model's CNN alone)"""
    actor_hiddens: Hiddens = option([400, 300], "training", max_length=64)
    """the actor's hidden layers"""
    actor_hidden_activation: Activation = option("relu", "training")
    """the activation of the actor's hidden layers"""
    critic_hiddens: Hiddens = option([400, 300], "training", max_length=64)
    """each critic's hidden layers, after the observations and the actions are concatenated"""
    critic_hidden_activation: Activation = option("relu", "training")
    """the activation of the critics' hidden layers"""
    actor_lr: float = option(1e-3, "training", gt=0)
    """the actor's learning rate"""
    critic_lr: float = option(1e-3, "training", gt=0)
    """the critics' learning rate"""
    use_huber: bool = option(False, "training")
    """Huber loss on the critics' TD errors instead of half their square"""
    huber_threshold: float = option(1.0, "training", gt=0)
    """where the Huber loss turns from quadratic to linear"""
    l2_reg: float = option(1e-6, "training", ge=0)
    """weight of an L2 penalty (half the sum of squares) on the actor's and the critics' weights, biases excluded"""

    def validate(self) -> None:  # type: ignore[override]  # replaces pydantic's deprecated classmethod, as AlgorithmConfig's does
        """DDPG's own checks on top of the shared ones."""
        super().validate()
        name = type(self).__name__.removesuffix("Config")
        if self.lr_schedule is not None:
            raise ConfigError(f"{name} does not use lr_schedule; set actor_lr and critic_lr")
        if not self.normalize_actions:
            raise ConfigError(
                f"{name}'s actor produces actions in [-1, 1]; keep normalize_actions=True so they are scaled to the env's bounds"
            )
        if self.model.model_class() is not None:
            raise ConfigError(
                f"{name} builds its own actor and critics (actor_hiddens, critic_hiddens; use_state_preprocessor for "
                "model's network in front of both); a custom_model is not taken. SAC takes custom actors and critics"
            )


class TD3Config(
    DDPGConfig,
    defaults={
        "twin_q": True,
        "policy_delay": 2,
        "smooth_target_policy": True,
        "l2_reg": 0.0,
        "tau": 5e-3,
        "train_batch_size": 100,
        "learning_starts": 10_000,
        "replay_buffer_config": {"type": "ReplayBuffer", "capacity": 1_000_000},
        "exploration_config": {
            "type": "GaussianNoise",
            "random_timesteps": 10_000,
            "stddev": 0.1,
            "initial_scale": 1.0,
            "final_scale": 1.0,
            "scale_timesteps": 1,
        },
    },
):
    """Config of :class:`~corral.plugins.ddpg.TD3`: DDPG with twin critics, an actor updated every other step,
    smoothed target actions and Gaussian exploration after 10,000 random steps, as in the TD3 paper and RLlib."""
