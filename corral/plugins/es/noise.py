"""The shared noise table the perturbations are slices of, and the rank transform of ES's returns.

Every perturbation is ``noise_stdev`` times a slice of one big table of
standard normal numbers, so a perturbation travels as one integer (where its
slice starts). The table is made once, by a Ray task, straight into the
object store: the driver and every env runner on a node map that one copy
read-only (Ray gives numpy arrays from its store without copying them), so a
node holds it once however many runners it has. Without remote runners it is
an ordinary array in this process.
"""

from __future__ import annotations

from typing import Any

import numpy as np

NOISE_SEED = 123
"""the table's seed: every run draws the same table (RLlib's, too, is seeded once and for all)"""


def make_noise(size: int, seed: int = NOISE_SEED) -> np.ndarray:
    """``size`` standard normal float32 numbers.

    Args:
        size: how many.
        seed: the generator's seed.

    Returns:
        The table.
    """
    return np.random.default_rng(seed).standard_normal(size, dtype=np.float32)


def shared_noise(size: int, on_ray: bool) -> tuple[np.ndarray, Any]:
    """The noise table, and how to hand it to env runners.

    Args:
        size: numbers in the table.
        on_ray: put it in Ray's object store (remote runners read it there).

    Returns:
        ``(table, handle)``: the table as this process reads it, and the object
        reference the runners resolve (the table itself without Ray).
    """
    if not on_ray:
        table = make_noise(size)
        return table, table
    from corral.core.learning.learners.learner_group import ensure_ray

    ray = ensure_ray()
    ref = ray.remote(make_noise).options(num_cpus=0).remote(size)
    return ray.get(ref), ref


def resolve(handle: Any) -> Any:
    """What :func:`shared_noise` (or ``ray.put``) handed over: the value itself, read from Ray's store if it is a reference."""
    if type(handle).__name__ == "ObjectRef":
        import ray

        return ray.get(handle)
    return handle


def centered_ranks(values: np.ndarray) -> np.ndarray:
    """Each value's rank among all of them, scaled to [-0.5, 0.5] (ES's fitness shaping; ties keep their order).

    Args:
        values: the returns, any shape.

    Returns:
        float32 ranks of the same shape.
    """
    flat = values.ravel()
    ranks = np.empty(flat.size, dtype=np.float32)
    ranks[flat.argsort(kind="stable")] = np.arange(flat.size, dtype=np.float32)
    return (ranks / max(flat.size - 1, 1) - 0.5).reshape(values.shape)


def weighted_noise_sum(weights: np.ndarray, starts: np.ndarray, noise: np.ndarray, dim: int, chunk: int = 500) -> np.ndarray:
    """``sum_i weights[i] * noise[starts[i] : starts[i] + dim]``, in chunks of rows (the update's gradient estimate).

    Args:
        weights: one weight per perturbation.
        starts: where each perturbation's slice starts.
        noise: the table.
        dim: the slice length (the policy's number of weights).
        chunk: perturbations stacked at a time (bounds the memory the sum takes).

    Returns:
        A float32 vector of ``dim`` numbers.
    """
    total = np.zeros(dim, dtype=np.float32)
    for begin in range(0, len(starts), chunk):
        rows = np.stack([noise[s : s + dim] for s in starts[begin : begin + chunk]])
        total += weights[begin : begin + chunk].astype(np.float32) @ rows
    return total
