"""Columns read from files, under the names and in the dtypes a policy learns from.

A file does not always say what corral's sampler would: JSON lines hold bare
numbers (observations come back float64, flags maybe 0/1), Parquet written by
another tool may store other widths, and RLlib's files before Ray 2.3 name an
episode's end ``dones``. :func:`standard_names` and :func:`typed_columns` turn
one block of rows into what the sampler hands a policy, so every file trains
the same whatever wrote it:

- ``dones`` is read as ``terminateds`` (RLlib's reader does the same); a file
  with ``terminateds`` but no ``truncateds`` marks no truncated episode, so
  ``truncateds`` is all False;
- ``obs`` and ``new_obs`` take the dtype of the policy's preprocessed
  observations (float32, or an image's uint8); a float value an integer dtype
  cannot hold is refused, never wrapped;
- ``terminateds`` and ``truncateds`` are booleans; ``rewards``, ``action_logp``,
  ``vf_preds`` and every other float column are float32, every other integer
  column int64; string episode ids (RLlib's newer stack) become integers, one
  per episode of the block.

Actions are the caller's: they go into the policy's action space, which needs
the space (:class:`~corral.integrations.offline.experience_input.InputCheck`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from corral.core.common.sample_batch import SampleBatch
from corral.errors import ConfigError

Columns = dict[str, np.ndarray]
RLLIB_NAMES = {SampleBatch.DONES: SampleBatch.TERMINATEDS}
"""RLlib's older column names and corral's: ``dones`` (Ray before 2.3) ended an episode, truncated or not"""
FLAGS = (SampleBatch.TERMINATEDS, SampleBatch.TRUNCATEDS)
OBSERVATIONS = (SampleBatch.OBS, SampleBatch.NEXT_OBS)
NUMBERS = (
    SampleBatch.REWARDS,
    SampleBatch.ACTION_LOGP,
    SampleBatch.ACTION_DIST_INPUTS,
    SampleBatch.VF_PREDS,
    SampleBatch.ADVANTAGES,
    SampleBatch.VALUE_TARGETS,
)
"""columns a policy reads as float32 even where a file holds whole numbers (a JSON line's rewards of 1)"""

EPISODES_KEY = b"corral.episodes"
"""the Parquet metadata key of a file written with ``output_write_episodes=True`` (one row per episode)"""


def standard_names(batch: Columns) -> Columns:
    """``batch`` under corral's column names: RLlib's ``dones`` as ``terminateds``, and ``truncateds`` where it lacks one.

    Args:
        batch: one block of a file's rows, by column.

    Returns:
        The same arrays, renamed; a False ``truncateds`` added to a batch with
        ``terminateds`` but none (RLlib's meaning: every end it marks is terminal).
    """
    out = dict(batch)
    for old, new in RLLIB_NAMES.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    if SampleBatch.TERMINATEDS in out and SampleBatch.TRUNCATEDS not in out:
        out[SampleBatch.TRUNCATEDS] = np.zeros(len(out[SampleBatch.TERMINATEDS]), bool)
    return out


def typed_columns(batch: Columns, obs_dtype: np.dtype, refuse: Callable[[str, str], ConfigError]) -> Columns:
    """``batch`` (all but its actions) in the dtypes the policy learns from (see the module docstring).

    Args:
        batch: one block of rows, under corral's names (:func:`standard_names`).
        obs_dtype: the dtype of the policy's preprocessed observations.
        refuse: makes the error for a column (it names the file).

    Returns:
        The columns cast; ``actions`` and columns of other kinds (strings, objects) as they were.

    Raises:
        ConfigError: an observation column with a value ``obs_dtype`` cannot hold exactly (a fraction, or out of
            range for an integer dtype).
    """
    out = dict(batch)
    for name, value in batch.items():
        if name == SampleBatch.ACTIONS:
            continue
        if name in OBSERVATIONS:
            out[name] = _observations(name, value, obs_dtype, refuse)
        elif name in FLAGS:
            out[name] = value.astype(bool)
        elif name == SampleBatch.EPS_ID and value.dtype.kind in "USO":
            out[name] = np.unique(value.astype(str), return_inverse=True)[1].astype(np.int64).reshape(value.shape)
        elif name in NUMBERS or value.dtype.kind == "f":
            out[name] = value.astype(np.float32, copy=False)
        elif value.dtype.kind in "iu":
            out[name] = value.astype(np.int64, copy=False)
    return out


def _observations(name: str, value: np.ndarray, dtype: np.dtype, refuse: Callable[[str, str], ConfigError]) -> np.ndarray:
    cast = value.astype(dtype, copy=False)
    # an image's uint8 from JSON's int64 or float64 must come back exactly: 255.5 or 300 would wrap silently
    if dtype.kind in "iub" and value.dtype != dtype and not np.array_equal(cast.astype(value.dtype), value):
        raise refuse(name, f"holds values that the policy's {dtype} observations cannot hold exactly")
    return cast
