"""A2C's hyperparameters, each written once with its default, constraint and meaning."""

from __future__ import annotations

from corral.core import GAEConfig, option


class A2CConfig(
    GAEConfig,
    defaults={
        "lr": 7e-4,
        "entropy_coeff": 0.01,
        "normalize_advantages": False,
        "grad_clip": 0.5,
        "num_envs_per_env_runner": 16,
        "train_batch_size": 80,
        "min_sample_timesteps_per_iteration": 2000,
        "optimizer": {"type": "rmsprop", "alpha": 0.99, "eps": 1e-5},
    },
):
    """Config of :class:`~corral.plugins.a2c.A2C`.

    One update per ``train_batch_size`` env steps (by default 16 envs x 5
    steps); ``min_sample_timesteps_per_iteration`` groups many updates into
    one reported iteration. It optimises with RMSprop (alpha 0.99, eps 1e-5), as
    the A2C paper does; ``optimizer={"type": "adam"}`` switches to Adam.
    With ``microbatch_size`` (RLlib's option) the update's gradient is
    computed microbatch by microbatch, for batches larger than memory holds.
    """

    microbatch_size: int | None = option(None, "training", ge=1, le=2**31 - 1)
    """env steps per microbatch: each one's gradient is computed and clipped (grad_clip) on its own, and their mean,
    weighted by steps, makes the one update of the train batch (RLlib's A2C microbatching); None: the whole batch at
    once"""
