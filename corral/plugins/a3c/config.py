"""A3C's hyperparameters: RLlib's A3C options and defaults, and what learning on the env runners rules out."""

from __future__ import annotations

from corral.core import ConfigError, GAEConfig, option


class A3CConfig(
    GAEConfig,
    defaults={
        "lr": 1e-4,
        "grad_clip": 40.0,
        "lambda_": 1.0,
        "vf_loss_coeff": 0.5,
        "entropy_coeff": 0.01,
        "normalize_advantages": False,
        "num_env_runners": 2,
        "rollout_fragment_length": 10,
        "min_time_s_per_iteration": 5,
    },
):
    """Config of :class:`~corral.plugins.a3c.A3C`.

    Each remote env runner samples ``num_envs_per_env_runner`` x
    ``rollout_fragment_length`` steps, computes the gradients of the
    actor-critic loss on them (clipped to ``grad_clip``) and sends them; the
    learner applies each runner's gradients as they arrive and sends that
    runner the new weights with its next call. So there is no train batch
    (``train_batch_size`` is -1, RLlib's rule for learning on the runners'
    samples), and the loss terms are sums over a runner's rows, as RLlib's
    A3C sums them (its learning rate of 1e-4 is set for sums). With
    ``num_env_runners=0`` the learner samples one call's steps itself and
    makes the same update. The defaults are RLlib's: two runners, fragments
    of 10 steps, Adam at 1e-4, ``grad_clip`` 40, ``lambda_`` 1.0,
    ``vf_loss_coeff`` 0.5, ``entropy_coeff`` 0.01, and iterations of at least
    5 s (``min_time_s_per_iteration``).
    """

    train_batch_size: int = option(-1, "training", ge=-1, le=2**31 - 1)
    """-1: each update is one runner's sample call (num_envs_per_env_runner x rollout_fragment_length)"""
    use_critic: bool = option(True, "training")
    """learn a value function and use it as the baseline; False: the advantage is the discounted return and the
    value loss is left out"""

    def validate(self) -> None:  # type: ignore[override]  # replaces pydantic's deprecated classmethod, as AlgorithmConfig's does
        """A3C's rules first, then the actor-critic checks."""
        problems = (
            (
                self.train_batch_size != -1,
                f"train_batch_size={self.train_batch_size}: each A3C update is one env runner's sample call; leave "
                "it at -1 and size the sample with num_envs_per_env_runner and rollout_fragment_length",
            ),
            (
                self.rollout_fragment_length == "auto",
                "rollout_fragment_length='auto' divides train_batch_size, which A3C does not have; give it steps",
            ),
            (
                self.num_learners > 0,
                "num_learners > 0: A3C's env runners compute the gradients and the main process applies them; set "
                "num_learners=0 (A2C, PPO and IMPALA learn on Learner actors)",
            ),
        )
        for wrong, message in problems:
            if wrong:
                raise ConfigError(message)
        super().validate()
