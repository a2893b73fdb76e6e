"""Environments mid-episode: saved as JSON, brought back to the same point, by replay or by attributes."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from corral.core.common import state_codec
from corral.core.environments import sub_environment_guard
from corral.core.environments.env_state import get_env_state, set_env_state
from corral.core.environments.envs import make_vector_env
from corral.plugins.sac import SACConfig


def test_arrays_and_tensors_come_back_bit_for_bit() -> None:
    values = {
        "f32": np.array([np.nan, -0.0, 1e-45, 3.4e38], dtype=np.float32),
        "i64": np.arange(6, dtype=np.int64).reshape(2, 3),
        "flags": np.array([True, False]),
        "scalar": np.float64(0.1),
        "zero_d": np.array(-10.0, dtype=np.float32),
        "tensor": torch.tensor([1, 255], dtype=torch.uint8),
        "nested": [(1, "a"), {"x": None}],
    }
    back = state_codec.decode(json.loads(json.dumps(state_codec.encode(values))))
    for key in ("f32", "i64", "flags"):
        assert back[key].dtype == values[key].dtype and back[key].tobytes() == values[key].tobytes()
    assert back["zero_d"].shape == () and back["scalar"].shape == (), "a scalar Box's bound keeps its shape"
    assert back["scalar"] == 0.1 and isinstance(back["tensor"], torch.Tensor) and back["tensor"].tolist() == [1, 255]
    assert back["nested"] == [(1, "a"), {"x": None}]  # a tuple stays a tuple (a Tuple space's observation)


def test_objects_are_neither_written_nor_read() -> None:
    with pytest.raises(TypeError, match="dtype object"):
        state_codec.encode(np.array([object()]))
    with pytest.raises(ValueError, match="only numbers"):
        state_codec.decode({"__ndarray__": {"dtype": "|O", "shape": [1], "base64": "AAAAAAAAAAA="}})
    with pytest.raises(ValueError, match="bytes"):
        state_codec.decode({"__ndarray__": {"dtype": "<f4", "shape": [1000], "base64": "AAAAAA=="}})


def pendulum_config(**values):
    return SACConfig().environment("Pendulum-v1").update_from_dict(values)


def step_both(a, b, actions):
    for action in actions:
        out_a, out_b = a.step(action), b.step(action)
        np.testing.assert_array_equal(out_a[0], out_b[0])
        np.testing.assert_array_equal(out_a[1], out_b[1])


def test_sub_environments_stepped_in_a_loop_are_replayed_to_the_same_point() -> None:
    config = pendulum_config(num_envs_per_env_runner=2)
    original = make_vector_env(config, 2)
    original.reset(seed=7)
    rng = np.random.default_rng(0)
    actions = [rng.uniform(-2, 2, (2, 1)).astype(np.float32) for _ in range(30)]
    for action in actions[:20]:
        original.step(action)
    state = json.loads(json.dumps(get_env_state(original)))
    assert state["kind"] == "replay" and len(state["sub_envs"]) == 2

    copy = make_vector_env(config, 2)
    set_env_state(copy, state, autoreset=np.zeros(2, dtype=bool))
    step_both(original, copy, actions[20:])


def test_a_natively_vectorised_env_is_restored_by_its_attributes() -> None:
    config = SACConfig().environment("CartPole-v1")
    original = make_vector_env(config, 4)
    original.reset(seed=3)
    actions = [np.array([0, 1, 1, 0]) for _ in range(15)]
    for action in actions[:10]:
        original.step(action)
    state = json.loads(json.dumps(get_env_state(original)))
    assert state["kind"] == "attributes" and "state" in state["values"] and "_np_random" in state["values"]

    copy = make_vector_env(config, 4)
    set_env_state(copy, state, autoreset=np.zeros(4, dtype=bool))
    step_both(original, copy, actions[10:] * 5)  # through episode ends and resets, drawn from the restored np_random


def test_an_episode_too_long_to_record_starts_anew_after_a_restore(monkeypatch, caplog) -> None:
    monkeypatch.setattr(sub_environment_guard, "MAX_REPLAY_STEPS", 5)
    config = pendulum_config(num_envs_per_env_runner=1)
    original = make_vector_env(config, 1)
    original.reset(seed=1)
    for _ in range(8):
        original.step(np.zeros((1, 1), dtype=np.float32))
    state = get_env_state(original)
    assert state["sub_envs"] == [None]
    copy = make_vector_env(config, 1)
    with caplog.at_level(logging.WARNING, logger="corral"):
        set_env_state(copy, state, autoreset=np.zeros(1, dtype=bool))
    assert "starts anew" in caplog.text
    copy.step(np.zeros((1, 1), dtype=np.float32))


def test_a_state_for_another_env_is_refused() -> None:
    cartpole = make_vector_env(SACConfig().environment("CartPole-v1"), 2)
    cartpole.reset(seed=0)
    state = get_env_state(cartpole)
    with pytest.raises(ValueError, match="replays"):
        set_env_state(make_vector_env(pendulum_config(), 3), {"kind": "replay", "sub_envs": [None]}, np.zeros(3, dtype=bool))
    state["values"]["state"] = {"array": state_codec.encode(np.zeros((4, 3), dtype=np.float32))}
    with pytest.raises(ValueError, match="shape"):
        set_env_state(make_vector_env(SACConfig().environment("CartPole-v1"), 2), state, np.zeros(2, dtype=bool))
