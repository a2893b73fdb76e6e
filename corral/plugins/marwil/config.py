"""MARWIL's and BC's hyperparameters, each written once with its default, constraint and meaning."""

from __future__ import annotations

from corral.core import AlgorithmConfig, ConfigError, option


class MARWILConfig(
    AlgorithmConfig,
    defaults={"lr": 1e-4, "train_batch_size": 2000, "postprocess_inputs": True, "num_torch_threads": "auto"},
):
    """Config of :class:`~corral.plugins.marwil.MARWIL`: imitation weighted by exp(beta * advantage / its scale).

    The input is usually recorded experiences (``offline_data(input_=...)``);
    returns are computed over each episode in postprocessing, so
    ``postprocess_inputs`` is on. Updates on batches of thousands of rows use
    the cores other processes leave free (``num_torch_threads="auto"``), where
    the samplers' small forward passes are fastest on one.
    """

    beta: float = option(1.0, "training", ge=0)
    """how strongly better-than-expected actions are preferred: weights exp(beta * A / c) with c the running
    root mean square advantage (the exponent is capped at 20); 0 is behaviour cloning"""
    vf_coeff: float = option(1.0, "training", ge=0)
    """weight of the value loss (the value function estimates the advantages)"""
    bc_logstd_coeff: float = option(0.0, "training", ge=0)
    """for Box actions: a bonus on the log standard deviation of the action distribution, to keep it wide"""
    moving_average_sqd_adv_norm_start: float = option(100.0, "training", gt=0)
    """the starting value of the running mean of squared advantages, c^2"""
    moving_average_sqd_adv_norm_update_rate: float = option(1e-8, "training", gt=0, le=1)
    """how fast c^2 follows each batch's mean squared advantage"""

    def validate(self) -> None:  # type: ignore[override]  # replaces pydantic's deprecated classmethod, as AlgorithmConfig's does
        """MARWIL's own checks on top of the shared ones."""
        super().validate()
        if self.beta > 0 and not self.postprocess_inputs and self.input_ != "sampler":
            raise ConfigError(
                f"MARWIL with beta={self.beta} weighs actions by their returns, which postprocessing computes; "
                "set offline_data(postprocess_inputs=True), or beta=0 (behaviour cloning)"
            )


class BCConfig(MARWILConfig, defaults={"beta": 0.0, "postprocess_inputs": False}):
    """Config of :class:`~corral.plugins.marwil.BC`: MARWIL with ``beta=0``, learning to act as the data does."""

    def validate(self) -> None:  # type: ignore[override]  # replaces pydantic's deprecated classmethod, as AlgorithmConfig's does
        """BC's own check: it is MARWIL with beta 0."""
        super().validate()
        if self.beta != 0:
            raise ConfigError(f"BC is MARWIL with beta=0, but beta={self.beta}; use MARWIL for advantage weighting")
