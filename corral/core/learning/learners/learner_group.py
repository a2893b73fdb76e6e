"""Learner actors that update the policies data-parallel, and the algorithm's handle on them (RLlib's LearnerGroup).

With ``learners(num_learners=N)``, N > 0, a policy's update runs on N Ray
actors instead of the algorithm's process. Each holds a copy of the policy
and the whole train batch (one copy in Ray's object store, read by all), and
computes every loss on its share of the rows; the copies average their
gradients at every gradient step (:mod:`~corral.core.learning.learners.gradient_sync`)
and so stay identical. Shuffling (from the policy's own generator), advantage
normalisation and batch statistics are computed alike on every Learner, so N
Learners, each computing 1/N of every loss, make the update one process
makes: ``num_learners`` changes where the work is done, not the result (to
float rounding).

The algorithm's copy stays the one that acts and that checkpoints hold: its
state goes to the Learners with an update and comes back from the first of
them after it, optimizer moments, generators and adapted coefficients
included. Nothing else changes hands, so a restore, a ``set_weights`` or a
new policy needs no step of its own. Many updates in a row (an off-policy
iteration's, one per env step) keep the state on the Learners in between
(:meth:`LearnerGroup.keeping_state`): it travels once each way per training step.

With ``num_gpus_per_learner`` each actor reserves a GPU and learns on CUDA,
averaging through NCCL; otherwise on its CPUs through gloo. Ray is imported
here only when Learners are asked for.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np

from corral.core.common.sample_batch import SampleBatch
from corral.core.contracts.config import AlgorithmConfig
from corral.core.contracts.options.model_names import model_classes_of
from corral.core.learning.learners.learner_actor import LearnerActor, PolicyCall, as_arrays, as_tensors
from corral.core.learning.policies.policy_build import PolicyBuild
from corral.errors import LearnerError

logger = logging.getLogger("corral")


def ensure_ray() -> Any:
    """Import Ray and connect to it: an existing cluster (``RAY_ADDRESS``), else a local one. Returns the module."""
    import ray

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False, configure_logging=False)
    return ray


class LearnerGroup:
    """``num_learners`` Learner actors, started with the resources the config asks for, and how the algorithm uses them.

    A Learner that dies (its process or node gone) takes its group's
    collective calls with it, so with ``restart_failed_learners`` (the
    default) the whole group is started again and the update repeated from the
    algorithm's copy, which holds the state every Learner had before it: the
    run goes on with as many Learners and learns what it would have. Without
    it, or after :data:`MAX_RESTARTS_IN_A_ROW` restarts for one update, the run
    stops with a :class:`~corral.errors.LearnerError` naming the Learner.

    Args:
        config: the algorithm's config (``num_learners``, ``num_cpus_per_learner``, ``num_gpus_per_learner``,
            ``restart_failed_learners``).
    """

    def __init__(self, config: AlgorithmConfig) -> None:
        self._ray = ensure_ray()
        self._config = config
        self.size = config.num_learners
        self.num_restarts = 0
        """how many times a Learner died and the group was started again"""
        self._actors: list[Any] = []
        self._builds: dict[str, PolicyBuild] = {}
        self._rounds: dict[str, _Round] | None = None
        """each policy's updates within :meth:`keeping_state` (None outside it)"""
        self._start()

    def _start(self) -> None:
        """Start the Learner actors and their process group."""
        from corral.core.devices import ray_gpus

        config = self._config
        actor_class = self._ray.remote(
            num_cpus=config.num_cpus_per_learner, num_gpus=ray_gpus(config.num_gpus_per_learner, config), max_restarts=0
        )(LearnerActor)
        self._actors = [actor_class.remote(config, rank, self.size) for rank in range(self.size)]
        self._builds = {}
        for round_ in (self._rounds or {}).values():
            round_.played = 0  # the new Learners hold none of it
        try:
            host, port = self._addresses()[0]
            self._gather([actor.join.remote(host, port) for actor in self._actors])
        except _LearnerDied as died:
            raise died.error(self.size, restarting=False) from died.__cause__
        except BaseException:
            self.stop()
            raise

    def _addresses(self) -> list[tuple[str, int]]:
        """Every Learner's address, once all have started: said in a warning while the cluster lacks their resources."""
        ray, config = self._ray, self._config
        calls = [actor.address.remote() for actor in self._actors]
        started, _ = ray.wait(calls, num_returns=len(calls), timeout=_RESOURCES_WAIT_WARNING_S)
        if len(started) < len(calls):
            logger.warning(
                "%d of the %d Learner actors have not started after %.0f s: each asks for %g CPUs and %g GPUs "
                "(learners(num_cpus_per_learner=..., num_gpus_per_learner=...)) and the Ray cluster has %s in all; "
                "waiting for them",
                len(calls) - len(started),
                len(calls),
                _RESOURCES_WAIT_WARNING_S,
                config.num_cpus_per_learner,
                config.num_gpus_per_learner,
                {key: value for key, value in ray.cluster_resources().items() if key in ("CPU", "GPU")},
            )
        return list(self._gather(calls))

    def update(self, policy_id: str, build: PolicyBuild, policy: Any, batch: SampleBatch) -> dict[str, Any]:
        """One update of a policy by the Learners, each on its share of ``batch``; ``policy`` then holds the result.

        Within :meth:`keeping_state`, ``policy`` is brought up to date only as it ends.

        Args:
            policy_id: the policy.
            build: how the policy is built (the Learners build their copies from it).
            policy: the algorithm's copy: its state goes to the Learners, and the first one's comes back into it.
            batch: the train batch.

        Returns:
            The update's stats, averaged over the Learners.

        Raises:
            LearnerError: a Learner failed, or died and is not restarted (the group stops); a Learner's own error (a
                :class:`~corral.errors.TrainingError` for a NaN update) is raised as it is.
        """
        if self._rounds is None:
            return self._restarting(policy_id, lambda: self._update(policy_id, build, policy, batch))
        round_ = self._rounds.get(policy_id)
        if round_ is None:
            round_ = self._rounds[policy_id] = _Round(build, self._ray.put(as_arrays(policy.get_state())))
        round_.log.append((round_.calls, self._ray.put(batch)))
        round_.calls = []
        return mean_stats(self._restarting(policy_id, lambda: self._play(policy_id, round_)))

    @contextlib.contextmanager
    def keeping_state(self, policy_of: Callable[[str], Any]) -> Iterator[None]:
        """Within, the Learners keep each policy's state from one update to the next; the algorithm's copies catch up at the end.

        An update otherwise sends the algorithm's copy's state to the Learners
        and brings Learner 0's back: right for one update an iteration (PPO's),
        but most of the cost of many small ones (SAC's, one per env step).
        Within, a policy's state goes out with its first update only, and
        comes back once, as the block ends (so nothing may read the algorithm's
        copy in between: an ``on_learn_on_batch`` callback sees it as the block
        began); :meth:`call` makes the policy's own calls between
        updates (a target network's update) on the Learners' copies. A Learner
        that dies is started again and the block's updates replayed from the
        state it started from, so the run learns what it would have. Nested
        blocks are one block.

        Args:
            policy_of: the algorithm's copy of a policy, by id (looked up as the block ends).

        Yields:
            Nothing; the block's updates keep their state on the Learners.
        """
        if self._rounds is not None:
            yield
            return
        self._rounds = {}
        try:
            yield
            for policy_id, round_ in self._rounds.items():
                state = self._restarting(policy_id, functools.partial(self._state_after, policy_id, round_))
                policy_of(policy_id).set_state(as_tensors(state))
        finally:
            self._rounds = None  # after a failure the algorithm's copies hold the state the block started from

    def call(self, policy_id: str, policy: Any, method: Callable[..., Any], *args: Any) -> None:
        """``method(policy, *args)`` on the copy that holds the policy's newest state: the Learners' within :meth:`keeping_state`.

        Args:
            policy_id: the policy.
            policy: the algorithm's copy.
            method: one of the policy's methods, unbound (``OffPolicyPolicy.update_targets``).
            *args: its arguments after the policy.
        """
        round_ = None if self._rounds is None else self._rounds.get(policy_id)
        if round_ is None:
            method(policy, *args)
        else:  # made on the Learners before the next update, or as the block ends
            round_.calls.append((method, args))

    def _restarting(self, policy_id: str, attempt: Callable[[], _Result]) -> _Result:
        """``attempt()``, tried again on a group started again while a Learner dies and ``restart_failed_learners`` allows."""
        restarts = 0
        while True:
            try:
                return attempt()
            except _LearnerDied as died:
                if not self._config.restart_failed_learners or restarts == MAX_RESTARTS_IN_A_ROW:
                    raise died.error(self.size, restarting=self._config.restart_failed_learners) from died.__cause__
                logger.warning(
                    "Learner %d of %d died (%s); starting the group again and repeating the update from the "
                    "algorithm's copy of %r",
                    died.rank,
                    self.size,
                    died.reason,
                    policy_id,
                )
                restarts += 1
                self.num_restarts += 1
                self._start()

    def _update(self, policy_id: str, build: PolicyBuild, policy: Any, batch: SampleBatch) -> dict[str, Any]:
        self._know(policy_id, build)
        state, whole = self._ray.put(as_arrays(policy.get_state())), self._ray.put(batch)  # one copy each, read by all
        results = self._gather([actor.update.remote(policy_id, state, whole) for actor in self._actors])
        policy.set_state(as_tensors(results[0][1]))
        return mean_stats([stats for stats, _ in results])

    def _play(self, policy_id: str, round_: _Round) -> list[dict[str, Any]]:
        """Make the round's updates the Learners have not made (the last one; all in a group started again).

        Returns:
            Each Learner's stats of the last update made (none if there was none to make).
        """
        self._know(policy_id, round_.build)
        results: list[Any] = []
        while round_.played < len(round_.log):
            calls, batch = round_.log[round_.played]
            state = round_.state if round_.played == 0 else None
            updates = [actor.update.remote(policy_id, state, batch, calls, False) for actor in self._actors]
            results = self._gather(updates)
            round_.played += 1
        return [stats for stats, _ in results]

    def _state_after(self, policy_id: str, round_: _Round) -> Any:
        """Learner 0's state of the policy once its round's updates and calls are made."""
        self._play(policy_id, round_)
        (result,) = self._gather([self._actors[0].update.remote(policy_id, None, None, round_.calls)])
        return result[1]

    def _know(self, policy_id: str, build: PolicyBuild) -> None:
        """Tell the Learners how the policy is built, if they have not been told since it changed."""
        if self._builds.get(policy_id) is not build:
            models = model_classes_of(build.config)
            self._gather([actor.set_build.remote(policy_id, build, models) for actor in self._actors])
            self._builds[policy_id] = build

    def forget(self, policy_id: str) -> None:
        """Drop a removed policy's copies (a group started again holds none)."""
        if self._builds.pop(policy_id, None) is not None:
            try:
                self._gather([actor.set_build.remote(policy_id, None, {}) for actor in self._actors])
            except _LearnerDied:
                self._start()  # its next update, if any, repeats what the dead Learner would have done

    def _gather(self, calls: list[Any]) -> list[Any]:
        """The calls' results in order. The first failure stops the whole group (the others may wait on it) and is raised.

        Raises:
            _LearnerDied: a Learner's process is gone (so the others' collective calls failed or would hang).
            LearnerError: another failure of Ray's.
        """
        ray = self._ray
        pending = list(calls)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            try:
                ray.get(done[0])
            except Exception as exc:  # a Learner's error, or its death: Ray raises many kinds
                # a death makes the others' collective calls fail too, maybe first: look at theirs a moment
                others, _ = ray.wait(pending, num_returns=len(pending), timeout=_PEERS_FAIL_WITHIN_S) if pending else ([], [])
                self.stop()
                for call in [done[0], *others]:
                    death = _death_of(ray, call)
                    if death is not None:
                        raise _LearnerDied(calls.index(call)) from death
                cause = getattr(exc, "cause", None)
                if isinstance(cause, Exception) and not isinstance(cause, ray.exceptions.RayError):
                    raise cause from None  # the Learner's own error (a TrainingError for a NaN update, say)
                raise LearnerError(
                    f"a Learner actor failed, so the group of {self.size} stopped: {type(exc).__name__}: {exc}"
                ) from exc
        return list(ray.get(calls))

    def stop(self) -> None:
        """Stop every Learner actor."""
        for actor in self._actors:
            with contextlib.suppress(Exception):  # an actor that is already gone
                self._ray.kill(actor)
        self._actors = []


MAX_RESTARTS_IN_A_ROW = 3
"""how many times one update may start the group again before the run stops (a Learner that dies on every try)"""

_RESOURCES_WAIT_WARNING_S = 60.0
"""how long Learner actors may take to start before a warning says what they wait for"""

_PEERS_FAIL_WITHIN_S = 5.0
"""how long, after one Learner's call failed, the others' calls may take to fail with it (or finish)"""


_Result = TypeVar("_Result")


@dataclasses.dataclass
class _Round:
    """A policy's updates within one :meth:`LearnerGroup.keeping_state` block: what a group started again replays.

    Args:
        build: how the policy is built.
        state: the algorithm's copy's state as the block's first update found it (in Ray's object store).
    """

    build: PolicyBuild
    state: Any
    log: list[tuple[list[PolicyCall], Any]] = dataclasses.field(default_factory=list)
    """each update's calls made before it, and its batch (in Ray's object store)"""
    played: int = 0
    """how many of ``log`` the Learners have made"""
    calls: list[PolicyCall] = dataclasses.field(default_factory=list)
    """calls since the last update, made before the next"""


class _LearnerDied(Exception):
    """A Learner's process is gone; ``__cause__`` is Ray's error.

    Args:
        rank: the Learner's place in the group.
    """

    def __init__(self, rank: int) -> None:
        super().__init__(rank)
        self.rank = rank

    def error(self, size: int, restarting: bool) -> LearnerError:
        """The error that stops the run."""
        advice = (
            f"it died {MAX_RESTARTS_IN_A_ROW + 1} times in one update"
            if restarting
            else "fault_tolerance(restart_failed_learners=True) starts the group again and goes on"
        )
        return LearnerError(f"Learner {self.rank} of {size} died ({self.reason}), so the group stopped; {advice}")

    @property
    def reason(self) -> str:
        """Ray's error in a line: what happened and, where Ray knows it, why (its message spans many lines)."""
        lines = [line.strip() for line in str(self.__cause__).splitlines() if line.strip()] or ["no reason given"]
        return lines[0] if len(lines) == 1 else f"{lines[0]} {lines[-1]}"


def _death_of(ray: Any, call: Any) -> Exception | None:
    """Ray's error if ``call`` failed because its actor's process is gone, else None."""
    try:
        ray.get(call, timeout=0)
    except ray.exceptions.RayActorError as exc:
        death: Exception = exc
        return death
    except Exception:  # the call's own failure, or one that is not yet over
        return None
    return None


def mean_stats(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """Group members' stats averaged key by key; arrays of a value per row (TD errors) joined in the members' order.

    A statistic of the whole batch is the same on every Learner; a loss term of
    a share is each Learner's own (and each DD-PPO runner's, of its own rows).
    Dicts are averaged the same way, key by key; what is neither a number, an
    array nor a dict on every member is the first one's.

    Args:
        stats: each member's stats, in rank order.

    Returns:
        One dict of stats.
    """
    out = dict(stats[0])
    for key in stats[0]:
        values = [s.get(key) for s in stats]
        arrays = [v for v in values if isinstance(v, np.ndarray)]
        if len(arrays) == len(values):  # the shares are consecutive rows, Learner 0's first
            out[key] = np.concatenate(arrays)
            continue
        numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(numbers) == len(values):
            out[key] = sum(numbers) / len(numbers)
        elif all(isinstance(v, dict) for v in values):  # the model's metrics, a callback's custom metrics
            out[key] = mean_stats([v for v in values if isinstance(v, dict)])
    return out
