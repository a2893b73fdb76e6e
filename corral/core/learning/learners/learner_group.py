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
state goes to the Learners with every update and comes back from the first
of them after it, optimizer moments, generators and adapted coefficients
included. Nothing else changes hands, so a restore, a ``set_weights`` or a
new policy needs no step of its own.

With ``num_gpus_per_learner`` each actor reserves a GPU and learns on CUDA,
averaging through NCCL; otherwise on its CPUs through gloo. Ray is imported
here only when Learners are asked for.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import socket
from typing import Any

import numpy as np
import torch

from corral.core.common.sample_batch import SampleBatch
from corral.core.contracts.config import AlgorithmConfig
from corral.core.contracts.options.model_names import model_classes_of
from corral.core.learning.learners.gradient_sync import GradientSync
from corral.core.learning.policies.policy_build import PolicyBuild
from corral.errors import ConfigError, LearnerError

logger = logging.getLogger("corral")

COLLECTIVE_TIMEOUT_S = 600
"""how long a Learner waits in one collective call for the others before its process group gives up"""


def ensure_ray() -> Any:
    """Import Ray and connect to it: an existing cluster (``RAY_ADDRESS``), else a local one. Returns the module."""
    import ray

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False, configure_logging=False)
    return ray


def learner_actor_device(config: AlgorithmConfig) -> torch.device:
    """Where a Learner actor learns: the GPU its actor reserved (``num_gpus_per_learner``), else the CPU.

    Raises:
        ConfigError: a GPU was reserved, but torch in the actor sees none.
    """
    if config.num_gpus_per_learner == 0 or config.fake_gpus:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError(
            f"num_gpus_per_learner={config.num_gpus_per_learner:g} but torch in the Learner actor sees no CUDA device; "
            "set num_gpus_per_learner=0, or resources(_fake_gpus=True) to run the configuration on the CPU"
        )
    return torch.device("cuda")


def meeting_address() -> tuple[str, int]:
    """This Ray node's address and a free port on it: where a process group's members meet (asked of its rank 0).

    Returns:
        ``(host, port)``.
    """
    import ray

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        port = int(probe.getsockname()[1])
    return str(ray.util.get_node_ip_address()), port  # type: ignore[no-untyped-call]  # unannotated in Ray


def join_process_group(host: str, port: int, rank: int, world_size: int, device: torch.device) -> None:
    """Join a ``torch.distributed`` process group (every member calls this at once): NCCL on CUDA, else gloo.

    Args:
        host: rank 0's address (:func:`meeting_address`).
        port: the free port there.
        rank: this member's place in the group.
        world_size: how many members the group has.
        device: where this member computes.
    """
    import torch.distributed as dist

    dist.init_process_group(
        "nccl" if device.type == "cuda" else "gloo",
        init_method=f"tcp://{host}:{port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S),
    )


class LearnerActor:
    """The body of one Learner (wrapped with ``ray.remote`` by :class:`LearnerGroup`): policy copies that learn together.

    Args:
        config: the algorithm's config.
        rank: this Learner's place in the group, from 0.
        world_size: how many Learners the group has.
    """

    def __init__(self, config: AlgorithmConfig, rank: int, world_size: int) -> None:
        from corral.core.threads import TorchThreads

        TorchThreads(config.num_torch_threads)  # "auto": the CPUs this actor reserved
        self.rank = rank
        self.world_size = world_size
        self.device = learner_actor_device(config)
        self._builds: dict[str, PolicyBuild] = {}
        self._policies: dict[str, Any] = {}

    def address(self) -> tuple[str, int]:
        """This node's address and a free port on it, where the group's process group meets (asked of Learner 0)."""
        return meeting_address()

    def join(self, host: str, port: int) -> None:
        """Join the group's ``torch.distributed`` process group (every Learner calls this at once).

        Args:
            host: Learner 0's node address (:meth:`address`).
            port: the free port there.
        """
        join_process_group(host, port, self.rank, self.world_size, self.device)

    def set_build(self, policy_id: str, build: PolicyBuild | None, model_classes: dict[str, type]) -> None:
        """Learn how to build a policy (a new one, or one whose config changed); None forgets it.

        Args:
            policy_id: the policy.
            build: how the algorithm built its copy, or None.
            model_classes: the custom model classes its config names, registered by name in the algorithm's process
                (this process's ModelCatalog starts empty).
        """
        from corral.core.contracts.options.model_names import is_action_dist_class, register_model_class

        for name, cls in model_classes.items():
            register_model_class(name, cls, action_dist=is_action_dist_class(cls))
        self._policies.pop(policy_id, None)
        if build is None:
            self._builds.pop(policy_id, None)
        else:
            self._builds[policy_id] = build

    def update(self, policy_id: str, state: dict[str, Any], batch: SampleBatch) -> tuple[dict[str, Any], Any]:
        """Take the policy's state, learn on this Learner's share of the batch with the others, and say how it went.

        Args:
            policy_id: the policy.
            state: the algorithm's copy's state (``Policy.get_state()``).
            batch: the whole train batch (the policy takes this Learner's share where it computes a loss).

        Returns:
            The update's stats, and (Learner 0 only, else None) the policy's state after it.
        """
        policy = self._policies.get(policy_id)
        if policy is None:
            policy = self._policies[policy_id] = self._builds[policy_id].build(policy_id, "learner", 0, self.device)
            policy.gradient_sync = GradientSync(self.rank, self.world_size, self.device)
        policy.set_state(_tensors(state))
        stats = policy.learn_and_report(batch)
        return stats, _arrays(policy.get_state()) if self.rank == 0 else None


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
        restarts = 0
        while True:
            try:
                return self._update(policy_id, build, policy, batch)
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
        if self._builds.get(policy_id) is not build:
            models = model_classes_of(build.config)
            self._gather([actor.set_build.remote(policy_id, build, models) for actor in self._actors])
            self._builds[policy_id] = build
        state, whole = self._ray.put(_arrays(policy.get_state())), self._ray.put(batch)  # one copy each, read by all
        results = self._gather([actor.update.remote(policy_id, state, whole) for actor in self._actors])
        policy.set_state(_tensors(results[0][1]))
        return mean_stats([stats for stats, _ in results])

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
    What is neither a number nor an array on every member is the first one's.

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
    return out


class _TensorArray:
    """A CPU tensor travelling as its numpy array: Ray moves arrays as raw buffers, and pickles tensors ten times slower."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __reduce__(self) -> tuple[Any, ...]:
        return _TensorArray, (self.array,)


def _arrays(value: Any) -> Any:
    """A policy's state with each CPU tensor (of a dtype numpy has) wrapped as its array, for :func:`_tensors` to undo."""
    if isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dtype != torch.bfloat16:
        return _TensorArray(value.numpy())
    if isinstance(value, dict):
        return {key: _arrays(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_arrays(item) for item in value)
    return value


def _tensors(value: Any) -> Any:
    """What :func:`_arrays` wrapped as tensors again, each a writable copy (Ray's arrays are read-only views)."""
    if isinstance(value, _TensorArray):
        return torch.from_numpy(np.array(value.array))
    if isinstance(value, dict):
        return {key: _tensors(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_tensors(item) for item in value)
    return value
