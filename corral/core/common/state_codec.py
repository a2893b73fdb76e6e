"""numpy arrays and torch tensors inside JSON state, exactly and without pickles.

Env runners' state (observations in flight, episode counters, environments'
internals, generators) goes into ``algorithm_state.json``. An array is written
as ``{"__ndarray__": {dtype, shape, base64}}`` (``"torch": true`` for a CPU
tensor), its raw bytes in base64, so a float32 comes back bit for bit; only
numeric and boolean dtypes are read back, never objects. Compressed, the bytes
are zlib's (``"zlib": true``), and are never inflated beyond the array's size.
A tuple is written as ``{"__tuple__": [...]}`` and comes back a tuple (a Tuple
space's observations).
"""

from __future__ import annotations

import base64
import zlib
from typing import Any

import numpy as np

_KEY = "__ndarray__"
_TUPLE = "__tuple__"


def encode(value: Any, compress: bool = False) -> Any:
    """``value`` with every numpy array and scalar, and torch tensor, replaced by its JSON form (see the module docstring).

    Args:
        value: what to encode: an array, or dicts, lists and tuples holding them.
        compress: store the arrays' bytes zlib-compressed.
    """
    is_tensor = type(value).__module__ == "torch" and type(value).__name__ == "Tensor"
    if isinstance(value, (np.ndarray, np.generic)) or is_tensor:
        source = value.detach().cpu().numpy() if is_tensor else np.asarray(value)
        array = np.ascontiguousarray(source).reshape(source.shape)  # ascontiguousarray makes a 0-d array 1-d
        if array.dtype.kind not in "biuf":
            raise TypeError(f"cannot store an array of dtype {array.dtype} in a checkpoint")
        data = array.tobytes()
        spec: dict[str, Any] = {
            "dtype": array.dtype.str,
            "shape": list(array.shape),
            "base64": base64.b64encode(zlib.compress(data) if compress else data).decode("ascii"),
        }
        if compress:
            spec["zlib"] = True
        if is_tensor:
            spec["torch"] = True
        return {_KEY: spec}
    if isinstance(value, dict):
        return {str(k): encode(v, compress) for k, v in value.items()}
    if isinstance(value, tuple):
        return {_TUPLE: [encode(v, compress) for v in value]}
    if isinstance(value, list):
        return [encode(v, compress) for v in value]
    return value


def decode(value: Any) -> Any:
    """The inverse of :func:`encode`.

    Raises:
        ValueError: an encoded array has a non-numeric dtype, or its bytes do not fit its shape.
    """
    if isinstance(value, dict):
        if set(value) == {_KEY}:
            return _array(value[_KEY])
        if set(value) == {_TUPLE} and isinstance(value[_TUPLE], list):
            return tuple(decode(v) for v in value[_TUPLE])
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def _array(spec: Any) -> Any:
    if not isinstance(spec, dict) or not {"dtype", "shape", "base64"} <= set(spec):
        raise ValueError("an encoded array needs dtype, shape and base64")
    dtype = np.dtype(str(spec["dtype"]))
    if dtype.kind not in "biuf":
        raise ValueError(f"an encoded array has dtype {dtype}; only numbers and booleans are read back")
    shape = tuple(int(n) for n in spec["shape"])
    if any(n < 0 for n in shape):
        raise ValueError(f"an encoded array has the shape {shape}")
    data = base64.b64decode(str(spec["base64"]), validate=True)
    if spec.get("zlib") is True:
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        try:
            inflater = zlib.decompressobj()
            data = inflater.decompress(data, size)  # no more than the array holds, whatever the stream claims
        except zlib.error as exc:
            raise ValueError(f"an encoded array's compressed bytes are damaged: {exc}") from None
        if not inflater.eof or inflater.unconsumed_tail:
            raise ValueError(f"an encoded array of shape {shape} and dtype {dtype} inflates to more or fewer bytes")
    if len(data) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
        raise ValueError(f"an encoded array of shape {shape} and dtype {dtype} has {len(data)} bytes")
    array = np.frombuffer(data, dtype=dtype).reshape(shape).copy()
    if spec.get("torch") is True:
        import torch

        return torch.from_numpy(array)
    return array
