"""Ape-X's replay, split into shards: each holds a slice of the capacity and serves replayed batches on its own.

A shard keeps one buffer per policy id. With remote env runners the
shards are Ray actors (no CPU of their own, as RLlib's replay actors on the
driver's node), so storing, replaying and reprioritizing happen beside
the learner instead of in its thread; a shard that dies is started again,
empty, and the calls it had are dropped and counted. Without remote runners
the shards are plain objects in this process, called the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.core import MultiAgentBatch, SampleBatch
from corral.core.learning.learners.learner_group import ensure_ray
from corral.core.learning.replay.replay_buffers import ReplayBuffer, make_replay_buffer
from corral.core.seeding import int_seed

Priorities = dict[str, tuple[np.ndarray, np.ndarray]]
"""by policy id: the replayed rows' ``batch_indexes`` and their new priorities (``|TD error|``)"""


class ReplayShard:
    """One shard: a replay buffer per policy id, each of ``capacity`` rows.

    Args:
        replay_buffer_config: the algorithm's ``replay_buffer_config``, its capacity already this shard's.
        seed: the algorithm's seed, from which each policy's buffer here gets its own; None draws fresh entropy.
        index: the shard's place among the algorithm's shards.
    """

    def __init__(self, replay_buffer_config: dict[str, Any], seed: int | None, index: int) -> None:
        self._config = replay_buffer_config
        self._seed = seed
        self._index = index
        self._buffers: dict[str, ReplayBuffer] = {}

    def _buffer(self, policy_id: str) -> ReplayBuffer:
        if policy_id not in self._buffers:
            seed = None if self._seed is None else int_seed(self._seed, "replay", "shard", self._index, policy_id)
            self._buffers[policy_id] = make_replay_buffer(self._config, seed)
        return self._buffers[policy_id]

    def add(self, batch: MultiAgentBatch) -> None:
        """Store each policy's rows (with the runner's priorities, if it computed them)."""
        for policy_id, rows in batch.policy_batches.items():
            self._buffer(policy_id).add(rows)

    def sample(self, num_rows: int, beta: float) -> MultiAgentBatch | None:
        """``num_rows`` rows of every policy that has any, with their ``batch_indexes`` and ``weights``; None if empty.

        Args:
            num_rows: rows per policy.
            beta: the importance-sampling exponent (prioritized replay).
        """
        batches = {pid: buffer.sample(num_rows, beta=beta) for pid, buffer in self._buffers.items() if len(buffer)}
        return MultiAgentBatch(batches, num_rows) if batches else None

    def update_priorities(self, priorities: Priorities) -> None:
        """Set the replayed rows' new priorities (a policy removed meanwhile is skipped)."""
        for policy_id, (indexes, td_errors) in priorities.items():
            if policy_id in self._buffers:
                self._buffers[policy_id].update_priorities(indexes, np.abs(td_errors))

    def remove_policy(self, policy_id: str) -> None:
        """Forget a removed policy's rows."""
        self._buffers.pop(policy_id, None)

    def sizes(self) -> dict[str, int]:
        """Rows stored, by policy id."""
        return {pid: len(buffer) for pid, buffer in self._buffers.items()}

    def get_state(self) -> dict[str, dict[str, np.ndarray]]:
        """Every buffer's arrays, by policy id (for checkpoints with ``save_replay_buffer``)."""
        return {pid: buffer.get_state() for pid, buffer in self._buffers.items()}

    def set_state(self, state: dict[str, dict[str, np.ndarray]], shapes: dict[str, dict[str, tuple[int, ...]]]) -> None:
        """Refill the buffers from :meth:`get_state`, each checked against its policy's row shapes first.

        Args:
            state: :meth:`get_state`'s arrays, by policy id.
            shapes: each policy's row shapes by column; a policy without them (not in this algorithm) is skipped.
        """
        for pid, arrays in state.items():
            if pid in shapes:
                self._buffer(pid).set_state(arrays, expected_shapes=shapes[pid])


class ReplayShards:
    """The algorithm's shards and the calls in flight to them; remote ones never block the caller.

    Args:
        count: how many shards (``num_replay_buffer_shards``).
        replay_buffer_config: each shard's ``replay_buffer_config`` (its capacity a shard's slice).
        remote: start the shards as Ray actors; else keep them in this process.
        seed: the algorithm's seed: of the shards' buffers and of which shard each batch goes to.
    """

    def __init__(self, count: int, replay_buffer_config: dict[str, Any], remote: bool, seed: int | None) -> None:
        self._ray = ensure_ray() if remote else None
        if self._ray is not None:
            actor_class = self._ray.remote(num_cpus=0, max_restarts=-1)(ReplayShard)
            self.shards: list[Any] = [actor_class.remote(replay_buffer_config, seed, i) for i in range(count)]
            self._ray.get([shard.sizes.remote() for shard in self.shards])  # started (a bad config raises here)
        else:
            self.shards = [ReplayShard(replay_buffer_config, seed, i) for i in range(count)]
        self._rng = np.random.default_rng(None if seed is None else int_seed(seed, "replay", "shards"))
        self._replays: dict[Any, int] = {}  # replay call -> shard index
        self._ready: list[tuple[int, MultiAgentBatch | None]] = []  # in one process: replays answered at once
        self.failed_calls = 0
        """calls lost with a shard that died (it restarts empty)"""

    @property
    def replays_in_flight(self) -> int:
        """Replay calls not yet collected."""
        return len(self._replays) + len(self._ready)

    def _call(self, index: int, method: str, *args: Any) -> Any:
        shard = self.shards[index]
        if self._ray is None:
            return getattr(shard, method)(*args)
        return getattr(shard, method).remote(*args)

    def add(self, batch: MultiAgentBatch) -> None:
        """Store a batch in a shard drawn at random (no waiting: a remote shard stores it while the caller goes on)."""
        if batch.policy_batches:
            self._call(int(self._rng.integers(len(self.shards))), "add", batch)

    def request_replays(self, count: int, num_rows: int, beta: float) -> None:
        """Ask ``count`` shards drawn at random for a replayed batch each; :meth:`replayed` collects them.

        Args:
            count: replayed batches to ask for.
            num_rows: rows per policy in each.
            beta: the importance-sampling exponent (prioritized replay).
        """
        for _ in range(count):
            index = int(self._rng.integers(len(self.shards)))
            result = self._call(index, "sample", num_rows, beta)
            if self._ray is None:
                self._ready.append((index, result))
            else:
                self._replays[result] = index

    def replayed(self) -> list[tuple[int, MultiAgentBatch]]:
        """The replayed batches that are ready, each with its shard's index; no waiting.

        A shard that had no rows yet answers nothing; a call lost with a dead shard is counted in :attr:`failed_calls`.
        """
        ready, self._ready = self._ready, []
        if self._replays:
            assert self._ray is not None
            calls = list(self._replays)
            done, _ = self._ray.wait(calls, num_returns=len(calls), timeout=0)
            for call in done:
                index = self._replays.pop(call)
                try:
                    ready.append((index, self._ray.get(call)))
                except self._ray.exceptions.RayActorError:
                    self.failed_calls += 1
        return [(index, batch) for index, batch in ready if batch is not None]

    def update_priorities(self, index: int, priorities: Priorities) -> None:
        """Send a replayed batch's new priorities back to its shard (no waiting).

        Args:
            index: the shard the batch came from.
            priorities: by policy id, the rows' ``batch_indexes`` and their TD errors.
        """
        if priorities:
            self._call(index, "update_priorities", priorities)

    def each(self, method: str, *args: Any) -> list[Any]:
        """Call ``method`` on every shard and wait for the answers (checkpoints, removing a policy, sizes).

        Args:
            method: a :class:`ReplayShard` method's name.
            *args: its arguments.

        Returns:
            Each shard's answer, in shard order.
        """
        results = [self._call(i, method, *args) for i in range(len(self.shards))]
        return results if self._ray is None else self._ray.get(results)

    def call(self, index: int, method: str, *args: Any) -> Any:
        """Call ``method`` on one shard and wait for its answer.

        Args:
            index: the shard.
            method: a :class:`ReplayShard` method's name.
            *args: its arguments.

        Returns:
            The shard's answer.
        """
        result = self._call(index, method, *args)
        return result if self._ray is None else self._ray.get(result)

    def stop(self) -> None:
        """End the shard actors."""
        if self._ray is not None:
            for shard in self.shards:
                self._ray.kill(shard)
        self.shards = []


def row_shapes(policy: Any) -> dict[str, tuple[int, ...]]:
    """The shapes a policy's replayed rows have, to check a restored shard's arrays against."""
    return {
        SampleBatch.OBS: policy.preprocessor.shape,
        SampleBatch.NEXT_OBS: policy.preprocessor.shape,
        SampleBatch.ACTIONS: tuple(policy.action_adapter.policy_space.shape),
    }
