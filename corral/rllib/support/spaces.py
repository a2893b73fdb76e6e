"""RLlib's space helpers: ``flatten_space``, ``get_base_struct_from_space`` (and ``get_preprocessor``, whose
preprocessors are :mod:`corral.core.common.preprocessors`)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from corral.core.common.preprocessors import (
    FlatteningPreprocessor as FlatteningPreprocessor,
    NoPreprocessor as NoPreprocessor,
    get_preprocessor as get_preprocessor,
)


def get_base_struct_from_space(space: gym.Space[Any]) -> Any:
    """A Tuple space as a tuple and a Dict space as a dict of its parts, recursively; other spaces as themselves.

    Args:
        space: the space.
    """
    if isinstance(space, gym.spaces.Tuple):
        return tuple(get_base_struct_from_space(s) for s in space.spaces)
    if isinstance(space, gym.spaces.Dict):
        return {k: get_base_struct_from_space(s) for k, s in space.spaces.items()}
    return space


def flatten_space(space: gym.Space[Any]) -> list[gym.Space[Any]]:
    """The primitive spaces inside ``space``, in order (a Dict's keys sorted, as RLlib's ``tree.flatten`` orders them).

    Args:
        space: the space.

    Returns:
        A list of the leaves (``[space]`` for a primitive space).
    """
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for s in space.spaces for leaf in flatten_space(s)]
    if isinstance(space, gym.spaces.Dict):
        return [leaf for key in sorted(space.spaces) for leaf in flatten_space(space.spaces[key])]
    return [space]


def batch(list_of_structs: list[Any], individual_items_already_have_batch_dim: bool = False) -> Any:
    """One struct of arrays from a list of alike structs (dicts, tuples and lists of values): RLlib's ``batch``.

    Args:
        list_of_structs: the items, each of the same nesting (an action sampled from a Dict space, an observation).
        individual_items_already_have_batch_dim: each leaf already has a batch axis: concatenate, not stack.

    Returns:
        The struct of the first item, each leaf the items' leaves stacked (or concatenated) into one array.

    Raises:
        ValueError: no items, or items of different nesting.
    """
    if not list_of_structs:
        raise ValueError("batch() needs at least one item to batch")
    join = np.concatenate if individual_items_already_have_batch_dim else np.stack
    return _zip_leaves(list_of_structs, lambda leaves: join([np.asarray(leaf) for leaf in leaves]))


def unbatch(batches_struct: Any) -> list[Any]:
    """The list of structs a batched struct holds, one per row: RLlib's ``unbatch``, the inverse of :func:`batch`.

    Args:
        batches_struct: a struct (dicts, tuples and lists) whose leaves are arrays with the same first axis.

    Returns:
        One struct per row.
    """
    leaves = _leaves(batches_struct)
    rows = len(leaves[0]) if leaves else 0
    return [_rebuild(batches_struct, iter([leaf[i] for leaf in leaves])) for i in range(rows)]


def _zip_leaves(structs: list[Any], combine: Any) -> Any:
    first = structs[0]
    if isinstance(first, dict):
        if any(not isinstance(s, dict) or s.keys() != first.keys() for s in structs):
            raise ValueError("batch(): the items are not alike (dicts of other keys)")
        return {key: _zip_leaves([s[key] for s in structs], combine) for key in first}
    if isinstance(first, (tuple, list)):
        if any(not isinstance(s, (tuple, list)) or len(s) != len(first) for s in structs):
            raise ValueError("batch(): the items are not alike (sequences of other lengths)")
        return type(first)(_zip_leaves([s[i] for s in structs], combine) for i in range(len(first)))
    return combine(structs)


def _leaves(struct: Any) -> list[Any]:
    if isinstance(struct, dict):
        return [leaf for key in struct for leaf in _leaves(struct[key])]
    if isinstance(struct, (tuple, list)):
        return [leaf for item in struct for leaf in _leaves(item)]
    return [struct]


def _rebuild(struct: Any, values: Any) -> Any:
    if isinstance(struct, dict):
        return {key: _rebuild(struct[key], values) for key in struct}
    if isinstance(struct, (tuple, list)):
        return type(struct)(_rebuild(item, values) for item in struct)
    return next(values)
