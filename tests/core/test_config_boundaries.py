"""A sweep of boundary values: each one trains an iteration or is refused, with a CorralError, before any harm.

For every numeric field of every built-in algorithm: its lower bound, just past each
bound, NaN, the infinities and the largest floats and integers. A value either
is refused (``ConfigError`` at once, or a ``CorralError`` at build), trains one
iteration, or stops training with a ``TrainingError`` / ``EnvError``; any other
exception, or a hang (the timeout), fails. Upper bounds that are durations or
sizes (``min_time_s_per_iteration=86400``) are valid and slow by request, so
only bounds of fractions (``gamma=1``) are trained at.
"""

from __future__ import annotations

import math
import typing
from typing import Any

import annotated_types
import numpy as np
import pytest

from corral import ConfigError, CorralError, EnvError, TrainingError, get_config

TINY_OFF_POLICY: dict[str, Any] = {
    "learning_starts": 0,
    "train_batch_size": 16,
    "training_intensity": 16.0,
    "min_sample_timesteps_per_iteration": 16,
    "replay_buffer_config": {"type": "ReplayBuffer", "capacity": 1000},
    "model": {"fcnet_hiddens": [16]},
}

BASES: dict[str, dict[str, Any]] = {
    "PPO": {"env": "CartPole-v1", "train_batch_size": 64, "minibatch_size": 32, "num_epochs": 1, "num_envs_per_env_runner": 2},
    "DQN": {"env": "CartPole-v1", **TINY_OFF_POLICY, "num_envs_per_env_runner": 2},
    "A2C": {"env": "CartPole-v1", "train_batch_size": 32, "min_sample_timesteps_per_iteration": 64, "num_envs_per_env_runner": 2},
    "IMPALA": {"env": "CartPole-v1", "train_batch_size": 40, "rollout_fragment_length": 10, "num_envs_per_env_runner": 4},
    "SAC": {"env": "Pendulum-v1", **TINY_OFF_POLICY},
}
COMMON = {"seed": 0, "log_to_tensorboard": False}


def bounds(metadata: list[Any]) -> dict[str, float]:
    found = {}
    for item in metadata:
        for name in ("ge", "gt", "le", "lt"):
            if isinstance(item, getattr(annotated_types, name.capitalize())):
                found[name] = getattr(item, name)
    return found


def numeric_kind(annotation: Any) -> type | None:
    text = str(annotation)
    if "float" in text:
        return float
    if "int" in text and "Literal" not in text:
        return int
    return None


def numeric_field(info: Any) -> tuple[type, list[Any]] | None:
    """The number type of a field and its constraints; for ``Annotated[int, Field(...)] | Literal["auto"]``, the int's."""
    kind = numeric_kind(info.annotation)
    if kind is not None:
        return kind, info.metadata
    for member in typing.get_args(info.annotation):
        args = typing.get_args(member)
        if typing.get_origin(member) is typing.Annotated and args[0] in (int, float):
            return args[0], [item for extra in args[1:] for item in getattr(extra, "metadata", [extra])]
    return None


def boundary_values(kind: type, limits: dict[str, float]) -> list[Any]:
    """Values at and just past each bound, plus the extremes of the type."""
    values: list[Any] = []
    step = (lambda x, d: x + d) if kind is int else (lambda x, d: float(np.nextafter(x, d * math.inf)))
    if "ge" in limits:
        values += [limits["ge"], step(limits["ge"], -1)]
    if "gt" in limits:
        values += [limits["gt"], step(limits["gt"], +1)]
    for upper in ("le", "lt"):
        if upper in limits:
            values.append(step(limits[upper], +1))
            if limits[upper] <= 1:  # a fraction: its bound is cheap to train at
                values.append(limits[upper] if upper == "le" else step(limits[upper], -1))
    if kind is float:
        values += [math.nan, math.inf, -math.inf, -1e308] + ([] if "le" in limits or "lt" in limits else [1e308])
    else:
        values += [2**64, -(2**64)]
    return list(dict.fromkeys(values))


def cases() -> list[Any]:
    found = []
    for algorithm in BASES:
        config_class = type(get_config(algorithm))
        for name, info in config_class.model_fields.items():
            field = numeric_field(info)
            if field is None:
                continue
            for value in boundary_values(field[0], bounds(field[1])):
                found.append(pytest.param(algorithm, {name: value}, id=f"{algorithm}-{name}={value!r}"))
    return found


# The configs a hostile-user sweep found crashing, hanging or training on NaN, and what each must do now.
SPECIAL = [
    ("PPO", {"seed": 2**64}, "config"),
    ("PPO", {"min_time_s_per_iteration": math.inf}, "config"),
    ("DQN", {"training_intensity": 1e6}, "config"),
    ("PPO", {"evaluation_config": {"env": "Pendulum-v1"}}, "build"),
    ("PPO", {"model": {"custom_model": "torch.nn:Linear"}}, "build"),
    ("PPO", {"storage_path": "/dev/null/x"}, "build"),
    ("PPO", {"evaluation_config": {"env_config": {"no_such_argument": 1}}}, "build"),
    ("PPO", {"lr": 1e308}, "training"),
    ("PPO", {"entropy_coeff": 1e308}, "training"),
    ("PPO", {"lr_schedule": [[0, math.nan]]}, "config"),
    ("PPO", {"lr_schedule": [[0, -1.0]]}, "config"),
    ("SAC", {"target_entropy": math.nan}, "config"),
    ("SAC", {"initial_alpha": 1e308}, "training"),
    ("PPO", {"rollout_fragment_length": 1}, "trained"),
    ("DQN", {"replay_buffer_config": {"type": "PrioritizedReplayBuffer", "capacity": 2**31}}, "build"),
    ("PPO", {"train_batch_size": 2**31 - 1}, "build"),
]


def outcome(algorithm: str, values: dict[str, Any]) -> str:
    """'config', 'build' or 'training' for where a CorralError refused ``values``, or 'trained'."""
    config = get_config(algorithm).update_from_dict({**BASES[algorithm], **COMMON})
    try:
        config.update_from_dict(values)
        config.validate()
    except ConfigError:
        return "config"
    try:
        algo = config.build()
    except CorralError:
        return "build"
    try:
        algo.train()
    except (TrainingError, EnvError):
        return "training"
    finally:
        algo.stop()
    return "trained"


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize(("algorithm", "values"), cases())
def test_a_boundary_value_trains_or_is_refused(algorithm, values) -> None:
    assert outcome(algorithm, values) in ("config", "build", "training", "trained")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("algorithm", "values", "expected"), SPECIAL, ids=[f"{a}-{v}" for a, v, _ in SPECIAL])
def test_the_configs_that_used_to_crash(algorithm, values, expected) -> None:
    assert outcome(algorithm, values) == expected


def test_every_integer_option_is_bounded_above() -> None:
    """An integer without an upper bound is how 2**64 reaches numpy and torch."""
    unbounded = [
        f"{algorithm}.{name}"
        for algorithm in ("PPO", "A2C", "DQN", "SAC", "IMPALA")
        for name, info in type(get_config(algorithm)).model_fields.items()
        if (field := numeric_field(info)) is not None
        and field[0] is int
        and not {"le", "lt"} & set(bounds(field[1]))
        # a list of integers bounds each of them
        and not (str(info.annotation).startswith("list[") and "le=" in str(info.annotation))
    ]
    assert unbounded == []
