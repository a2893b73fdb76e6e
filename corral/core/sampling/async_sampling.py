"""Asynchronous sampling: the remote env runners keep sampling while the learner learns.

Every remote runner has up to ``max_requests_in_flight`` sample calls queued.
Ray runs one actor's calls one after another, so a runner with a second call
waiting goes straight on to it. Finished batches move, as they arrive, into
a bounded learner queue. When the queue is full they stay in the object
store, and the runners, their calls done, wait: back-pressure instead of
dropped samples.

Weights are published with a version number: one ``ray.put`` per
publication, and each runner gets the reference with its next call only if
it still has older weights. A batch carries the version it was sampled
with, so the learner can tell how stale it is (policy lag).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from corral.core.common.sample_batch import MultiAgentBatch
from corral.core.learning.learners.learner_group import ensure_ray
from corral.core.sampling.env_runner_group import EnvRunnerGroup
from corral.core.sampling.remote_env_runner import RemoteSample
from corral.errors import EnvRunnerError


class AsyncSampler:
    """Keeps sample calls in flight on every healthy remote runner and queues what comes back.

    Args:
        group: the algorithm's env runners; it needs at least one remote runner.
        max_requests_in_flight: sample calls queued per runner at a time.
        queue_size: batches (one per sample call) the learner queue holds
            beyond what the learner is waiting for.
        method: the runners' call: ``"sample"``, or ``"sample_gradients"`` for the gradients of each
            policy's update on the call's samples (A3C; see :meth:`next_results`).
    """

    def __init__(self, group: EnvRunnerGroup, max_requests_in_flight: int, queue_size: int, method: str = "sample") -> None:
        if not group.healthy_remote_ids():
            raise ValueError("asynchronous sampling needs remote env runners (num_env_runners > 0)")
        self._group = group
        self._ray = ensure_ray()
        self.max_requests_in_flight = max_requests_in_flight
        self.queue_size = queue_size
        self._method = method
        self._queue: deque[tuple[RemoteSample, int]] = deque()
        self._queued_steps = 0
        self._in_flight: dict[Any, tuple[int, Any, int]] = {}  # call -> (runner index, actor, weights version)
        self._delivered: dict[int, tuple[Any, int]] = {}  # runner index -> (actor, weights version it has)
        self._weights: Any = None
        self.weights_version = -1
        self.metrics_runners: set[int] | None = None
        """the runners whose finished episodes go into the results (Ape-X's lowest-epsilon ones); None: all"""

    @property
    def queued_batches(self) -> int:
        """Batches waiting for the learner."""
        return len(self._queue)

    @property
    def requests_in_flight(self) -> int:
        """Sample calls started whose batches have not reached the queue."""
        return len(self._in_flight)

    def publish_weights(self, sampling_state: dict[str, Any], version: int) -> None:
        """Make ``sampling_state`` the weights every runner gets with its next call (one object-store copy).

        Calls already in flight keep the weights they were started with.

        Args:
            sampling_state: the learner policies' :meth:`Policy.get_sampling_state`, by policy id.
            version: the number batches sampled with these weights carry (e.g. the
                learner's update count). It must change with every publication: a runner
                that already holds weights of this version is not sent the new ones.
        """
        self._weights = self._ray.put(sampling_state)
        self.weights_version = version

    def next_batch(self, min_env_steps: int) -> tuple[MultiAgentBatch, list[int]]:
        """At least ``min_env_steps`` env steps from the queue, waiting only if it holds fewer.

        Returns the joined batch and, for each sample call in it, the weights
        version it was sampled with. Before returning, every runner's free
        slots get new calls, so sampling goes on while the learner learns.

        Raises:
            EnvRunnerError: no remote runner is left, or a failure was not tolerated.
        """
        if self._weights is None:
            raise RuntimeError("publish_weights() before the first next_batch()")
        self._collect(min_env_steps, block=False)
        while self._queued_steps < min_env_steps:
            self._launch()
            if not self._in_flight:
                raise EnvRunnerError("every remote env runner failed; nothing is left to sample")
            self._collect(min_env_steps, block=True)
        batches, versions, taken = [], [], 0
        while taken < min_env_steps:
            result, version = self._queue.popleft()
            self._queued_steps -= result.batch.env_steps
            taken += result.batch.env_steps
            batches.append(result.batch)
            versions.append(version)
        self._launch()
        return MultiAgentBatch.concat(batches), versions

    def next_results(self) -> list[tuple[RemoteSample, int]]:
        """Every call finished since the last time, with the weights version each started with; at least one.

        Free slots get new calls first, with the weights published last: so
        with one call in flight per runner, each runner whose result was
        applied samples next with the weights that include it (A3C).

        Raises:
            EnvRunnerError: no remote runner is left, or a failure was not tolerated.
        """
        if self._weights is None:
            raise RuntimeError("publish_weights() before the first next_results()")
        self._launch()
        self._collect(0, block=False)
        while not self._queue:
            self._launch()
            if not self._in_flight:
                raise EnvRunnerError("every remote env runner failed; nothing is left to sample")
            self._collect(0, block=True)
        results = list(self._queue)
        self._queue.clear()
        self._queued_steps = 0
        return results

    def _launch(self) -> None:
        """Fill every healthy runner's free slots with sample calls (replacing failed runners first)."""
        self._group.replace_failed()
        busy: dict[int, int] = {}
        for index, _, _ in self._in_flight.values():
            busy[index] = busy.get(index, 0) + 1
        for index in self._group.healthy_remote_ids():
            actor = self._group.remote_env_runner(index)
            for _ in range(self.max_requests_in_flight - busy.get(index, 0)):
                has = self._delivered.get(index)
                current = has is not None and has[0] is actor and has[1] == self.weights_version
                call = getattr(actor, self._method).remote(None if current else self._weights)
                self._delivered[index] = (actor, self.weights_version)
                self._in_flight[call] = (index, actor, self.weights_version)

    def _collect(self, min_env_steps: int, block: bool) -> None:
        """Move finished calls into the queue, in the order they were started, while it has room.

        With ``block``, first wait for at least one call to finish.
        """
        calls = list(self._in_flight)
        if not calls:
            return
        if block:
            self._ray.wait(calls, num_returns=1)
        done, _ = self._ray.wait(calls, num_returns=len(calls), timeout=0)
        finished = set(done)
        for call in [c for c in calls if c in finished]:
            # Back-pressure: with the queue full, finished calls stay in the object store and their
            # runners get no new call (_launch counts them busy) until the learner takes batches. The
            # queue outgrows its size only when it holds fewer steps than the learner asked for.
            if len(self._queue) >= self.queue_size and self._queued_steps >= min_env_steps:
                return
            if call not in self._in_flight:  # dropped: its runner failed earlier in this loop
                continue
            index, actor, version = self._in_flight.pop(call)
            try:
                result = self._ray.get(call)
            except self._ray.exceptions.RayError as exc:
                self._drop_calls_of(actor)
                self._group.handle_failure(index, exc)
                continue
            self._group.accept(result, keep_episodes=self.metrics_runners is None or index in self.metrics_runners)
            self._group.succeeded(index)
            self._queue.append((result, version))
            self._queued_steps += result.batch.env_steps

    def _drop_calls_of(self, actor: Any) -> None:
        """Forget the other calls of a runner that failed: they fail too, or belong to an actor being replaced."""
        for call in [c for c, (_, a, _) in self._in_flight.items() if a is actor]:
            del self._in_flight[call]
