"""RLlib's small numpy and torch helpers (``utils.numpy``, ``utils.torch_utils``, ``utils.sgd``) that scripts call.

Nested structures are dicts, lists and tuples (what RLlib's ``tree`` walks in
practice); each helper keeps the structure and converts the leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

FLOAT_MIN = -3.4e38
"""The smallest float32 RLlib masks logits with"""
FLOAT_MAX = 3.4e38
SMALL_NUMBER = 1e-6
LARGE_INTEGER = 100_000_000


def _map_leaves(fn: Callable[[Any], Any], value: Any) -> Any:
    if isinstance(value, dict):
        return type(value)((k, _map_leaves(fn, v)) for k, v in value.items())
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(_map_leaves(fn, v) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_map_leaves(fn, v) for v in value)
    return fn(value)


def convert_to_numpy(x: Any, reduce_type: bool = True) -> Any:
    """Torch tensors in ``x`` (nested) as numpy arrays on the CPU; a 0-d tensor as a Python number.

    Args:
        x: a value or a nested dict/list/tuple of values.
        reduce_type: cast float arrays to float32 and integer arrays to int32, as RLlib does.

    Returns:
        The same structure with numpy leaves where there were tensors.
    """

    def leaf(item: Any) -> Any:
        if isinstance(item, torch.Tensor):
            item = item.detach().cpu()
            item = item.item() if item.dim() == 0 else item.numpy()
        if reduce_type and isinstance(item, np.ndarray):
            if np.issubdtype(item.dtype, np.floating):
                return item.astype(np.float32)
            if np.issubdtype(item.dtype, np.integer):
                return item.astype(np.int32)
        return item

    return _map_leaves(leaf, x)


def convert_to_torch_tensor(x: Any, device: str | torch.device | None = None, pin_memory: bool = False) -> Any:
    """Numpy arrays and numbers in ``x`` (nested) as torch tensors; float64 becomes float32, as in RLlib.

    Args:
        x: a value or a nested dict/list/tuple of values.
        device: where the tensors go (default: the CPU).
        pin_memory: pin CPU tensors (faster copies to a GPU later).

    Returns:
        The same structure with tensor leaves (``None`` leaves stay ``None``).
    """

    def leaf(item: Any) -> Any:
        if item is None:
            return None
        tensor = item if isinstance(item, torch.Tensor) else torch.as_tensor(np.asarray(item))
        if tensor.dtype == torch.float64:
            tensor = tensor.float()
        if pin_memory and tensor.device.type == "cpu" and torch.cuda.is_available():
            tensor = tensor.pin_memory()
        return tensor.to(device) if device is not None else tensor

    return _map_leaves(leaf, x)


def softmax(x: np.ndarray | list[float], axis: int = -1, epsilon: float | None = None) -> np.ndarray:
    """The softmax of ``x`` along ``axis``, each probability at least ``epsilon``.

    Args:
        x: logits.
        axis: the axis to normalize over.
        epsilon: the floor of each output (default 1e-6, RLlib's).

    Returns:
        The probabilities.
    """
    x = np.asarray(x)
    exp = np.exp(x - np.max(x, axis=axis, keepdims=True))  # shifted: the same softmax without overflow
    return np.maximum(exp / np.sum(exp, axis=axis, keepdims=True), epsilon or SMALL_NUMBER)


def one_hot(x: Any, depth: int = 0, on_value: float = 1.0, off_value: float = 0.0, dtype: Any = np.float32) -> np.ndarray:
    """Integer indices as one-hot vectors along a new last axis (numpy).

    Args:
        x: indices (an int, an array or a tensor); booleans count as 0/1.
        depth: the vector length (0: the largest index plus one).
        on_value: the value at the index.
        off_value: the value elsewhere.
        dtype: the result's dtype.

    Returns:
        An array of shape ``x.shape + (depth,)``.

    Raises:
        ValueError: an index is negative or not below ``depth``.
    """
    indices = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    if indices.dtype == np.bool_:
        indices, depth = indices.astype(np.int64), 2
    depth = depth or int(indices.max()) + 1
    if indices.size and (indices.min() < 0 or indices.max() >= depth):
        raise ValueError(f"one_hot: indices must lie in [0, {depth}); got {indices.min()}..{indices.max()}")
    out = np.full((*indices.shape, depth), off_value, dtype=dtype)
    np.put_along_axis(out, indices[..., None].astype(np.int64), on_value, axis=-1)
    return out


def torch_one_hot(x: torch.Tensor, space: gym.Space[Any]) -> torch.Tensor:
    """RLlib's torch ``one_hot(x, space)``: a batch of Discrete or MultiDiscrete actions as one-hot rows.

    Args:
        x: the batch, ``(B,)`` for Discrete or ``(B, n)`` for MultiDiscrete.
        space: the space the indices come from.

    Returns:
        ``(B, n)`` for Discrete; the components' one-hot vectors side by side for MultiDiscrete.

    Raises:
        ValueError: the space is neither Discrete nor MultiDiscrete.
    """
    if isinstance(space, gym.spaces.Discrete):
        return torch.nn.functional.one_hot(x.long(), int(space.n))
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.ravel(space.nvec)
        flat = x.reshape(x.shape[0], -1).long()
        return torch.cat([torch.nn.functional.one_hot(flat[:, i], int(n)) for i, n in enumerate(nvec)], dim=-1)
    raise ValueError(f"one_hot takes a Discrete or MultiDiscrete space; got {space}")


def explained_variance(y: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
    """How much of ``y``'s variance ``pred`` explains: ``1 - Var[y - pred] / Var[y]``, at least -1.

    Args:
        y: the targets.
        pred: the predictions.

    Returns:
        A 0-d tensor for 1-d inputs (1 is perfect; 0 no better than the mean; -1 for a constant ``y``).
    """
    y_var = torch.var(y, dim=0)
    diff_var = torch.var(y - pred, dim=0)
    return torch.clamp(1 - (diff_var / y_var + SMALL_NUMBER), min=-1.0)  # RLlib's formula, epsilon and all


def sequence_mask(
    lengths: torch.Tensor, maxlen: int | None = None, dtype: torch.dtype | None = None, time_major: bool = False
) -> torch.Tensor:
    """A mask of which steps of each padded sequence are real: ``mask[b, t] = t < lengths[b]``.

    Args:
        lengths: each sequence's length, ``(B,)``.
        maxlen: the padded length (default: the longest).
        dtype: the mask's dtype (default bool).
        time_major: return ``(T, B)`` instead of ``(B, T)``.

    Returns:
        The mask.
    """
    maxlen = int(lengths.max()) if maxlen is None else int(maxlen)
    mask = torch.arange(maxlen, device=lengths.device)[None, :] < lengths[:, None]
    mask = mask.t() if time_major else mask
    return mask.to(dtype) if dtype is not None else mask


def standardized(array: np.ndarray) -> np.ndarray:
    """``array`` shifted to mean 0 and scaled to standard deviation 1 (RLlib's floor of 1e-4 on the deviation).

    Args:
        array: the values.

    Returns:
        The standardized values.
    """
    return (array - array.mean()) / max(1e-4, float(array.std()))
