"""What every replay-based policy shares: its config fields, n-step transitions, target networks.

DQN and SAC (and any third-party off-policy plugin) subclass
:class:`OffPolicyConfig` and :class:`OffPolicyPolicy` here, and
:class:`~corral.core.training.off_policy.OffPolicyAlgorithm` (the replay
training loop, in the training room), and write only their loss.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch

from corral.core.common.sample_batch import SampleBatch
from corral.core.contracts.config import MAX_UPDATES_PER_ENV_STEP, AlgorithmConfig, option
from corral.core.learning.policies.target_networks import TargetNetworkPolicy
from corral.core.learning.postprocessing import compute_nstep
from corral.core.learning.replay.replay_buffers import PrioritizedReplayBuffer, check_replay_buffer_config
from corral.core.learning.replay.script_buffers import ScriptReplayBuffer
from corral.core.networks.distributions import ActionDistribution
from corral.errors import ConfigError


class OffPolicyConfig(AlgorithmConfig, defaults={"train_batch_size": 64, "num_envs_per_env_runner": 8}):
    """The options every replay-based algorithm has (set with ``.training()`` / ``.checkpointing()``)."""

    replays_sequences: ClassVar[bool] = False
    """whether the algorithm's buffer rows are sequences (a recurrent DQN's): only then does replay_buffer_config
    take storage_unit='sequences' and a replay_burn_in"""

    worker_side_priorities: ClassVar[bool] = False
    """whether the algorithm's policy computes its rows' replay priorities where they are sampled: only then does
    replay_buffer_config take worker_side_prioritization=True"""

    replay_buffer_config: dict[str, Any] = option({"type": "ReplayBuffer", "capacity": 100_000}, "training")
    """the replay buffer: {'type': 'ReplayBuffer' | 'PrioritizedReplayBuffer', 'capacity': N, 'alpha': 0.6,
    'worker_side_prioritization': False}"""
    prioritized_replay_beta: float = option(0.4, "training", ge=0, le=1)
    """initial importance-sampling exponent of prioritized replay"""
    final_prioritized_replay_beta: float = option(1.0, "training", ge=0, le=1)
    """importance-sampling exponent after annealing"""
    prioritized_replay_beta_annealing_timesteps: int = option(100_000, "training", ge=1, le=2**53)
    """env steps over which beta is annealed linearly to its final value"""
    learning_starts: int = option(1000, "training", ge=0, le=2**53)
    """env steps sampled before the first update"""
    training_intensity: float | None = option(None, "training", gt=0)
    """replayed rows per sampled env step (the replay ratio); None is RLlib's native ratio: one train batch per
    rollout_fragment_length steps of every sub-environment, or per step of every sub-environment with 'auto'; for rows
    read from input_ (files or a reader, without the sampler), one train batch per train batch read"""
    n_step: int = option(1, "training", ge=1, le=2**31 - 1)
    """steps summed into each transition's return before bootstrapping"""
    tau: float = option(1.0, "training", gt=0, le=1)
    """target update: 1.0 copies every target_network_update_freq env steps; below 1, Polyak averaging after every update"""
    target_network_update_freq: int = option(500, "training", ge=0, le=2**53)
    """env steps between hard target network updates (used when tau is 1.0; 0, as in RLlib: every training step)"""
    save_replay_buffer: bool = option(False, "checkpointing")
    """store the replay buffer's contents in checkpoints (as numpy arrays, never pickled)"""

    def validate(self) -> None:  # type: ignore[override]  # replaces pydantic's deprecated classmethod, as AlgorithmConfig's does
        """The shared checks, plus the replay buffer config (nothing is allocated) and the replay ratio."""
        super().validate()
        if check_replay_buffer_config(self.replay_buffer_config)[0] is ScriptReplayBuffer:
            if self.save_replay_buffer or self.replays_sequences:
                raise ConfigError(
                    f"replay_buffer_config type {self.replay_buffer_config.get('type')!r} is a buffer class of your own, "
                    "which corral neither saves in checkpoints (save_replay_buffer=False) nor replays sequences from "
                    f"({type(self).__name__}); use a built-in type for that"
                )
        else:
            self._check_built_in_buffer()
        batch = self.total_train_batch_size
        if self.training_intensity is not None and self.training_intensity / batch > MAX_UPDATES_PER_ENV_STEP:
            raise ConfigError(
                f"training_intensity={self.training_intensity} with a train batch of {batch} asks for "
                f"{self.training_intensity / batch:.0f} gradient updates per sampled env step; "
                f"at most {MAX_UPDATES_PER_ENV_STEP} are allowed (raise train_batch_size or lower training_intensity)"
            )
        if self.n_step > 1 and self.input_ != "sampler" and not self.postprocess_inputs:
            raise ConfigError(
                f"n_step={self.n_step} sums the rewards of each row's next steps, which postprocessing gathers from the "
                "input's episodes; set offline_data(postprocess_inputs=True), or n_step=1 (a file's rows are one-step "
                "transitions as they are)"
            )

    def _check_built_in_buffer(self) -> None:
        """What corral's own buffers replay: steps or sequences, and who computes worker-side priorities."""
        buffer = self.replay_buffer_config
        asks_sequences = buffer.get("storage_unit") == "sequences" or buffer.get("replay_burn_in", 0) > 0
        if asks_sequences and not self.replays_sequences:
            raise ConfigError(
                f"replay_buffer_config {dict(buffer)} asks for replayed sequences (storage_unit='sequences' or a "
                f"replay_burn_in), but {type(self).__name__} replays single steps; R2D2 replays sequences"
            )
        if buffer.get("worker_side_prioritization"):
            if not self.worker_side_priorities:
                raise ConfigError(
                    f"replay_buffer_config worker_side_prioritization=True asks the env runners for replay priorities, "
                    f"which {type(self).__name__}'s policy computes where it learns; leave it False (DQN and ApexDQN "
                    "compute them on the runners)"
                )
            if check_replay_buffer_config(buffer)[0] is not PrioritizedReplayBuffer:
                raise ConfigError(
                    f"replay_buffer_config worker_side_prioritization=True sets initial priorities, which uniform replay "
                    f"({buffer.get('type', 'ReplayBuffer')!r}) has none of; use type 'PrioritizedReplayBuffer'"
                )


class OffPolicyPolicy(TargetNetworkPolicy):
    """A policy trained from replay: n-step postprocessing and target networks
    (:class:`~corral.core.learning.policies.target_networks.TargetNetworkPolicy`).

    Subclasses list the networks that have target copies in ``target_pairs()``
    and write ``learn_on_batch``. They should return the per-row TD errors under
    the :attr:`TD_ERROR` key of the stats (a numpy array) for prioritized replay.
    """

    config: OffPolicyConfig
    custom_action_dists = False  # a replay learner's loss reads the outputs as Q-values or its own distribution's
    TD_ERROR = "td_error"
    """the stats key of the per-row TD errors, which become the replayed rows' new priorities"""
    REPLAY_COLUMNS = (
        SampleBatch.OBS,
        SampleBatch.ACTIONS,
        SampleBatch.REWARDS,
        SampleBatch.NEXT_OBS,
        SampleBatch.DISCOUNTS,
        SampleBatch.WEIGHTS,
    )
    """the columns of a replayed n-step batch that a TD loss reads"""
    STORED_COLUMNS = (
        SampleBatch.OBS,
        SampleBatch.ACTIONS,
        SampleBatch.REWARDS,
        SampleBatch.NEXT_OBS,
        SampleBatch.TERMINATEDS,
        SampleBatch.TRUNCATEDS,
        SampleBatch.DISCOUNTS,
    )
    """the columns of a row in the replay buffer (what :func:`compute_nstep` makes of a sampled fragment): rows read
    from files keep these, so they share a buffer with sampled ones; a subclass whose sampled rows carry more says so here"""

    @property
    def replay_row_steps(self) -> int:
        """Env steps in one replay-buffer row: 1; a policy whose rows are sequences says how many at most."""
        return 1

    def extra_action_out(
        self, model_out: dict[str, torch.Tensor], dist: ActionDistribution, actions: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """Nothing beyond the action: replay does not need log-probabilities of old actions."""
        return {}

    def postprocess_trajectory(self, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> SampleBatch:
        """n-step transitions (``rewards``, ``new_obs``, ``discounts``) of the valid rows."""
        return compute_nstep(fragment, bootstrap_obs, self.config.n_step, self.config.gamma)

    def input_rows(self, rows: SampleBatch, postprocessed: bool) -> SampleBatch:
        """Rows read from files as replayed transitions: their :attr:`STORED_COLUMNS`, one-step ones as they are.

        A file's row is a one-step transition (``obs``, ``actions``, ``rewards``,
        ``new_obs``): without postprocessing its discount is ``gamma``, or 0 where
        the episode terminated (a truncated one is bootstrapped from ``new_obs``),
        exactly what :func:`compute_nstep` gives with ``n_step=1``; a larger
        ``n_step`` needs postprocessing (the config refuses it otherwise).
        """
        if not postprocessed:
            discounts = np.where(rows[SampleBatch.TERMINATEDS], 0.0, self.config.gamma).astype(np.float32)
            rows = SampleBatch({**rows, SampleBatch.DISCOUNTS: discounts})
        return SampleBatch({k: rows[k] for k in self.STORED_COLUMNS})
