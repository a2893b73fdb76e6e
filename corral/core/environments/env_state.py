"""The state of a runner's environments mid-episode, so a resumed run continues the very same episodes.

An environment is an arbitrary Python object, and a checkpoint never holds a
pickle, so its state is captured in one of two ways:

- **Replay** (sub-environments stepped in a loop, each in a
  :class:`~corral.core.environments.envs.SubEnvironmentGuard`): the guard records, for the
  episode in progress, the seed and the state of the env's ``np_random`` just
  before its reset, and every action since. Restoring resets the env with that
  generator state and steps it through the actions again, which brings any
  environment that is deterministic given its ``np_random`` (every gymnasium
  env) to the same state, whatever its internals (physics engines included).
  An episode longer than :data:`~corral.core.environments.envs.MAX_REPLAY_STEPS` is not
  recorded; it starts anew after a restore.
- **Attributes** (a natively vectorised env such as CartPole's): the env's
  numpy arrays, numbers and ``np_random`` are saved and set back. A restore
  only sets attributes the env already has, of the same type and shape.

Both are JSON (arrays through :mod:`corral.core.common.state_codec`).
"""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import numpy as np

from corral.core.common import state_codec
from corral.core.environments.envs import SubEnvironmentGuard, is_guarded
from corral.core.seeding import generator_state, set_generator_state


def get_env_state(env: gym.vector.VectorEnv) -> dict[str, Any]:
    """The state of a runner's vector env: ``{"kind": "replay" | "attributes", ...}``."""
    if is_guarded(env):
        return {"kind": "replay", "sub_envs": [guard.episode_record() for guard in env.envs]}  # type: ignore[attr-defined]
    values: dict[str, Any] = {}
    for name, value in vars(env.unwrapped).items():
        if isinstance(value, np.random.Generator):
            values[name] = {"generator": generator_state(value)}
        elif isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
            values[name] = {"array": state_codec.encode(value)}
        elif value is None or isinstance(value, (bool, int, float)):
            values[name] = {"value": value}
    return {"kind": "attributes", "values": values}


def set_env_state(env: gym.vector.VectorEnv, state: Any, autoreset: np.ndarray) -> None:
    """Put a runner's vector env back into :func:`get_env_state`'s state.

    Args:
        env: the runner's vector env, freshly made.
        state: what :func:`get_env_state` returned.
        autoreset: which sub-environments reset on the next step (their episode just ended).

    Raises:
        ValueError: the state does not fit this env.
    """
    if not isinstance(state, dict):
        raise ValueError("an env state must be a dict")
    if state.get("kind") == "replay":
        records = state.get("sub_envs")
        if not is_guarded(env) or not isinstance(records, list) or len(records) != env.num_envs:
            raise ValueError(
                f"the env state replays {len(records) if isinstance(records, list) else '?'} sub-environments, "
                f"this runner steps {env.num_envs} in a loop"
            )
        for guard, record in zip(env.envs, records, strict=True):
            cast(SubEnvironmentGuard, guard).replay(record)
        env._autoreset_envs = np.array(autoreset, dtype=bool)  # SyncVectorEnv's next-step autoreset flags
        return
    if state.get("kind") == "attributes":
        env.reset(seed=0)  # a fresh env makes some attributes (its np_random) only when first reset
        _set_attributes(env.unwrapped, state.get("values"))
        return
    raise ValueError(f"unknown env state kind {state.get('kind')!r}")


def _set_attributes(target: Any, values: Any) -> None:
    if not isinstance(values, dict):
        raise ValueError("env attributes must be a dict")
    current = vars(target)
    for name, saved in values.items():
        if name not in current or not isinstance(saved, dict):
            raise ValueError(f"the env has no attribute {name!r} to restore")
        now = current[name]
        if isinstance(now, np.random.Generator) and "generator" in saved:
            set_generator_state(now, saved["generator"])
        elif isinstance(now, np.ndarray) and "array" in saved:
            array = state_codec.decode(saved["array"])
            if array.shape != now.shape or array.dtype != now.dtype:
                raise ValueError(
                    f"env attribute {name!r} has shape {now.shape} and dtype {now.dtype}, "
                    f"the checkpoint {array.shape} {array.dtype}"
                )
            setattr(target, name, array)
        elif "value" in saved and (now is None or saved["value"] is None or type(now) is type(saved["value"])):
            setattr(target, name, saved["value"])
        else:
            raise ValueError(f"env attribute {name!r} is a {type(now).__name__}; the checkpoint holds {saved!r:.80}")
