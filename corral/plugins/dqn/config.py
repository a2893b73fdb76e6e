"""DQN's hyperparameters.

Double Q, dueling with a 128-unit Q head after a 128x128 network, 3-step returns,
16 replayed rows per env step, Polyak-averaged targets (tau 0.01), epsilon
from 1 to 0.01 over 10k steps.
The learning rate decays linearly from 1e-3 to 1e-4 over the first 100k env
steps (then stays there). On CartPole-v1 a constant 2e-3 keeps knocking a
near-perfect policy off its peak (seeds 0-5 peaked at 292-466 within 100k
steps), a constant 1e-3 reached 475 on 2 of seeds 0-3, and a decay from 2e-3
to 2e-4 on 3 of seeds 0-5; with this decay seeds 0-7 reach a 100-episode mean
of 475 within 100k env steps. ``lr=...`` alone sets a constant rate instead.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator

from corral.core import ConfigError, ModelConfig, option
from corral.core.contracts.config import MAX_LAYER_SIZE
from corral.core.learning.off_policy import OffPolicyConfig


class DQNConfig(
    OffPolicyConfig,
    defaults={
        "lr": 1e-3,
        "lr_schedule": [(0, 1e-3), (100_000, 1e-4)],
        "grad_clip": 10.0,
        "train_batch_size": 64,
        "n_step": 3,
        "learning_starts": 1000,
        "training_intensity": 16.0,
        "tau": 0.01,
        "model": ModelConfig(fcnet_hiddens=[128, 128], fcnet_activation="relu"),
        "min_sample_timesteps_per_iteration": 2000,
        "optimizer": {"type": "adam", "eps": 1e-8},
        "exploration_config": {
            "type": "EpsilonGreedy",
            "initial_epsilon": 1.0,
            "final_epsilon": 0.01,
            "epsilon_timesteps": 10_000,
        },
    },
):
    """Config of :class:`~corral.plugins.dqn.DQN` (Discrete actions only)."""

    worker_side_priorities: ClassVar[bool] = True

    double_q: bool = option(True, "training")
    """choose the next action with the online network and evaluate it with the target network"""
    dueling: bool = option(True, "training")
    """split the Q head into a state value and action advantages"""
    hiddens: list[Annotated[int, Field(ge=1, le=MAX_LAYER_SIZE)]] = option([128], "training", max_length=64)
    """RLlib's Q head: ReLU layers after the model's network (fcnet_hiddens), in the advantage stream and, with
    dueling, in the value stream too; [] puts a linear output right after the network"""
    td_error_loss_fn: Literal["huber", "mse"] = option("huber", "training")
    """the loss on TD errors: Huber (smooth L1) or squared error"""


class SimpleQConfig(
    DQNConfig,
    defaults={
        "double_q": False,
        "dueling": False,
        "hiddens": [],
        "n_step": 1,
        "tau": 1.0,
        "target_network_update_freq": 500,
        "lr": 5e-4,
        "lr_schedule": None,
        "train_batch_size": 32,
    },
):
    """Config of :class:`~corral.plugins.dqn.SimpleQ`: RLlib's plain DQN, without double Q, dueling, a Q head or n-step returns.

    The target network is copied every ``target_network_update_freq`` env steps.
    """


class ApexDQNConfig(
    DQNConfig,
    defaults={
        "n_step": 3,
        "lr": 5e-4,
        "lr_schedule": None,
        "grad_clip": 40.0,
        "hiddens": [256],
        "model": ModelConfig(fcnet_hiddens=[256, 256], fcnet_activation="tanh"),
        "tau": 1.0,
        "train_batch_size": 512,
        "target_network_update_freq": 500_000,
        "training_intensity": 1.0,
        "learning_starts": 50_000,
        "replay_buffer_config": {
            "type": "PrioritizedReplayBuffer",
            "capacity": 2_000_000,
            "alpha": 0.6,
            "epsilon": 1e-6,
            "worker_side_prioritization": True,
        },
        "final_prioritized_replay_beta": 0.4,
        "num_env_runners": 32,
        "num_envs_per_env_runner": 1,
        "rollout_fragment_length": 50,
        "exploration_config": {"type": "PerWorkerEpsilonGreedy"},
        "min_time_s_per_iteration": 30,
        "min_sample_timesteps_per_iteration": 25_000,
    },
):
    """Config of :class:`~corral.plugins.dqn.ApexDQN`: RLlib's Ape-X defaults on top of its DQN's.

    32 env runners exploring with per-runner epsilons, 4 replay shards of
    2M rows in all with priorities computed on the runners, 512-row train
    batches replayed once per sampled step, hard target copies every 500k
    trained steps, 50k steps before learning starts. RLlib's DQN network is
    used (256x256 tanh, a 256-unit dueling head of ReLUs, lr 5e-4, beta held
    at 0.4).
    RLlib's Ape-X asks for one GPU by default; corral learns where
    ``num_gpus`` says (the CPU unless set).
    """

    num_replay_buffer_shards: int = option(4, "training", ge=1, le=1024)
    """replay shards, each a Ray actor with replay_buffer_config's capacity / shards rows (RLlib's
    optimizer={'num_replay_buffer_shards': N} is read as this option)"""
    max_weight_sync_delay: int = option(400, "training", ge=1, le=2**31 - 1)
    """env steps the runners sample, on average each, before they are sent the learner's newest weights (RLlib's
    optimizer={'max_weight_sync_delay': N})"""
    max_requests_in_flight_per_env_runner: int = option(2, "env_runners", ge=1, le=1024)
    """sample calls queued on each remote env runner at a time"""
    max_requests_in_flight_per_replay_worker: int | None = option(None, "training", ge=1, le=2**31 - 1)
    """replay calls waiting on one shard at a time; None (RLlib's inf) sets no limit"""

    @field_validator("max_requests_in_flight_per_replay_worker", mode="before")
    @classmethod
    def _infinite_is_no_limit(cls, value: Any) -> Any:
        return None if isinstance(value, float) and math.isinf(value) and value > 0 else value

    def validate(self) -> None:  # type: ignore[override]  # replaces pydantic's deprecated classmethod, as AlgorithmConfig's does
        """DQN's checks, plus what Ape-X's single learner thread and sharded replay need.

        Raises:
            ConfigError: Learner actors or several GPUs are asked for, or the replay capacity holds fewer rows than shards.
        """
        super().validate()
        if self.num_learners > 0:
            raise ConfigError(
                f"num_learners={self.num_learners}: Ape-X learns in one learner thread beside the sampling loop; "
                "set num_learners=0 (num_gpus=1 puts that learner on a GPU)"
            )
        if self.num_gpus > 1:
            raise ConfigError(f"num_gpus={self.num_gpus}: Ape-X's one learner uses at most one GPU (as RLlib's)")
        capacity = self.replay_buffer_config["capacity"]
        if capacity < self.num_replay_buffer_shards:
            raise ConfigError(
                f"replay_buffer_config capacity {capacity} cannot be split into {self.num_replay_buffer_shards} shards; "
                "raise the capacity or lower num_replay_buffer_shards"
            )
