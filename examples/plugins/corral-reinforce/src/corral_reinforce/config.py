"""REINFORCE's hyperparameters: the actor-critic ones (GAE, loss weights) come from corral's GAEConfig."""

from __future__ import annotations

from corral.core import GAEConfig


class REINFORCEConfig(GAEConfig, defaults={"lr": 4e-3, "train_batch_size": 4000, "num_envs_per_env_runner": 8}):
    """Config of :class:`~corral_reinforce.REINFORCE`.

    Each train batch (``train_batch_size`` env steps across the vector envs)
    gives one gradient step. The defaults reach a 100-episode mean of 400 on
    CartPole-v1 after 126k-134k env steps (seeds 0-2). Returns are Monte Carlo returns within each
    rollout fragment; where a fragment cuts an episode, the baseline's value
    estimate stands in for the rest. ``lambda_`` below 1 blends in the
    baseline's estimates (GAE); ``entropy_coeff`` 0 is plain REINFORCE.
    """
