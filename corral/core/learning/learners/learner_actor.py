"""What runs in a Learner actor's process: its policy copies, its place in the process group, and how state travels.

A Learner builds its copy of each policy it is asked to update from the
algorithm's :class:`~corral.core.learning.policies.policy_build.PolicyBuild`,
joins the group's ``torch.distributed`` process group, and updates on its share
of each train batch (:mod:`~corral.core.learning.learners.gradient_sync`).
A policy's state travels as numpy arrays (:func:`as_arrays`), which Ray
moves as raw buffers.
"""

from __future__ import annotations

import datetime
import socket
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from corral.core.common.sample_batch import SampleBatch
from corral.core.contracts.config import AlgorithmConfig
from corral.core.learning.learners.gradient_sync import GradientSync
from corral.core.learning.policies.policy_build import PolicyBuild
from corral.errors import ConfigError

COLLECTIVE_TIMEOUT_S = 600
"""how long a Learner waits in one collective call for the others before its process group gives up"""


PolicyCall = tuple[Callable[..., Any], tuple[Any, ...]]
"""A policy method (unbound: ``OffPolicyPolicy.update_targets``) and the arguments after the policy"""


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

    def update(
        self,
        policy_id: str,
        state: dict[str, Any] | None,
        batch: SampleBatch | None,
        calls: Sequence[PolicyCall] = (),
        report_state: bool = True,
    ) -> tuple[dict[str, Any] | None, Any]:
        """Learn on this Learner's share of the batch with the others, and say how it went.

        Args:
            policy_id: the policy.
            state: the algorithm's copy's state (``Policy.get_state()``) to start from, or None to go on from this
                copy's own (the group's earlier update left every copy alike).
            batch: the whole train batch (the policy takes this Learner's share where it computes a loss), or None:
                only ``calls``.
            calls: the policy's methods to call first, in order, with their arguments (a target network's update,
                made after the last update).
            report_state: whether Learner 0 returns the policy's state afterwards.

        Returns:
            The update's stats (None without a batch), and (Learner 0 with ``report_state``, else None) the policy's
            state after it.
        """
        policy = self._policies.get(policy_id)
        if policy is None:
            policy = self._policies[policy_id] = self._builds[policy_id].build(policy_id, "learner", 0, self.device)
            policy.gradient_sync = GradientSync(self.rank, self.world_size, self.device)
        if state is not None:
            policy.set_state(as_tensors(state))
        for method, args in calls:
            method(policy, *args)
        stats = None if batch is None else policy.learn_and_report(batch)
        return stats, as_arrays(policy.get_state()) if report_state and self.rank == 0 else None


class _TensorArray:
    """A CPU tensor travelling as its numpy array: Ray moves arrays as raw buffers, and pickles tensors ten times slower."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __reduce__(self) -> tuple[Any, ...]:
        return _TensorArray, (self.array,)


def as_arrays(value: Any) -> Any:
    """A policy's state with each CPU tensor (of a dtype numpy has) wrapped as its array, for :func:`_tensors` to undo."""
    if isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dtype != torch.bfloat16:
        return _TensorArray(value.numpy())
    if isinstance(value, dict):
        return {key: as_arrays(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(as_arrays(item) for item in value)
    return value


def as_tensors(value: Any) -> Any:
    """What :func:`_arrays` wrapped as tensors again, each a writable copy (Ray's arrays are read-only views)."""
    if isinstance(value, _TensorArray):
        return torch.from_numpy(np.array(value.array))
    if isinstance(value, dict):
        return {key: as_tensors(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(as_tensors(item) for item in value)
    return value
