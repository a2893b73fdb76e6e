"""RLlib's ``policy.sample_batch`` functions over corral's batches: joining them, and one policy's batch out of many.

corral's :meth:`SampleBatch.concat` keeps the columns every batch has (files
and the sampler may differ in extras); RLlib's :func:`concat_samples` keeps the
first non-empty batch's columns and refuses a batch that lacks one, joins list
columns (``infos``) and nested dict columns too, and skips empty batches.
Scripts written for RLlib expect the latter, so it is written here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from corral.core.common.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch


def _joined(key: str, values: list[Any]) -> Any:
    """One column's values of several batches joined along the rows (arrays, tensors, lists, or dicts of them)."""
    first = values[0]
    if isinstance(first, dict):
        if any(not isinstance(v, dict) or v.keys() != first.keys() for v in values):
            raise ValueError(f"concat_samples: column {key!r} holds dicts whose keys differ between the batches")
        return {k: _joined(f"{key}.{k}", [v[k] for v in values]) for k in first}
    if isinstance(first, torch.Tensor):
        return torch.cat(values, dim=0)
    if isinstance(first, list):
        return [row for value in values for row in value]
    if isinstance(first, np.ndarray):
        try:
            return np.concatenate(values, axis=0)
        except ValueError as exc:
            shapes = [np.shape(v) for v in values]
            raise ValueError(f"concat_samples: column {key!r} cannot be joined, its shapes are {shapes}: {exc}") from None
    raise ValueError(f"concat_samples: column {key!r} holds {type(first).__name__}; a column is an array, a tensor or a list")


def _concat_single(samples: Sequence[SampleBatch]) -> SampleBatch:
    batches = [s for s in samples if s.count > 0]
    if not batches:
        return SampleBatch()
    keys = list(batches[0])
    for number, batch in enumerate(batches[1:], 2):
        missing = [k for k in keys if k not in batch]
        if missing:
            raise ValueError(
                f"concat_samples: non-empty batch {number} lacks the columns {missing} that the first one has; "
                "give every batch the same columns (or drop those columns first)"
            )
    return SampleBatch({k: _joined(k, [b[k] for b in batches]) for k in keys})


def _concat_multi(samples: Sequence[SampleBatch | MultiAgentBatch]) -> MultiAgentBatch:
    by_policy: dict[str, list[SampleBatch]] = {}
    env_steps = agent_steps = 0
    for sample in samples:
        if isinstance(sample, SampleBatch):
            if sample.count == 0:
                continue
            sample = sample.as_multi_agent()
        for policy_id, batch in sample.policy_batches.items():
            by_policy.setdefault(policy_id, []).append(batch)
        env_steps += sample.env_steps
        agent_steps += sample.agent_steps
    return MultiAgentBatch({pid: _concat_single(batches) for pid, batches in by_policy.items()}, env_steps, agent_steps)


def concat_samples(samples: Sequence[SampleBatch | MultiAgentBatch]) -> SampleBatch | MultiAgentBatch:
    """Join batches into one, rows in order, as RLlib's ``concat_samples`` does.

    Scripts gather batches from several sample calls or files and train on
    them at once. All SampleBatches give a SampleBatch with the columns of the
    first non-empty one (empty batches are skipped; none at all gives an empty
    SampleBatch). Any MultiAgentBatch among them gives a MultiAgentBatch: each
    non-empty SampleBatch counts as the default policy's (its rows its env
    steps), and each policy's batches are joined; env and agent steps add up.

    Args:
        samples: the batches, SampleBatches and MultiAgentBatches.

    Returns:
        A new SampleBatch, or a new MultiAgentBatch when any input is one.

    Raises:
        ValueError: an item that is neither kind of batch; a batch that lacks a column of the
            first one; a column whose values cannot be joined (shapes or dict keys differ).
    """
    if isinstance(samples, (SampleBatch, MultiAgentBatch)) or not isinstance(samples, Sequence):
        raise ValueError(f"concat_samples takes a list of batches, got {type(samples).__name__}; wrap one batch in a list")
    for number, sample in enumerate(samples, 1):
        if not isinstance(sample, (SampleBatch, MultiAgentBatch)):
            raise ValueError(
                f"concat_samples joins SampleBatch and MultiAgentBatch objects; item {number} is a {type(sample).__name__}"
                + (" (wrap a dict of columns in SampleBatch(...))" if isinstance(sample, dict) else "")
            )
    if any(isinstance(s, MultiAgentBatch) for s in samples):
        return _concat_multi(samples)
    return _concat_single([s for s in samples if isinstance(s, SampleBatch)])


def convert_ma_batch_to_sample_batch(batch: SampleBatch | MultiAgentBatch) -> SampleBatch:
    """The single-agent batch within ``batch``, for code that handles one policy's rows (offline estimators, readers).

    A SampleBatch is returned as it is; a MultiAgentBatch with one policy gives
    that policy's batch.

    Args:
        batch: a SampleBatch, or a MultiAgentBatch of one policy.

    Returns:
        The SampleBatch.

    Raises:
        ValueError: the MultiAgentBatch holds several policies' rows (or none); the message names them.
        TypeError: ``batch`` is neither kind of batch.
    """
    if isinstance(batch, SampleBatch):
        return batch
    if not isinstance(batch, MultiAgentBatch):
        raise TypeError(f"convert_ma_batch_to_sample_batch takes a SampleBatch or a MultiAgentBatch, got {type(batch).__name__}")
    policy_ids = list(batch.policy_batches)
    if len(policy_ids) == 1:
        return batch.policy_batches[policy_ids[0]]
    held = ", ".join(map(repr, policy_ids)) if policy_ids else "none"
    raise ValueError(
        f"cannot make one single-agent batch of a MultiAgentBatch with the rows of {len(policy_ids)} policies ({held}); "
        f"take one policy's rows with batch.policy_batches[<policy id>] (a single-agent run's is {DEFAULT_POLICY_ID!r}). "
        "Off-policy estimation and reading offline data handle one policy's rows only"
    )
