"""R2D2's hyperparameters, with RLlib's R2D2 defaults.

RLlib's R2D2 is its DQN with a recurrent model: ``train_batch_size`` counts env
steps (``train_batch_size // max_seq_len`` sequences per update), the replay
buffer keeps sequences (``storage_unit="sequences"``) and
each stored sequence starts with up to ``replay_buffer_config["replay_burn_in"]``
steps before it, which only warm up the state.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from corral.core import ConfigError, ModelConfig, option
from corral.core.learning.off_policy import OffPolicyConfig


class R2D2Config(
    OffPolicyConfig,
    defaults={
        "lr": 1e-4,
        "gamma": 0.997,
        "train_batch_size": 1000,
        "target_network_update_freq": 1000,
        "training_intensity": 150.0,
        "tau": 1.0,
        "learning_starts": 1000,
        "num_envs_per_env_runner": 1,
        "optimizer": {"type": "adam", "eps": 1e-3},
        "replay_buffer_config": {"type": "ReplayBuffer", "capacity": 100_000, "storage_unit": "sequences", "replay_burn_in": 0},
        "model": ModelConfig(use_lstm=True),
        "exploration_config": {
            "type": "EpsilonGreedy",
            "initial_epsilon": 1.0,
            "final_epsilon": 0.02,
            "epsilon_timesteps": 10_000,
        },
    },
):
    """Config of :class:`~corral.plugins.r2d2.R2D2` (Discrete actions, a recurrent model).

    The model must have memory (``use_lstm``, the default, ``use_attention``, or a
    recurrent custom model); its outputs are the Q-values, one per action.
    """

    replays_sequences: ClassVar[bool] = True

    zero_init_states: bool = option(True, "training")
    """start every replayed sequence from the zero state (True) or from the state stored with it (False)"""
    use_h_function: bool = option(True, "training")
    """rescale values with h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps * x in the targets (R2D2's value rescaling)"""
    h_function_epsilon: float = option(1e-3, "training", gt=0)
    """the eps of the h-function"""
    double_q: bool = option(True, "training")
    """choose the next action with the online network and evaluate it with the target network"""
    td_error_loss_fn: Literal["huber", "mse"] = option("huber", "training")
    """the loss on TD errors: Huber (smooth L1) or squared error"""

    @property
    def replay_burn_in(self) -> int:
        """The first steps of each replayed sequence that only warm up the state (``replay_buffer_config``)."""
        burn_in: Any = self.replay_buffer_config.get("replay_burn_in", 0)
        return int(burn_in)

    def validate(self) -> None:  # type: ignore[override]  # replaces pydantic's deprecated classmethod, as AlgorithmConfig's does
        """R2D2's own checks on top of the replay ones: a recurrent model, one-step targets, sequences in the buffer.

        Raises:
            ConfigError: naming the option and what to set instead.
        """
        super().validate()
        if not self.model.has_memory and self.model.custom_model is None:
            raise ConfigError(
                "R2D2 learns a recurrent Q-network: set model.use_lstm=True (or use_attention=True, or a recurrent custom_model)"
            )
        if self.n_step != 1:
            raise ConfigError(f"n_step={self.n_step}: R2D2 learns one-step targets within each replayed sequence; set n_step=1")
        if self.replay_buffer_config.get("storage_unit", "sequences") != "sequences":
            raise ConfigError("R2D2's replay buffer keeps sequences: set replay_buffer_config storage_unit='sequences'")
        for key in ("zero_init_states", "replay_zero_init_states"):  # RLlib 2.x's scripts repeat it in the buffer config
            if self.replay_buffer_config.get(key, self.zero_init_states) != self.zero_init_states:
                raise ConfigError(
                    f"replay_buffer_config {key}={self.replay_buffer_config[key]} differs from zero_init_states="
                    f"{self.zero_init_states}, which sets where replayed sequences start: set training(zero_init_states=...)"
                )
