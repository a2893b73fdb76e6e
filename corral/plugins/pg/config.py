"""PG's hyperparameters: RLlib's defaults, and no option of its own (the loss has no weights to set)."""

from __future__ import annotations

from corral.core import AlgorithmConfig


class PGConfig(AlgorithmConfig, defaults={"lr": 4e-4, "train_batch_size": 200}):
    """Config of :class:`~corral.plugins.pg.PG`.

    RLlib's defaults: ``lr`` 0.0004 and a ``train_batch_size`` of 200 env
    steps, one gradient step per batch. Each row's advantage is its
    discounted return to the end of its fragment: no value function, so an
    episode cut at a fragment's end is not bootstrapped (RLlib's PG does the
    same). Longer fragments (``rollout_fragment_length``, or fewer envs per
    runner) cut fewer episodes.
    """
