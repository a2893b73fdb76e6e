"""What every replay-based algorithm shares: its config fields, its training loop, target networks.

DQN and SAC (and any third-party off-policy plugin) subclass
:class:`OffPolicyConfig`, :class:`OffPolicyAlgorithm` and :class:`OffPolicyPolicy`
and write only their loss. The loop: sample a fragment, turn it into n-step
transitions, store them in a replay buffer per policy id, and once
``learning_starts`` env steps were sampled, replay ``training_intensity`` rows
per sampled env step in minibatches of ``train_batch_size``, updating priorities
and target networks as configured.
"""

from __future__ import annotations

import copy
from typing import Any, NamedTuple, cast

import numpy as np
import torch
from torch import nn

from corral.core.common.restored import restored_count, restored_float
from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch
from corral.core.contracts.algorithm import Algorithm
from corral.core.contracts.config import MAX_UPDATES_PER_ENV_STEP, AlgorithmConfig, option
from corral.core.contracts.policy import Policy, load_finite_weights
from corral.core.learning.distributions import ActionDistribution
from corral.core.learning.postprocessing import compute_nstep
from corral.core.learning.replay_buffers import ReplayBuffer, check_replay_buffer_config, make_replay_buffer, replay_row_bytes
from corral.core.learning.schedules import linear_schedule
from corral.core.memory import check_fits
from corral.core.seeding import int_seed
from corral.errors import ConfigError


class OffPolicyConfig(AlgorithmConfig, defaults={"train_batch_size": 64, "num_envs_per_env_runner": 8}):
    """The options every replay-based algorithm has (set with ``.training()`` / ``.checkpointing()``)."""

    replay_buffer_config: dict[str, Any] = option({"type": "ReplayBuffer", "capacity": 100_000}, "training")
    """the replay buffer: {'type': 'ReplayBuffer' | 'PrioritizedReplayBuffer', 'capacity': N, 'alpha': 0.6}"""
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
    rollout_fragment_length steps of every sub-environment, or per step of every sub-environment with 'auto'"""
    n_step: int = option(1, "training", ge=1, le=2**31 - 1)
    """steps summed into each transition's return before bootstrapping"""
    tau: float = option(1.0, "training", gt=0, le=1)
    """target update: 1.0 copies every target_network_update_freq env steps; below 1, Polyak averaging after every update"""
    target_network_update_freq: int = option(500, "training", ge=1, le=2**53)
    """env steps between hard target network updates (used when tau is 1.0)"""
    save_replay_buffer: bool = option(False, "checkpointing")
    """store the replay buffer's contents in checkpoints (as numpy arrays, never pickled)"""

    def validate(self) -> None:  # type: ignore[override]  # replaces pydantic's deprecated classmethod, as AlgorithmConfig's does
        """The shared checks, plus the replay buffer config (nothing is allocated) and the replay ratio."""
        super().validate()
        check_replay_buffer_config(self.replay_buffer_config)
        if self.training_intensity is not None and self.training_intensity / self.train_batch_size > MAX_UPDATES_PER_ENV_STEP:
            raise ConfigError(
                f"training_intensity={self.training_intensity} with train_batch_size={self.train_batch_size} asks for "
                f"{self.training_intensity / self.train_batch_size:.0f} gradient updates per sampled env step; "
                f"at most {MAX_UPDATES_PER_ENV_STEP} are allowed (raise train_batch_size or lower training_intensity)"
            )
        if self.n_step > 1 and self.input_ != "sampler" and not self.postprocess_inputs:
            raise ConfigError(
                f"n_step={self.n_step} sums the rewards of each row's next steps, which postprocessing gathers from the "
                "input's episodes; set offline_data(postprocess_inputs=True), or n_step=1 (a file's rows are one-step "
                "transitions as they are)"
            )


def update_target(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Move ``target``'s parameters towards ``source``'s: ``tau=1`` copies, otherwise Polyak averaging.

    Buffers (running statistics, say) are always copied, whatever ``tau``.

    Args:
        target: the target network, changed in place.
        source: the online network, with the same parameters and buffers in the same order.
        tau: the step towards ``source``: 1 (or more) copies it, a value in ``(0, 1)`` sets
            ``target = (1 - tau) * target + tau * source``.

    Raises:
        ValueError: the two networks have different numbers of parameters or buffers.
    """
    _TargetTensors.of(target, source).move(tau)


class _TargetTensors(NamedTuple):
    """A target network's and its online network's parameters and buffers, listed once (listing them costs more
    than the update itself on small networks)."""

    target: nn.Module
    online: nn.Module
    target_params: list[torch.Tensor]
    online_params: list[torch.Tensor]
    target_buffers: list[torch.Tensor]
    online_buffers: list[torch.Tensor]

    @classmethod
    def of(cls, target: nn.Module, online: nn.Module) -> _TargetTensors:
        tensors = cls(
            target, online, *(list(t) for t in (target.parameters(), online.parameters(), target.buffers(), online.buffers()))
        )
        if len(tensors.target_params) != len(tensors.online_params) or len(tensors.target_buffers) != len(tensors.online_buffers):
            raise ValueError(
                f"a target network and its online network differ in their tensors: {len(tensors.target_params)} and "
                f"{len(tensors.online_params)} parameters, {len(tensors.target_buffers)} and "
                f"{len(tensors.online_buffers)} buffers"
            )
        return tensors

    def move(self, tau: float) -> None:
        """What :func:`update_target` does, in one foreach call per kind of tensor."""
        with torch.no_grad():
            if self.target_params and tau >= 1.0:
                torch._foreach_copy_(self.target_params, self.online_params)
            elif self.target_params:
                torch._foreach_lerp_(self.target_params, self.online_params, tau)
            if self.target_buffers:
                torch._foreach_copy_(self.target_buffers, self.online_buffers)


class OffPolicyPolicy(Policy):
    """A policy trained from replay: n-step postprocessing and target networks.

    Subclasses list the networks that have target copies in ``target_pairs()``
    and write ``learn_on_batch``. They should return the per-row TD errors under
    the :attr:`TD_ERROR` key of the stats (a numpy array) for prioritized replay.
    """

    config: OffPolicyConfig
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

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.target_model = copy.deepcopy(self.model).requires_grad_(False)

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """(target, online) network pairs; by default the whole model."""
        return [(self.target_model, self.model)]

    def update_targets(self, tau: float) -> None:
        """Update every target network (``tau=1`` copies)."""
        pairs = self.target_pairs()
        cached = self.__dict__.get("_target_tensors", [])
        # a subclass may swap a network (a policy map restoring one, say): list the tensors again when the pairs change
        if [(t.target, t.online) for t in cached] != pairs:
            cached = self.__dict__["_target_tensors"] = [_TargetTensors.of(target, online) for target, online in pairs]
        for tensors in cached:
            tensors.move(tau)

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

    def get_state(self) -> dict[str, Any]:
        """The base state plus the target network's weights."""
        target = {k: v.detach().cpu().clone() for k, v in self.target_model.state_dict().items()}
        return {**super().get_state(), "target_weights": target}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore the base state and the target network."""
        super().set_state(state)
        if "target_weights" in state:
            load_finite_weights(self.target_model, state["target_weights"])


class OffPolicyAlgorithm(Algorithm):
    """The replay training loop; subclasses set ``config_class`` and ``policy_class``."""

    config_class = OffPolicyConfig
    config: OffPolicyConfig

    def setup(self) -> None:
        """One replay buffer per policy id."""
        if not isinstance(self.config, OffPolicyConfig):
            raise ConfigError(f"{type(self).__name__} needs a config derived from OffPolicyConfig")
        for policy in self.policies.values():
            self._check_replay_memory(policy)
        self.replay_buffers: dict[str, ReplayBuffer] = {pid: self._new_replay_buffer(pid) for pid in self.policies}
        self._replay_owed = 0.0
        self._last_target_update = 0
        cfg = self.config
        self._beta = linear_schedule(
            cfg.prioritized_replay_beta, cfg.final_prioritized_replay_beta, cfg.prioritized_replay_beta_annealing_timesteps
        )

    def _new_replay_buffer(self, policy_id: str) -> ReplayBuffer:
        seed = self.config.seed
        return make_replay_buffer(self.config.replay_buffer_config, None if seed is None else int_seed(seed, "replay", policy_id))

    def policy_added(self, policy_id: str) -> None:
        """The new policy gets its own replay buffer (checked to fit in memory first)."""
        self._check_replay_memory(self.policies[policy_id])
        self.replay_buffers[policy_id] = self._new_replay_buffer(policy_id)

    def policy_removed(self, policy_id: str) -> None:
        """The removed policy's replay buffer goes with it."""
        self.replay_buffers.pop(policy_id, None)

    def _check_replay_memory(self, policy: Policy) -> None:
        """Refuse a replay capacity whose rows cannot fit in memory (the buffer is allocated at the first sample)."""
        _, options = check_replay_buffer_config(self.config.replay_buffer_config)
        obs = (policy.preprocessor.shape, policy.preprocessor.dtype)
        action_space = policy.action_adapter.policy_space
        # the policy acts in a Discrete, MultiDiscrete or Box space, which always has a shape and a dtype
        action_shape, action_dtype = cast(tuple[int, ...], action_space.shape), cast(np.dtype, action_space.dtype)
        columns = {
            SampleBatch.OBS: obs,
            SampleBatch.NEXT_OBS: obs,
            SampleBatch.ACTIONS: (action_shape, np.int64 if action_dtype.kind in "iu" else np.float32),
            "rewards, discounts, priorities and flags": ((), np.dtype("V32")),
        }
        rows = options["capacity"]
        row_bytes = replay_row_bytes(columns)
        check_fits(
            f"the replay buffer ({rows:,} rows of {row_bytes} bytes)",
            rows * row_bytes,
            "lower replay_buffer_config['capacity']",
        )

    def training_step(self) -> dict[str, dict[str, Any]]:
        """Sample, store, and replay at the configured ratio once learning has started."""
        cfg = self.config
        samples = self.sample()
        for pid, batch in samples.policy_batches.items():
            # the others act with their weights and learn nothing; a policy removed meanwhile has no buffer
            if pid in self.replay_buffers and self.is_policy_to_train(pid, batch):
                self.replay_buffers[pid].add(batch)
        sampled = self.counters["num_env_steps_sampled"]
        if sampled < cfg.learning_starts:
            return {}
        if cfg.training_intensity is not None:
            self._replay_owed += samples.env_steps * cfg.training_intensity / cfg.train_batch_size
        else:  # RLlib's native ratio; corral samples 'auto' fragments in bigger calls, but replays as often
            fragment = 1 if cfg.rollout_fragment_length == "auto" else cfg.rollout_fragment_length
            self._replay_owed += samples.env_steps / (fragment * self.env_runner_group.num_sampling_envs)
        updates, self._replay_owed = int(self._replay_owed), self._replay_owed - int(self._replay_owed)
        stats: dict[str, dict[str, Any]] = {}
        for _ in range(updates):
            stats = self._replay_once()
            if cfg.tau < 1.0:
                self._update_targets(cfg.tau)
        if cfg.tau >= 1.0 and sampled - self._last_target_update >= cfg.target_network_update_freq:
            self._update_targets(1.0)
            self._last_target_update = sampled
        return stats

    def _update_targets(self, tau: float) -> None:
        """Update the target networks of the policies that learn from replay.

        A policy that does not learn (a frozen opponent, a RandomPolicy) has an empty
        buffer and is left alone: its weights do not move, so neither would its
        target, and it stays on disk if ``policy_map_capacity`` put it there. Each
        policy is updated as soon as it is looked up: looking up the next one may
        move it to disk.
        """
        for policy_id, buffer in self.replay_buffers.items():
            policy = self.policies[policy_id] if len(buffer) else None
            if isinstance(policy, OffPolicyPolicy):
                policy.update_targets(tau)

    def _replay_once(self) -> dict[str, dict[str, Any]]:
        beta = self._beta(self.counters["num_env_steps_sampled"])
        batches = {
            pid: buffer.sample(self.config.train_batch_size, beta=beta)
            for pid, buffer in self.replay_buffers.items()
            if len(buffer)
        }
        stats = self.learn_on_batch(MultiAgentBatch(batches, self.config.train_batch_size))
        for pid, policy_stats in stats.items():
            td_error = policy_stats.pop(OffPolicyPolicy.TD_ERROR, None)
            if td_error is not None:
                self.replay_buffers[pid].update_priorities(batches[pid][SampleBatch.BATCH_INDEXES], np.abs(td_error))
        return stats

    def get_state(self) -> dict[str, Any]:
        """The base state plus the replay schedule's bookkeeping."""
        return {**super().get_state(), "replay_owed": self._replay_owed, "last_target_update": self._last_target_update}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore the base state and the replay bookkeeping."""
        replay_owed = restored_float(state.get("replay_owed", 0.0), "replay_owed", minimum=0.0)
        last_target_update = restored_count(state.get("last_target_update", 0), "last_target_update")
        super().set_state(state)
        self._replay_owed, self._last_target_update = replay_owed, last_target_update

    def get_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        """The replay buffers, if ``save_replay_buffer``."""
        if not self.config.save_replay_buffer:
            return {}
        return {f"replay_buffer_{pid}": buffer.get_state() for pid, buffer in self.replay_buffers.items()}

    def set_checkpoint_arrays(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        """Refill the replay buffers saved in the checkpoint (each checked against this algorithm's spaces first)."""
        for pid, buffer in self.replay_buffers.items():
            if f"replay_buffer_{pid}" in arrays:
                policy = self.policies[pid]
                shapes = {
                    SampleBatch.OBS: policy.preprocessor.shape,
                    SampleBatch.NEXT_OBS: policy.preprocessor.shape,
                    SampleBatch.ACTIONS: cast(tuple[int, ...], policy.action_adapter.policy_space.shape),
                }
                buffer.set_state(arrays[f"replay_buffer_{pid}"], expected_shapes=shapes)
