"""SAC's hyperparameters, each written once with its default, constraint and meaning."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ValidationError, ValidationInfo, field_validator

from corral.core import ConfigError, ModelConfig, option
from corral.core.contracts.options.model_config import model_options_problem
from corral.core.learning.off_policy import OffPolicyConfig


class SACConfig(
    OffPolicyConfig,
    defaults={
        "train_batch_size": 256,
        "tau": 0.005,
        "learning_starts": 1000,
        "num_envs_per_env_runner": 1,
        "num_torch_threads": "auto",
        "optimizer": {"type": "adam", "eps": 1e-8},
        "replay_buffer_config": {"type": "ReplayBuffer", "capacity": 1_000_000},
        "model": ModelConfig(fcnet_hiddens=[256, 256], fcnet_activation="relu"),
    },
):
    """Config of :class:`~corral.plugins.sac.SAC`: Box actions, or Discrete with the discrete variant.

    The default replay ratio (``training_intensity=None``, RLlib's native ratio)
    is one gradient step per env step on one sub-environment, as in the paper
    and RLlib, whatever ``train_batch_size``. ``lr`` is not used (it may be
    None, as RLlib's new stack asks): SAC has a learning rate per network. An update of batch 256 on 256x256 networks per
    env step bounds the run, so it uses the cores other processes leave free
    (``num_torch_threads="auto"``, re-read every iteration): on 2 quiet cores
    that is 1.7x one thread's speed, and on a busy machine it falls back to one
    thread rather than wait for cores it does not get.
    """

    lr: float | None = option(1e-3, "training", gt=0)  # type: ignore[assignment]  # SAC's alone may be None
    """not used: SAC learns with actor_lr, critic_lr and alpha_lr; None (RLlib's new stack asks for it) says so"""
    actor_lr: float = option(3e-4, "training", gt=0)
    """learning rate of the actor (policy network)"""
    critic_lr: float = option(3e-4, "training", gt=0)
    """learning rate of the twin Q networks"""
    alpha_lr: float = option(3e-4, "training", gt=0)
    """learning rate of the entropy temperature alpha"""
    initial_alpha: float = option(1.0, "training", gt=0)
    """the entropy temperature at the start"""
    target_entropy: float | Literal["auto"] = option("auto", "training")
    """entropy alpha is tuned towards; 'auto': -dim(actions) for Box, 0.98 * log(n) * target_entropy_scale for Discrete"""
    target_entropy_scale: float = option(0.98, "training", gt=0, le=1)
    """for Discrete actions with target_entropy='auto': the fraction of the maximum entropy log(n) to aim for"""
    twin_q: bool = option(True, "training")
    """learn two Q networks and use the smaller estimate (clipped double Q)"""
    q_model_config: dict[str, Any] = option({}, "training")
    """the critics' network where it differs from model, e.g. {'fcnet_hiddens': [64, 64]} (RLlib's older name:
    Q_model); {} builds them as model says"""
    policy_model_config: dict[str, Any] = option({}, "training")
    """the actor's network where it differs from model (RLlib's older name: policy_model); {} builds it as model says"""

    @field_validator("q_model_config", "policy_model_config")
    @classmethod
    def _model_options(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        try:
            ModelConfig.model_validate(value)
        except ValidationError as exc:
            raise ValueError(model_options_problem(exc, str(info.field_name), "model option")) from None
        return value

    def network_config(self, network: Literal["actor", "critic"]) -> ModelConfig:
        """The model options of the actor or of the critics: ``model`` updated by their own config.

        ``model``'s ``custom_model`` is the actor's only: the critics' comes from ``q_model_config``.

        Args:
            network: ``"actor"`` (``policy_model_config``) or ``"critic"`` (``q_model_config``).

        Returns:
            The merged, validated model options.
        """
        own = self.policy_model_config if network == "actor" else self.q_model_config
        shared = self.model.model_dump()
        if network == "critic":  # model's custom_model is the actor's (as config.rl_module() sets it), not the critics'
            shared = {**shared, "custom_model": None, "custom_model_config": {}}
        return ModelConfig.model_validate({**shared, **own})

    def validate(self) -> None:  # type: ignore[override]  # replaces pydantic's deprecated classmethod, as AlgorithmConfig's does
        """SAC's own checks on top of the shared ones."""
        super().validate()
        if self.lr_schedule is not None:
            raise ConfigError("SAC does not use lr_schedule; set actor_lr, critic_lr and alpha_lr")
        if not self.normalize_actions:
            raise ConfigError(
                "SAC's actor produces actions in [-1, 1]; keep normalize_actions=True so they are scaled to the env's bounds"
            )
