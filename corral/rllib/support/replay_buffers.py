"""RLlib's ``MultiAgentReplayBuffer`` and ``StorageUnit``, for a ``training_step`` that keeps a buffer of its own.

RLlib's scripts that write their own training loop (two algorithms' policies
trained side by side, say) build a buffer, ``add`` each sampled batch and
``sample(num_items=...)`` a train batch. The buffer here keeps one of corral's
replay buffers per policy and answers with RLlib's calls; corral's own
algorithms replay through ``replay_buffer_config`` instead.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch
from corral.core.learning.replay.replay_buffers import ReplayBuffer
from corral.errors import ConfigError


class StorageUnit(str, Enum):
    """What one stored item of RLlib's buffers is; a string, so a config that holds one stays plain data."""

    TIMESTEPS = "timesteps"
    SEQUENCES = "sequences"
    EPISODES = "episodes"
    FRAGMENTS = "fragments"


class MultiAgentReplayBuffer:
    """One uniform replay buffer per policy, with RLlib's ``add`` and ``sample`` (its ``"independent"`` replay mode).

    Args:
        capacity: env steps kept, over all shards, as in RLlib: each policy's buffer keeps ``capacity // num_shards``.
        storage_unit: ``"timesteps"``, the one unit this buffer stores (a row per step); corral's R2D2
            replays sequences through its ``replay_buffer_config``.
        num_shards: the shards ``capacity`` is divided among (RLlib's Ape-X runs several).
        replay_mode: ``"independent"``: each policy's rows are drawn on their own.
        seed: seeds the draws, for a reproducible run.
        **kwargs: RLlib's further keyword arguments (``replay_sequence_length``, ``replay_burn_in``,
            ``replay_zero_init_states``, ``underlying_buffer_config``, ...) are for sequence storage,
            which this buffer does not do: any of them is refused.

    Raises:
        ConfigError: another storage unit or replay mode, or one of the sequence arguments.
    """

    def __init__(
        self,
        capacity: int = 10_000,
        storage_unit: str | StorageUnit = StorageUnit.TIMESTEPS,
        num_shards: int = 1,
        replay_mode: str = "independent",
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        if StorageUnit(storage_unit) is not StorageUnit.TIMESTEPS:
            raise ConfigError(
                f"MultiAgentReplayBuffer stores timesteps here, not {StorageUnit(storage_unit).value}; corral replays "
                "sequences in R2D2 (replay_buffer_config={'storage_unit': 'sequences'})"
            )
        if replay_mode != "independent":
            raise ConfigError(f"MultiAgentReplayBuffer replays each policy's rows independently, not {replay_mode!r}")
        if kwargs:
            raise ConfigError(
                f"MultiAgentReplayBuffer takes no {', '.join(sorted(kwargs))} here: they are for sequence storage, which "
                "corral's R2D2 does (replay_buffer_config); this buffer stores timesteps"
            )
        if not isinstance(num_shards, int) or num_shards < 1:
            raise ConfigError(f"MultiAgentReplayBuffer num_shards is an int >= 1, not {num_shards!r}")
        self.capacity = capacity // num_shards
        self.replay_buffers: dict[str, ReplayBuffer] = {}
        """each policy's buffer, by policy id (RLlib's attribute)"""
        self._seed = seed

    def __len__(self) -> int:
        """Rows stored, over every policy."""
        return sum(len(buffer) for buffer in self.replay_buffers.values())

    def add(self, batch: SampleBatch | MultiAgentBatch, **kwargs: Any) -> None:
        """Store each policy's rows in its own buffer (a ``SampleBatch`` is the default policy's).

        Args:
            batch: what a sample call returned.
            **kwargs: RLlib passes its buffers' own ``add`` arguments here; none is needed.
        """
        samples = batch.as_multi_agent() if isinstance(batch, SampleBatch) else batch
        for policy_id, rows in samples.policy_batches.items():
            if policy_id not in self.replay_buffers:
                seed = None if self._seed is None else self._seed + len(self.replay_buffers)
                self.replay_buffers[policy_id] = ReplayBuffer(self.capacity, seed=seed)
            self.replay_buffers[policy_id].add(rows)

    def sample(self, num_items: int, policy_id: str | None = None, **kwargs: Any) -> MultiAgentBatch:
        """``num_items`` rows of each policy (or only ``policy_id``'s), drawn uniformly with replacement.

        Args:
            num_items: rows per policy.
            policy_id: draw only this policy's rows.
            **kwargs: RLlib passes its buffers' own ``sample`` arguments here; none is needed.

        Returns:
            A multi-agent batch (empty while nothing is stored), its env steps the rows drawn per policy.

        Raises:
            KeyError: ``policy_id`` has stored nothing.
        """
        if policy_id is not None and policy_id not in self.replay_buffers:
            raise KeyError(f"policy {policy_id!r} has no rows in this buffer; it holds {sorted(self.replay_buffers)}")
        chosen = [policy_id] if policy_id is not None else list(self.replay_buffers)
        drawn = {pid: self.replay_buffers[pid].sample(num_items) for pid in chosen if len(self.replay_buffers[pid])}
        return MultiAgentBatch(drawn, num_items if drawn else 0)

    def stats(self) -> dict[str, Any]:
        """Rows stored per policy (RLlib's method reports more about its storage)."""
        return {f"policy_{pid}": {"num_entries": len(buffer)} for pid, buffer in self.replay_buffers.items()}
