"""A trained policy out of corral: one TorchScript file from raw observations to deterministic actions.

:func:`export_policy_model` traces the whole inference path of a policy into
``model.pt``: the observation preprocessing (flattening, one-hot encoding of
discrete observations), the observation filter with its statistics, the
model's ``forward_inference``, the action distribution's deterministic action
and the mapping to the env's action space (unsquashing, clipping, shape). The
file runs with torch alone (``torch.jit.load``), without corral or the code
of the model's plugin; ``model.json`` beside it describes the input and the
outputs. With ``onnx=OPSET`` the same path is also written as ``model.onnx``
(input ``obs``, outputs ``actions`` and ``action_dist_inputs``, any batch
size), for onnxruntime and other ONNX runtimes; it needs the ``onnx`` extra.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from corral._version import __version__
from corral.core.environments.spaces import is_image_space, space_to_json
from corral.core.sampling.sample_batch import SampleBatch
from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.core.contracts.policy import Policy

MODEL_FILE = "model.pt"
ONNX_FILE = "model.onnx"
DESCRIPTION_FILE = "model.json"
ONNX_OPSETS = range(9, 21)
"""the ONNX opsets torch's TorchScript-based exporter writes (up to 20 in torch 2.13)"""


class InferencePath(nn.Module):
    """A policy's deterministic acting as one module: ``forward(obs) -> (env actions, action_dist_inputs)``.

    Args:
        policy: the policy to copy (its model, filter statistics and action mapping are frozen in).

    Raises:
        ConfigError: the observations are not one array (Dict and Tuple spaces, action masks).
    """

    filter_mean: torch.Tensor
    filter_std: torch.Tensor
    action_low: torch.Tensor
    action_half_range: torch.Tensor
    clip_low: torch.Tensor
    clip_high: torch.Tensor

    def __init__(self, policy: Policy) -> None:
        super().__init__()
        space = policy.observation_space
        if policy.action_mask is not None or not isinstance(
            space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
        ):
            raise ConfigError(
                f"export_policy_model takes policies whose observations are one array (Box, Discrete, MultiDiscrete, "
                f"MultiBinary); this policy's observation space is {space}"
            )
        self.model = copy.deepcopy(policy.model).to("cpu").eval().requires_grad_(False)
        self.dist_class = policy.dist_class
        self._image = is_image_space(space)
        self._one_hot = (
            [(int(space.start), int(space.n))]
            if isinstance(space, gym.spaces.Discrete)
            else [(int(s), int(n)) for s, n in zip(space.start.ravel(), space.nvec.ravel(), strict=True)]
            if isinstance(space, gym.spaces.MultiDiscrete)
            else None
        )
        obs_filter = policy.observation_filter
        self._filter_clip = None if obs_filter is None else float(obs_filter.clip)
        if obs_filter is not None:
            self.register_buffer("filter_mean", torch.from_numpy(obs_filter.mean.copy()))
            self.register_buffer("filter_std", torch.from_numpy(np.sqrt(obs_filter.var + obs_filter.epsilon)))
        adapter = policy.action_adapter
        self._normalize, self._clip = adapter.normalize, adapter.clip
        self._env_shape = adapter._env_shape
        self._start = int(adapter.space.start) if isinstance(adapter.space, gym.spaces.Discrete) else 0
        if adapter.is_box:
            low, high = adapter._bounds
            self.register_buffer("action_low", torch.from_numpy(np.asarray(adapter._low)))
            self.register_buffer("action_half_range", torch.from_numpy(np.asarray(adapter._half_range)))
            self.register_buffer("clip_low", torch.from_numpy(np.asarray(low)))
            self.register_buffer("clip_high", torch.from_numpy(np.asarray(high)))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Env actions and the action distribution's inputs for a batch of raw observations."""
        x = self._preprocess(obs)
        if self._filter_clip is not None:
            normalized = (x.double() - self.filter_mean) / self.filter_std
            x = normalized.clamp(-self._filter_clip, self._filter_clip).float()
        inputs = self.model.forward_inference(x)[SampleBatch.ACTION_DIST_INPUTS]
        return self._env_actions(self.dist_class(inputs).deterministic_sample()), inputs

    def _preprocess(self, obs: torch.Tensor) -> torch.Tensor:
        if self._image:
            return obs
        if self._one_hot is not None:
            codes = obs.long().reshape(obs.shape[0], -1)
            parts = [F.one_hot(codes[:, j] - start, n).float() for j, (start, n) in enumerate(self._one_hot)]
            return torch.cat(parts, dim=1)
        return obs.float().reshape(obs.shape[0], -1)

    def _env_actions(self, actions: torch.Tensor) -> torch.Tensor:
        if self._normalize:
            actions = self.action_low + (actions.clamp(-1.0, 1.0) + 1.0) * self.action_half_range
        elif self._clip:
            actions = torch.max(torch.min(actions, self.clip_high), self.clip_low)
        if self._env_shape is not None:
            actions = actions.reshape(actions.shape[0], *self._env_shape)
        return actions + self._start if self._start else actions


def export_policy_model(policy: Policy, export_dir: str | os.PathLike[str], policy_id: str, onnx: int | None = None) -> Path:
    """Write ``model.pt`` (TorchScript), with ``onnx`` also ``model.onnx``, and ``model.json`` into ``export_dir``.

    Args:
        policy: the policy to export.
        export_dir: the folder (created if missing); files already there of the same names are replaced.
        policy_id: the policy's id, recorded in ``model.json``.
        onnx: the ONNX opset to write ``model.onnx`` with; None writes no ONNX file.

    Returns:
        The path of ``model.pt``.

    Raises:
        ConfigError: the policy's observations are not one array (see :class:`InferencePath`), the
            opset is not one torch writes, or ``onnx`` is asked without the ``onnx`` package.
    """
    if onnx is not None:
        check_onnx_opset(onnx)
    path = InferencePath(policy)
    space = policy.observation_space
    example = torch.as_tensor(np.stack([space.sample() for _ in range(2)]))
    folder = Path(export_dir).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # torch.jit's deprecation notice (TorchScript is what serving tools load today), and the tracer's
        # notes on shape-dependent Python branches: the model's tanh picks a kernel by size, not the result
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(path, example, check_trace=False)
        _replace(folder / MODEL_FILE, lambda file: torch.jit.save(traced, str(file)))
        if onnx is not None:
            _replace(folder / ONNX_FILE, lambda file: _export_onnx(path, example, file, onnx))
    description = {
        "format": "torchscript" if onnx is None else "torchscript+onnx",
        "corral_version": __version__,
        "policy_id": policy_id,
        "input": {"observation_space": space_to_json(space), "dtype": str(example.dtype).removeprefix("torch.")},
        "outputs": ["actions (in the env's action space)", "action_dist_inputs"],
        "action_space": space_to_json(policy.action_space),
        "observation_filter": cast(Any, policy.config).observation_filter,
        "onnx_opset": onnx,
    }
    _replace(folder / DESCRIPTION_FILE, lambda file: file.write_text(json.dumps(description, indent=1)))
    return folder / MODEL_FILE


def check_onnx_opset(opset: Any) -> None:
    """Refuse an opset torch cannot write, or ONNX export without the ``onnx`` package, before any work.

    Raises:
        ConfigError: the opset or the missing package, and what to do.
    """
    if isinstance(opset, bool) or not isinstance(opset, int) or opset not in ONNX_OPSETS:
        first, last = ONNX_OPSETS.start, ONNX_OPSETS.stop - 1
        raise ConfigError(f"onnx={opset!r} is not an ONNX opset torch writes; use one of {first}..{last} (17 is common)")
    try:
        import onnx as _onnx  # noqa: F401  # torch's exporter needs it
    except ImportError:
        raise ConfigError("writing an ONNX file needs the onnx package: pip install 'corral[onnx]'") from None


def _export_onnx(path: InferencePath, example: torch.Tensor, file: Path, opset: int) -> None:
    options: dict[str, Any] = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        options["dynamo"] = False  # the TorchScript-based exporter: no onnxscript needed, the same graph as model.pt
    names = [SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ACTION_DIST_INPUTS]
    torch.onnx.export(
        path,
        (example,),
        str(file),
        opset_version=opset,
        input_names=names[:1],
        output_names=names[1:],
        dynamic_axes={name: {0: "batch"} for name in names},  # any batch size
        **options,
    )


def _replace(target: Path, write: Callable[[Path], Any]) -> None:
    """Write ``target`` through a hidden temporary file, so a reader never sees half of it."""
    temporary = target.with_name(f".{target.name}.tmp")
    try:
        write(temporary)
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
