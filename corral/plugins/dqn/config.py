"""DQN's hyperparameters.

Double Q, dueling with a 128-unit Q head after a 128x128 network, 3-step returns,
16 replayed rows per env step, Polyak-averaged targets (tau 0.01), epsilon
from 1 to 0.01 over 10k steps.
The learning rate decays linearly from 1e-3 to 1e-4 over the first 100k env
steps (then stays there). On CartPole-v1 a constant 2e-3 keeps knocking a
near-perfect policy off its peak (seeds 0-5 peaked at 292-466 within 100k
steps), a constant 1e-3 reached 475 on 2 of seeds 0-3, and a decay from 2e-3
to 2e-4 on 3 of seeds 0-5; with this decay seeds 0-7 reach a 100-episode mean
of 475 within 100k env steps. ``lr=...`` alone sets a constant rate instead.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from corral.core import ModelConfig, option
from corral.core.contracts.config import MAX_LAYER_SIZE
from corral.core.learning.off_policy import OffPolicyConfig


class DQNConfig(
    OffPolicyConfig,
    defaults={
        "lr": 1e-3,
        "lr_schedule": [(0, 1e-3), (100_000, 1e-4)],
        "grad_clip": 10.0,
        "train_batch_size": 64,
        "n_step": 3,
        "learning_starts": 1000,
        "training_intensity": 16.0,
        "tau": 0.01,
        "model": ModelConfig(fcnet_hiddens=[128, 128], fcnet_activation="relu"),
        "min_sample_timesteps_per_iteration": 2000,
        "optimizer": {"type": "adam", "eps": 1e-8},
        "exploration_config": {
            "type": "EpsilonGreedy",
            "initial_epsilon": 1.0,
            "final_epsilon": 0.01,
            "epsilon_timesteps": 10_000,
        },
    },
):
    """Config of :class:`~corral.plugins.dqn.DQN` (Discrete actions only)."""

    double_q: bool = option(True, "training")
    """choose the next action with the online network and evaluate it with the target network"""
    dueling: bool = option(True, "training")
    """split the Q head into a state value and action advantages"""
    hiddens: list[Annotated[int, Field(ge=1, le=MAX_LAYER_SIZE)]] = option([128], "training", max_length=64)
    """RLlib's Q head: ReLU layers after the model's network (fcnet_hiddens), in the advantage stream and, with
    dueling, in the value stream too; [] puts a linear output right after the network"""
    td_error_loss_fn: Literal["huber", "mse"] = option("huber", "training")
    """the loss on TD errors: Huber (smooth L1) or squared error"""


class SimpleQConfig(
    DQNConfig,
    defaults={
        "double_q": False,
        "dueling": False,
        "hiddens": [],
        "n_step": 1,
        "tau": 1.0,
        "target_network_update_freq": 500,
        "lr": 5e-4,
        "lr_schedule": None,
        "train_batch_size": 32,
    },
):
    """Config of :class:`~corral.plugins.dqn.SimpleQ`: RLlib's plain DQN, without double Q, dueling, a Q head or n-step returns.

    The target network is copied every ``target_network_update_freq`` env steps.
    """
