"""A2C's hyperparameters, each written once with its default, constraint and meaning."""

from __future__ import annotations

from typing import Literal

from corral.core import AlgorithmConfig, option


class A2CConfig(
    AlgorithmConfig,
    defaults={
        "lr": 7e-4,
        "grad_clip": 0.5,
        "num_envs_per_env_runner": 16,
        "train_batch_size": 80,
        "min_sample_timesteps_per_iteration": 2000,
    },
):
    """Config of :class:`~corral.plugins.a2c.A2C`.

    One update per ``train_batch_size`` env steps (by default 16 envs x 5
    steps); ``min_sample_timesteps_per_iteration`` groups many updates into
    one reported iteration.
    """

    lambda_: float = option(1.0, "training", ge=0, le=1)
    """the GAE lambda; 1.0 gives A2C's classic n-step returns over the rollout fragment"""
    vf_loss_coeff: float = option(0.5, "training", ge=0)
    """weight of the value loss in the total loss"""
    entropy_coeff: float = option(0.01, "training", ge=0)
    """weight of the entropy bonus in the total loss"""
    optimizer: Literal["rmsprop", "adam"] = option("rmsprop", "training")
    """the optimizer: RMSprop (alpha 0.99, eps 1e-5) as in the A2C paper, or Adam"""
    normalize_advantages: bool = option(False, "training")
    """standardise advantages over each train batch"""
