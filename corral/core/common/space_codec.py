"""Gymnasium spaces as JSON, exactly and without pickles: for configs, YAML files, Tune and checkpoints.

A multi-agent config names each policy's spaces (``PolicySpec``), and a config
travels as JSON (``to_dict``, ``config.json`` in a checkpoint, Tune's trial
configs). gymnasium offers no JSON form of a space, and a pickle would let a
checkpoint run code, so each space is written as ``{"type": ..., ...}`` with
its arrays in :mod:`~corral.core.common.state_codec`'s exact form (Box
bounds keep their dtype, and inf stays inf). Only the types below are read
back; any other is refused by name.

- ``Box``: ``low``, ``high`` (arrays), ``dtype``
- ``Discrete``: ``n``, ``start``
- ``MultiDiscrete``: ``nvec``, ``start`` (arrays)
- ``MultiBinary``: ``n`` (an int or a shape)
- ``Dict``: ``spaces`` (a dict of encoded spaces, in order)
- ``Tuple``: ``spaces`` (a list of encoded spaces)
- ``Repeated``: ``child_space`` (an encoded space), ``max_len``
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from corral.core.common import state_codec
from corral.core.common.repeated import Repeated

MAX_DEPTH = 16
"""How deep Dict, Tuple and Repeated spaces may nest in an encoded space."""


def encode_space(space: gym.Space[Any]) -> dict[str, Any]:
    """The JSON form of a space.

    Args:
        space: a ``Box``, ``Discrete``, ``MultiDiscrete``, ``MultiBinary``, or a ``Dict``,
            ``Tuple`` or ``Repeated`` of these.

    Returns:
        A dict of JSON values (strings, numbers, lists, dicts) that :func:`decode_space`
        turns back into an equal space.

    Raises:
        ValueError: the space is of another type.
    """
    if isinstance(space, gym.spaces.Box):
        return {
            "type": "Box",
            "low": state_codec.encode(space.low),
            "high": state_codec.encode(space.high),
            "dtype": np.dtype(space.dtype).str,
        }
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": state_codec.encode(space.nvec), "start": state_codec.encode(space.start)}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "n": space.n if isinstance(space.n, int) else [int(n) for n in space.n]}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "spaces": {str(key): encode_space(sub) for key, sub in space.spaces.items()}}
    if isinstance(space, gym.spaces.Tuple):
        return {"type": "Tuple", "spaces": [encode_space(sub) for sub in space.spaces]}
    if isinstance(space, Repeated):
        return {"type": "Repeated", "child_space": encode_space(space.child_space), "max_len": space.max_len}
    raise ValueError(
        f"cannot write the space {space} ({type(space).__name__}) as JSON; "
        "Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple and Repeated can be written"
    )


SPACE_KEY = "__gym_space__"
"""marks a space written inside another option's value (an ``env_config`` holding one): ``{SPACE_KEY: encoded}``"""


def restore_spaces(value: Any, where: str, depth: int = 0, max_depth: int = 32) -> Any:
    """``value`` with every ``{SPACE_KEY: encoded}`` in it (in dicts and lists) its space again.

    Args:
        value: an option's value as a config dict holds it.
        where: the option's name, for messages.
        depth: how deep ``value`` already is.
        max_depth: how deep to look (a config refuses deeper values anyway).

    Returns:
        The value; containers that held a space are copies.

    Raises:
        ValueError: a marked space that does not decode.
    """
    if depth >= max_depth:
        return value
    if isinstance(value, dict):
        if set(value) == {SPACE_KEY}:
            return decode_space(value[SPACE_KEY], where)
        return {key: restore_spaces(item, f"{where}.{key}", depth + 1, max_depth) for key, item in value.items()}
    if isinstance(value, list):
        return [restore_spaces(item, f"{where}[{i}]", depth + 1, max_depth) for i, item in enumerate(value)]
    return value


def decode_space(data: Any, where: str = "space", depth: int = 0) -> gym.Space[Any]:
    """The space :func:`encode_space` wrote.

    Args:
        data: the JSON form.
        where: names the value in error messages (``policies.p1.observation_space``).
        depth: how deep inside Dict and Tuple spaces this one is (callers leave it 0).

    Returns:
        The space.

    Raises:
        ValueError: naming ``where``, when the data is not an encoded space of a known type.
    """
    if depth > MAX_DEPTH:
        raise ValueError(f"{where} nests Dict and Tuple spaces deeper than {MAX_DEPTH} levels")
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise ValueError(f"{where} is not an encoded space (a dict with a 'type'): {data!r:.200}")
    kind = data["type"]
    try:
        if kind == "Box":
            low, high = state_codec.decode(data["low"]), state_codec.decode(data["high"])
            return gym.spaces.Box(low, high, dtype=np.dtype(str(data["dtype"])).type)
        if kind == "Discrete":
            return gym.spaces.Discrete(_integer(data["n"]), start=_integer(data.get("start", 0)))
        if kind == "MultiDiscrete":
            nvec, start = state_codec.decode(data["nvec"]), state_codec.decode(data.get("start"))
            return gym.spaces.MultiDiscrete(nvec, start=start)
        if kind == "MultiBinary":
            n = data["n"]
            return gym.spaces.MultiBinary(_integer(n) if not isinstance(n, list) else [_integer(k) for k in n])
        if kind == "Dict" and isinstance(data.get("spaces"), dict):
            return gym.spaces.Dict({k: decode_space(v, f"{where}.{k}", depth + 1) for k, v in data["spaces"].items()})
        if kind == "Tuple" and isinstance(data.get("spaces"), list):
            return gym.spaces.Tuple([decode_space(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(data["spaces"])])
        if kind == "Repeated":
            return Repeated(decode_space(data["child_space"], f"{where}.child_space", depth + 1), _integer(data["max_len"]))
    except ValueError as exc:
        if str(exc).startswith(where):
            raise
        raise ValueError(f"{where} is not a valid {kind} space: {exc}") from None
    except (KeyError, TypeError, AssertionError) as exc:  # gymnasium checks some arguments with assert
        raise ValueError(f"{where} is not a valid {kind} space: {type(exc).__name__}: {exc}") from None
    known = "Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple, Repeated"
    raise ValueError(f"{where} has the space type {kind!r}; known: {known}")


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not an integer")
    return value
