"""PPO's hyperparameters, each written once with its default, constraint and meaning."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from corral.core import ConfigError, GAEConfig, option

AUTO_MINIBATCH_SIZE = 512
"""the rows of a minibatch with ``minibatch_size="auto"`` (fewer if the train batch has fewer)"""


class PPOConfig(
    GAEConfig,
    defaults={"lr": 2e-3, "train_batch_size": 4000, "lambda_": 0.95, "vf_loss_coeff": 0.25},
):
    """Config of :class:`~corral.plugins.ppo.PPO`: the shared options plus PPO's own (set with ``.training()``).

    ``clip_param`` (0.3), ``grad_clip`` (None) and the adaptive KL penalty are
    RLlib's: RLlib's tuned files leave them out and learn with them (its
    CartPole file, a 32-unit linear network with a shared value head, stalled
    below its 150 with 0.2 and 0.5). ``lambda_`` (0.95) is Stable-Baselines3's.
    Minibatches of 512 (``minibatch_size="auto"``: 512 rows, or the whole
    train batch where it holds fewer) at ``lr`` 2e-3 make a quarter of the
    updates that 128 at 3e-4 make, each barely dearer, for as many env steps
    to a goal: on CartPole-v1 (seeds 0-2), 68k-72k env steps to 475 in 2.6-2.7 s
    of training against 76k-92k in 5.3-6.4 s; no worse on Acrobot-v1 and
    Pendulum-v1 (``benchmarks/ppo_defaults_sweep.py``). The adaptive KL penalty
    holds the larger steps back. The value loss is RLlib's, the mean squared
    error (each row's clamped at ``vf_clip_param`` where it is set; RLlib's 10
    is off by default here), weighed by ``vf_loss_coeff`` 0.25 (RLlib's is 1.0):
    the weight Stable-Baselines3's 0.5 on half the squared error gives.
    """

    clip_param: float = option(0.3, "training", gt=0)
    """the PPO clipping range: the probability ratio is clipped to [1 - clip_param, 1 + clip_param]"""
    vf_clip_param: float | None = option(None, "training", gt=0)
    """clamp each row's squared value error at this (RLlib's meaning: a larger error then teaches the value function
    nothing, so it is sensitive to the scale of the returns); None does not clamp"""
    kl_coeff: float = option(0.2, "training", ge=0)
    """initial weight of the KL penalty; adapted towards kl_target after each update (0 disables it)"""
    kl_target: float = option(0.01, "training", gt=0)
    """the KL divergence per update that the adaptive penalty aims for"""
    num_epochs: int = option(10, "training", ge=1, le=10_000)
    """passes of minibatch SGD over each train batch (RLlib's num_sgd_iter)"""
    minibatch_size: Annotated[int, Field(ge=1, le=2**31 - 1)] | Literal["auto"] = option("auto", "training")
    """rows per SGD minibatch (RLlib's sgd_minibatch_size); 'auto': 512, or the whole train batch if it holds fewer;
    with train_batch_size_per_learner, one Learner's rows of it"""

    @property
    def whole_minibatch_size(self) -> int:
        """The rows of one SGD step, over all Learners: ``minibatch_size`` (512 for ``"auto"``), times the Learners
        (at least one) when ``train_batch_size_per_learner`` counts one Learner's rows, as RLlib's new stack reads it."""
        size = AUTO_MINIBATCH_SIZE if self.minibatch_size == "auto" else self.minibatch_size
        return size if self.train_batch_size_per_learner is None else size * max(1, self.num_learners)

    def minibatched_batch(self) -> tuple[str, int]:
        """The batch one process cuts into minibatches, and the options that size it (for the check against
        ``minibatch_size``; DD-PPO's runners each cut their own sample)."""
        if self.train_batch_size_per_learner is not None:
            return "train_batch_size_per_learner", self.train_batch_size_per_learner
        return "train_batch_size", self.train_batch_size

    def validate(self) -> None:  # type: ignore[override]  # replaces pydantic's deprecated classmethod, as AlgorithmConfig's does
        """PPO's own checks on top of the shared ones."""
        super().validate()
        name, batch = self.minibatched_batch()
        if self.minibatch_size != "auto" and self.minibatch_size > batch:
            raise ConfigError(
                f"minibatch_size={self.minibatch_size} is larger than {name}={batch}; "
                "make the minibatch at most the train batch, or 'auto'"
            )
