"""Where policies live: the learner's on ``num_gpus``, a remote env runner's on the GPUs its own actor reserved.

RLlib's split of the resource options, kept here: ``num_gpus`` is the
learner's (the algorithm's process, whose policies the local env runners
share); ``num_gpus_per_env_runner`` is what Ray reserves for each remote env
runner's actor, and Ray makes exactly those GPUs visible in that process. So a
runner whose actor reserved no GPU acts on the CPU, whatever the learner uses,
and weights cross between the two as CPU arrays (``Policy.get_weights``).

``fake_gpus`` (RLlib's ``_fake_gpus``) runs this path without a GPU, for
tests and CI: ``num_gpus`` and ``num_gpus_per_env_runner`` are read and
reported as for real devices, Ray reserves no GPU for them, and every policy
lives on the CPU. corral's learner trains on one device: ``num_gpus`` above 1
(real or fake) is accepted with a warning that says so, since data-parallel
learning across devices is not available yet.
"""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch

from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.core.contracts.config import AlgorithmConfig

logger = logging.getLogger("corral")

CPU = torch.device("cpu")

_placed_on: contextvars.ContextVar[torch.device | None] = contextvars.ContextVar("corral_policy_device", default=None)
"""the device of the policies being built here (a remote env runner's); None: the learner's"""


def learner_device(config: AlgorithmConfig) -> torch.device:
    """The device the learner's policies live on: a CUDA device with ``num_gpus > 0``, else the CPU.

    Args:
        config: the algorithm's config (``num_gpus``, ``fake_gpus``).

    Returns:
        CUDA device ``local_gpu_idx`` or ``cpu``; ``cpu`` with ``fake_gpus``.

    Raises:
        ConfigError: ``num_gpus`` asks for more CUDA devices than torch sees here (none, say), without ``fake_gpus``,
            or ``local_gpu_idx`` names one it does not see.
    """
    if config.num_gpus == 0 or config.fake_gpus:
        return CPU
    wanted, seen = math.ceil(config.num_gpus), torch.cuda.device_count() if torch.cuda.is_available() else 0
    if seen < wanted:
        raise ConfigError(
            f"num_gpus={config.num_gpus:g} but torch sees {seen} CUDA device{'s' * (seen != 1)} here; set "
            f"resources(num_gpus={min(seen, config.num_gpus):g}) (0 trains on the CPU), or resources(_fake_gpus=True) "
            "to run the GPU configuration on the CPU (for tests)"
        )
    if config.local_gpu_idx >= seen:
        raise ConfigError(
            f"learners(local_gpu_idx={config.local_gpu_idx}) but torch sees {seen} CUDA device{'s' * (seen != 1)} here "
            f"(0 to {seen - 1})"
        )
    return torch.device("cuda", config.local_gpu_idx)


def check_learner_device(config: AlgorithmConfig) -> torch.device:
    """:func:`learner_device`, saying at WARNING what corral does with ``num_gpus`` above 1.

    Args:
        config: the algorithm's config.

    Returns:
        The learner's device.

    Raises:
        ConfigError: as :func:`learner_device`.
    """
    device = learner_device(config)
    if config.num_gpus > 1:
        kind = "fake GPUs: the CPU" if config.fake_gpus else f"GPUs: {device}"
        logger.warning(
            "num_gpus=%g (%s): the main process learns on one device, so one device does all the learning; for "
            "data-parallel learning on several, set learners(num_learners=N, num_gpus_per_learner=1)",
            config.num_gpus, kind,
        )  # fmt: skip
    return device


def env_runner_device(config: AlgorithmConfig) -> torch.device:
    """The device a remote env runner's policies act on, in that runner's process: its own reserved GPU, else the CPU.

    Args:
        config: the runner's config (``num_gpus_per_env_runner``, ``fake_gpus``).

    Returns:
        ``cuda`` where the actor reserved a GPU (Ray made it this process's only visible one), else ``cpu``.

    Raises:
        ConfigError: the actor reserved a GPU that torch in this process cannot use.
    """
    if config.num_gpus_per_env_runner == 0 or config.fake_gpus:
        return CPU
    if not torch.cuda.is_available():
        raise ConfigError(
            f"num_gpus_per_env_runner={config.num_gpus_per_env_runner:g} but torch in the env runner sees no CUDA "
            "device; set num_gpus_per_env_runner=0, or resources(_fake_gpus=True) to run the configuration on the CPU"
        )
    return torch.device("cuda")


def ray_gpus(gpus: float, config: AlgorithmConfig) -> float:
    """The GPUs to ask Ray for where the config asks for ``gpus``: none with ``fake_gpus``, as RLlib does.

    Args:
        gpus: ``num_gpus`` or ``num_gpus_per_env_runner``.
        config: the config (``fake_gpus``).

    Returns:
        The number for Ray's ``num_gpus`` / ``"GPU"`` resource.
    """
    return 0 if config.fake_gpus else gpus


@contextmanager
def policies_on(device: torch.device | None) -> Iterator[None]:
    """Build the policies made inside this block on ``device`` (None: the learner's, from their config).

    Args:
        device: where the policies' networks, generators and tensors go.
    """
    token = _placed_on.set(device)
    try:
        yield
    finally:
        _placed_on.reset(token)


def policy_device(config: AlgorithmConfig) -> torch.device:
    """The device of a policy being built: the one :func:`policies_on` names, else the learner's.

    Args:
        config: the policy's config.

    Raises:
        ConfigError: as :func:`learner_device`.
    """
    placed = _placed_on.get()
    return placed if placed is not None else learner_device(config)


def restorable_here(config: AlgorithmConfig, chosen: Collection[str]) -> AlgorithmConfig:
    """A checkpoint's config, on the CPU where it asks for GPUs this machine lacks and the caller did not choose ``num_gpus``.

    A policy trained on a GPU is evaluated on a laptop: its tensors are read
    onto the CPU, and so the learner goes there too, said at WARNING.

    Args:
        config: the config read from the checkpoint, overrides applied (not frozen).
        chosen: the option names the caller gave (``config_overrides``).

    Returns:
        ``config``, with ``num_gpus=0`` where that was needed.
    """
    if "num_gpus" in chosen or config.num_gpus == 0 or config.fake_gpus or torch.cuda.is_available():
        return config
    logger.warning(
        "the checkpoint was trained with num_gpus=%g; torch sees no CUDA device here, so it is restored on the CPU "
        "(num_gpus=0); Algorithm.from_checkpoint(..., config_overrides={'num_gpus': ...}) chooses",
        config.num_gpus,
    )
    return config.resources(num_gpus=0)
