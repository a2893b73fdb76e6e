"""A trained policy out of corral: files from raw observations to deterministic actions that need torch alone.

:func:`export_policy_model` traces the whole inference path of a policy into
``model.pt`` (TorchScript) and ``model.pt2`` (``torch.export``'s program): the
observation preprocessing (flattening, one-hot encoding of discrete
observations), the observation filter with its statistics, the model's
``forward_inference``, the action distribution's deterministic action and the
mapping to the env's action space (unsquashing, clipping, shape). Each file
runs with torch alone (``torch.export.load(file).module()``,
``torch.jit.load``), without corral or the code of the model's plugin;
``model.json`` beside them describes the inputs and the outputs. torch 2.13
deprecates TorchScript in favour of ``torch.export``: corral writes
``model.pt`` as long as torch can, for the serving tools that load TorchScript
today. The module takes one tensor per array of the observation: ``obs`` for a
Box or Discrete space, ``obs.<key>`` (``obs.<index>`` in a Tuple) for each
entry of a Dict or Tuple space, an action mask included. A recurrent policy's
module also takes its state (``state_in_0``, ...; zeros at an episode's start),
the previous actions (in the policy's action space) and rewards, and returns
the next state (``state_out_0``, ...) after its two outputs. With ``onnx=OPSET``
the same path is also written as ``model.onnx`` (inputs named so, outputs
``actions`` and ``action_dist_inputs``, any batch size), for onnxruntime and
other ONNX runtimes; it needs the ``onnx`` extra.
"""

from __future__ import annotations

import copy
import inspect
import json
import logging
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
from corral.core.common.actions import ActionAdapter, zero_actions
from corral.core.common.sample_batch import SampleBatch, state_in_key, state_out_key
from corral.core.common.spaces import is_image_space, space_to_json
from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.core.learning.policy import Policy

logger = logging.getLogger("corral")

MODEL_FILE = "model.pt"
EXPORTED_PROGRAM_FILE = "model.pt2"
ONNX_FILE = "model.onnx"
DESCRIPTION_FILE = "model.json"
ONNX_OPSETS = range(9, 21)
"""the ONNX opsets torch's TorchScript-based exporter writes (up to 20 in torch 2.13)"""
DEFAULT_ONNX_OPSET = 17
"""the opset ``onnx=True`` asks for: one every ONNX runtime of the last years reads"""


def observation_leaves(space: gym.Space[Any], name: str = SampleBatch.OBS) -> list[tuple[str, gym.Space[Any]]]:
    """The arrays one observation of ``space`` is made of, named by their path, in the order corral flattens them.

    Args:
        space: an observation space (Dict and Tuple spaces nest).
        name: the name of the whole observation.

    Returns:
        ``[(name, space)]`` for one array; ``[("obs.pos", ...), ("obs.vel", ...)]`` for a Dict,
        ``obs.0``, ``obs.1``, ... for a Tuple.
    """
    if isinstance(space, gym.spaces.Dict):
        return [leaf for key, sub in space.spaces.items() for leaf in observation_leaves(sub, f"{name}.{key}")]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for i, sub in enumerate(space.spaces) for leaf in observation_leaves(sub, f"{name}.{i}")]
    return [(name, space)]


def leaf_values(space: gym.Space[Any], obs: Any) -> list[Any]:
    """One observation's arrays in the order of :func:`observation_leaves`.

    Args:
        space: the observation space.
        obs: one observation (or a batch: dicts and tuples of arrays).

    Returns:
        The arrays.
    """
    if isinstance(space, gym.spaces.Dict):
        return [value for key, sub in space.spaces.items() for value in leaf_values(sub, obs[key])]
    if isinstance(space, gym.spaces.Tuple):
        return [value for i, sub in enumerate(space.spaces) for value in leaf_values(sub, obs[i])]
    return [obs]


class InferencePath(nn.Module):
    """A policy's deterministic acting as one module: ``forward(*obs) -> (env actions, action_dist_inputs)``.

    It takes one tensor per array of the observation (see :func:`observation_leaves`):
    one for a Box or Discrete space, one per entry of a Dict or Tuple space, the
    action mask included.

    Args:
        policy: the policy to copy (its model, filter statistics and action mapping are frozen in).
    """

    filter_mean: torch.Tensor
    filter_std: torch.Tensor
    action_low: torch.Tensor
    action_half_range: torch.Tensor
    clip_low: torch.Tensor
    clip_high: torch.Tensor
    leaf_normalized: torch.Tensor
    leaf_low: torch.Tensor
    leaf_half_range: torch.Tensor
    leaf_clip_low: torch.Tensor
    leaf_clip_high: torch.Tensor
    leaf_offset: torch.Tensor

    def __init__(self, policy: Policy) -> None:
        super().__init__()
        space = policy.observation_space
        self.input_names = [name for name, _ in observation_leaves(space)]
        mask = policy.action_mask
        # the model's own part of the observation: all of it, or what the action mask's preprocessor gives the model
        model_space, prefix, self._mask_index = space, SampleBatch.OBS, None
        if mask is not None:
            model_space = mask.model_observation_space
            others = [key for key in cast(gym.spaces.Dict, space).spaces if key != mask.key]
            prefix = f"{SampleBatch.OBS}.{others[0]}" if len(others) == 1 else SampleBatch.OBS
            self._mask_index = self.input_names.index(f"{SampleBatch.OBS}.{mask.key}")
        model_leaves = observation_leaves(model_space, prefix)  # in the order the preprocessor flattens them
        self._model_indexes = [self.input_names.index(name) for name, _ in model_leaves]
        self._image = is_image_space(model_space)  # an image alone is the model's input as it is
        self._leaves = [_leaf_encoding(leaf) for _, leaf in model_leaves]
        self.model = copy.deepcopy(policy.model).to("cpu").eval().requires_grad_(False)
        self._state_parts = len(policy.get_initial_state())
        self.state_outputs = [state_out_key(k) for k in range(self._state_parts)]
        """a recurrent model's next state, the outputs after the actions and their distribution's inputs"""
        self._observation_inputs = len(self.input_names)
        if self._state_parts:  # a recurrent model's inputs follow the observation's arrays
            state_in = [state_in_key(k) for k in range(self._state_parts)]
            self.input_names += [*state_in, SampleBatch.PREV_ACTIONS, SampleBatch.PREV_REWARDS]
        self.dist_class = policy.dist_class
        obs_filter = policy.observation_filter
        self._filter_clip = None if obs_filter is None else float(obs_filter.clip)
        if obs_filter is not None:
            self.register_buffer("filter_mean", torch.from_numpy(obs_filter.mean.copy()))
            self.register_buffer("filter_std", torch.from_numpy(np.sqrt(obs_filter.var + obs_filter.epsilon)))
        adapter = policy.action_adapter
        self._structured = adapter.structured
        if adapter.structured:  # the leaves side by side, each in the env's units (model.json's action_layout)
            for name, values in _leaf_columns(adapter).items():
                self.register_buffer(f"leaf_{name}", torch.from_numpy(values))
        self._normalize, self._clip = adapter.normalize, adapter.clip
        self._env_shape = adapter._env_shape
        self._start = int(adapter.space.start) if isinstance(adapter.space, gym.spaces.Discrete) else 0
        if adapter.is_box:
            low, high = adapter._bounds
            self.register_buffer("action_low", torch.from_numpy(np.asarray(adapter._low)))
            self.register_buffer("action_half_range", torch.from_numpy(np.asarray(adapter._half_range)))
            self.register_buffer("clip_low", torch.from_numpy(np.asarray(low)))
            self.register_buffer("clip_high", torch.from_numpy(np.asarray(high)))

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Env actions and the action distribution's inputs for a batch of raw observations, array by array.

        A recurrent model's path also takes its state (``state_in_k``), the previous
        actions (in the policy's action space) and rewards after the observation's
        arrays, and returns the next state (``state_out_k``) after its two outputs.
        """
        obs = inputs[: self._observation_inputs]
        x = self._preprocess([obs[i] for i in self._model_indexes])
        if self._filter_clip is not None:
            normalized = (x.double() - self.filter_mean) / self.filter_std
            x = normalized.clamp(-self._filter_clip, self._filter_clip).float()
        if self._mask_index is not None:  # as the policy's rows are: the observation, then the mask's flags
            mask = obs[self._mask_index]
            x = torch.cat([x.reshape(x.shape[0], -1).float(), mask.reshape(mask.shape[0], -1).float()], dim=1)
        if not self._state_parts:
            dist_inputs = self.model.forward_inference(x)[SampleBatch.ACTION_DIST_INPUTS]
            return self._env_actions(self.dist_class(dist_inputs).deterministic_sample()), dist_inputs
        recurrent = inputs[self._observation_inputs :]
        state = list(recurrent[: self._state_parts])
        out = cast(Any, self.model).forward_inference(x, state, None, recurrent[-2], recurrent[-1])  # the recurrent contract
        dist_inputs = out[SampleBatch.ACTION_DIST_INPUTS]
        state_out = [out[key] for key in self.state_outputs]
        return self._env_actions(self.dist_class(dist_inputs).deterministic_sample()), dist_inputs, *state_out

    def _preprocess(self, arrays: list[torch.Tensor]) -> torch.Tensor:
        if self._image:
            return arrays[0]
        parts = []
        for value, one_hot in zip(arrays, self._leaves, strict=True):
            if one_hot is None:
                parts.append(value.float().reshape(value.shape[0], -1))
            else:
                codes = value.long().reshape(value.shape[0], -1)
                parts.extend(F.one_hot(codes[:, j] - start, n).float() for j, (start, n) in enumerate(one_hot))
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)

    def _env_actions(self, actions: torch.Tensor) -> torch.Tensor:
        if self._structured:
            scaled = self.leaf_low + (actions.clamp(-1.0, 1.0) + 1.0) * self.leaf_half_range
            actions = torch.where(self.leaf_normalized, scaled, actions)
            return torch.max(torch.min(actions, self.leaf_clip_high), self.leaf_clip_low) + self.leaf_offset
        if self._normalize:
            actions = self.action_low + (actions.clamp(-1.0, 1.0) + 1.0) * self.action_half_range
        elif self._clip:
            actions = torch.max(torch.min(actions, self.clip_high), self.clip_low)
        if self._env_shape is not None:
            actions = actions.reshape(actions.shape[0], *self._env_shape)
        return actions + self._start if self._start else actions


def _leaf_columns(adapter: ActionAdapter) -> dict[str, np.ndarray]:
    """Per column of a Tuple or Dict action space's flat actions, how its leaf maps to the env's units.

    ``normalized`` columns are unsquashed from [-1, 1] with ``low`` and
    ``half_range``; every column is then clamped to ``clip_low``/``clip_high``
    (infinite where its leaf is not clipped) and shifted by ``offset`` (a
    Discrete leaf's ``start``).
    """
    width = int(np.prod(adapter.policy_space.shape or ()))
    columns = {
        "normalized": np.zeros(width, bool),
        "low": np.zeros(width, np.float32),
        "half_range": np.zeros(width, np.float32),
        "clip_low": np.full(width, -np.inf, np.float32),
        "clip_high": np.full(width, np.inf, np.float32),
        "offset": np.zeros(width, np.float32),
    }
    for _, leaf, where in adapter.leaves:
        if leaf.normalize:
            columns["normalized"][where], columns["low"][where], columns["half_range"][where] = True, leaf._low, leaf._half_range
        elif leaf.clip:
            columns["clip_low"][where], columns["clip_high"][where] = leaf._bounds
        elif isinstance(leaf.space, gym.spaces.Discrete):
            columns["offset"][where] = leaf.space.start
    return columns


def _leaf_encoding(space: gym.Space[Any]) -> list[tuple[int, int]] | None:
    """How corral's preprocessor encodes one array: None flattens it as floats, else (start, n) one-hot per entry."""
    if isinstance(space, gym.spaces.Discrete):
        return [(int(space.start), int(space.n))]
    if isinstance(space, gym.spaces.MultiDiscrete):
        return [(int(s), int(n)) for s, n in zip(space.start.ravel(), space.nvec.ravel(), strict=True)]
    return None


def export_policy_model(
    policy: Policy, export_dir: str | os.PathLike[str], policy_id: str, onnx: int | bool | None = None
) -> Path:
    """Write ``model.pt`` (TorchScript), ``model.pt2`` (torch.export), with ``onnx`` also ``model.onnx``, and ``model.json``.

    A model that torch.export cannot capture gets no ``model.pt2``, with a warning that says why.

    Args:
        policy: the policy to export.
        export_dir: the folder to write into (created if missing); files already there of the same names are replaced.
        policy_id: the policy's id, recorded in ``model.json``.
        onnx: the ONNX opset to write ``model.onnx`` with; True (as RLlib's documentation writes it) takes
            :data:`DEFAULT_ONNX_OPSET`, said at INFO; None (or False, as RLlib's scripts pass it) writes no ONNX file.

    Returns:
        The path of ``model.pt``.

    Raises:
        ConfigError: the opset is not one torch writes, or ``onnx`` is asked without the ``onnx`` package.
    """
    if onnx is False:
        onnx = None
    if onnx is True:
        logger.info("onnx=True: model.onnx is written with opset %d", DEFAULT_ONNX_OPSET)
        onnx = DEFAULT_ONNX_OPSET
    if onnx is not None:
        check_onnx_opset(onnx)
    path = InferencePath(policy)
    space = policy.observation_space
    samples = [leaf_values(space, space.sample()) for _ in range(2)]
    leaves = observation_leaves(space)
    example = tuple(torch.as_tensor(np.stack([np.asarray(s[i]) for s in samples])) for i in range(len(leaves)))
    initial_state = policy.get_initial_state()
    if initial_state:
        prev_actions = zero_actions(policy.action_adapter.policy_space, 2)
        recurrent = [np.stack([part, part]) for part in initial_state] + [prev_actions, np.zeros(2, dtype=np.float32)]
        example += tuple(torch.from_numpy(array) for array in recurrent)
    folder = Path(export_dir).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # torch.jit's deprecation notice (TorchScript is what serving tools load today), and the tracer's
        # notes on shape-dependent Python branches: the model's tanh picks a kernel by size, not the result
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(path, example, check_trace=False)  # type: ignore[no-untyped-call]  # unannotated in torch
        _replace(folder / MODEL_FILE, lambda file: torch.jit.save(traced, str(file)))
        if onnx is not None:
            _replace(folder / ONNX_FILE, lambda file: _export_onnx(path, example, file, onnx))
    exported = _write_exported_program(path, example, folder / EXPORTED_PROGRAM_FILE)
    description = {
        "format": "torchscript" if onnx is None else "torchscript+onnx",
        "files": {
            "torchscript": MODEL_FILE,
            "exported_program": EXPORTED_PROGRAM_FILE if exported else None,
            "onnx": ONNX_FILE if onnx is not None else None,
        },
        "corral_version": __version__,
        "policy_id": policy_id,
        "inputs": [
            {"name": name, "space": space_to_json(leaf), "dtype": str(value.dtype).removeprefix("torch.")}
            for (name, leaf), value in zip(leaves, example, strict=False)  # the observation's arrays
        ]
        + [
            {"name": name, "shape": list(value.shape[1:]), "dtype": str(value.dtype).removeprefix("torch.")}
            for name, value in zip(path.input_names[len(leaves) :], example[len(leaves) :], strict=True)
        ],  # a recurrent policy's state (zeros at an episode's start), previous action and reward
        "outputs": [
            "actions (the leaves side by side in the env's units: see action_layout)"
            if policy.action_adapter.structured
            else "actions (in the env's action space)",
            "action_dist_inputs",
            *path.state_outputs,
        ],
        "action_space": space_to_json(policy.action_space),
        "action_layout": [  # a Tuple or Dict action space's leaves: which columns of the actions each one is
            {"path": path, "columns": [where.start, where.stop], "space": space_to_json(leaf.space)}
            for path, leaf, where in policy.action_adapter.leaves
        ],
        "observation_filter": cast(Any, policy.config).observation_filter,
        "onnx_opset": onnx,
    }
    _replace(folder / DESCRIPTION_FILE, lambda file: file.write_text(json.dumps(description, indent=1)))
    return folder / MODEL_FILE


def _write_exported_program(path: InferencePath, example: tuple[torch.Tensor, ...], file: Path) -> bool:
    """Write ``model.pt2``, ``torch.export``'s program of the same path, for any batch size; return whether it was.

    torch.export captures a model whose Python code branches on the values of its
    inputs only where it can prove the branch; a custom model it cannot capture
    keeps its TorchScript and ONNX files, and a warning says why ``model.pt2`` is missing.
    """
    batch = torch.export.Dim("batch")
    try:
        with warnings.catch_warnings():
            # torch's own nn.LSTM re-assigns its flat weights while it is captured: a note about torch, not the model
            warnings.filterwarnings("ignore", message="The tensor attributes .*_flat_weights", category=UserWarning)
            program = torch.export.export(path, example, dynamic_shapes=(tuple({0: batch} for _ in example),))
    except Exception as exc:  # torch's exporter raises many kinds (UserError, Unsupported, ...) for a model it cannot capture
        file.unlink(missing_ok=True)  # never one of an earlier export beside the new model.pt
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        warnings.warn(f"{file.name} not written: torch.export cannot capture this model ({reason})", stacklevel=3)
        return False
    _replace(file, lambda temporary: torch.export.save(program, str(temporary)))
    return True


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


def _export_onnx(path: InferencePath, example: tuple[torch.Tensor, ...], file: Path, opset: int) -> None:
    options: dict[str, Any] = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        options["dynamo"] = False  # the TorchScript-based exporter: no onnxscript needed, the same graph as model.pt
    outputs = [SampleBatch.ACTIONS, SampleBatch.ACTION_DIST_INPUTS, *path.state_outputs]
    names = [*path.input_names, *outputs]
    torch.onnx.export(
        path,
        example,
        str(file),
        opset_version=opset,
        input_names=path.input_names,
        output_names=outputs,
        dynamic_axes={name: {0: "batch"} for name in names},  # any batch size
        **options,
    )


def _replace(target: Path, write: Callable[[Path], Any]) -> None:
    """Write ``target`` through a hidden temporary file, so a reader never sees half of it."""
    temporary = target.with_name(f".{target.stem}.tmp{target.suffix}")  # the suffix kept: torch.export.save wants .pt2
    try:
        write(temporary)
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
