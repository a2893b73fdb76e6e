"""RLlib's space helpers: ``flatten_space``, ``get_base_struct_from_space`` (and ``get_preprocessor``, whose
preprocessors are :mod:`corral.core.common.preprocessors`)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

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
