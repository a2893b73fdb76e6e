"""Spaces as JSON, and PolicySpec in every form a multi-agent config gives it, round-tripping exactly."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import corral
from corral.core.common.space_codec import decode_space, encode_space
from corral.plugins.ppo import PPOPolicy

SPACES = [
    gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
    gym.spaces.Box(np.array([-1.0, 0.0]), np.array([1.0, 2.5]), dtype=np.float64),
    gym.spaces.Box(0, 255, (4, 4, 3), np.uint8),
    gym.spaces.Discrete(5, start=-2),
    gym.spaces.MultiDiscrete([3, 4, 2]),
    gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 5]]), start=np.array([[1, 0], [0, -1]])),
    gym.spaces.MultiBinary(6),
    gym.spaces.MultiBinary([2, 3]),
    gym.spaces.Dict({"observation": gym.spaces.Box(0.0, 1.0, (9,), np.float32), "action_mask": gym.spaces.MultiBinary(9)}),
    gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Dict({"x": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}))),
]


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_every_space_comes_back_equal_through_json(space: gym.Space) -> None:
    back = decode_space(json.loads(json.dumps(encode_space(space), allow_nan=False)))
    assert back == space
    if isinstance(space, gym.spaces.Box):
        assert back.dtype == space.dtype and np.array_equal(back.low, space.low) and np.array_equal(back.high, space.high)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"type": "Graph"}, "has the space type 'Graph'; known: Box"),
        ([1, 2], r"is not an encoded space \(a dict with a 'type'\)"),
        ({"type": "Discrete", "n": "5"}, "is not a valid Discrete space: '5' is not an integer"),
        ({"type": "Box", "low": [0.0], "high": [1.0]}, "is not a valid Box space: KeyError"),
        ({"type": "Dict", "spaces": {"a": {"type": "Discrete", "n": True}}}, r"space\.a is not a valid Discrete space"),
    ],
)
def test_a_malformed_space_is_refused_naming_where_it_is(data: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        decode_space(data)


def test_a_space_without_a_json_form_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"cannot write the space .*Text"):
        encode_space(gym.spaces.Text(5))


def test_a_policy_spec_from_none_a_tuple_a_dict_or_itself() -> None:
    box, discrete = gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2)
    full = corral.PolicySpec(PPOPolicy, box, discrete, {"lr": 1e-4})
    assert corral.PolicySpec.of(None) == corral.PolicySpec()
    assert corral.PolicySpec.of(full) is full
    assert corral.PolicySpec.of((PPOPolicy, box, discrete, {"lr": 1e-4})) == full
    assert corral.PolicySpec.of([None, box]) == corral.PolicySpec(observation_space=box)
    assert corral.PolicySpec.of(json.loads(json.dumps(full.to_dict()))) == full
    assert full.to_dict()["policy_class"] == "corral.plugins.ppo.policy:PPOPolicy"
    assert corral.PolicySpec.of({"policy_class": "corral.plugins.ppo.policy:PPOPolicy"}).policy_class is PPOPolicy


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (42, "a policy is a PolicySpec, None, a .* tuple or a dict with those keys, not int"),
        ((None, None, None, None, None), "got 5 items"),
        ({"policy_cls": None}, r"unknown keys \['policy_cls'\]"),
        ((None, "Box(4)"), "observation_space must be a gymnasium space or None, not str"),
        ((None, None, None, [("lr", 1)]), "config must be a dict of options, an AlgorithmConfig or None, not list"),
        ((dict,), "policy_class must be a corral Policy subclass"),
    ],
)
def test_a_bad_policy_spec_says_what_is_wrong(value: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        corral.PolicySpec.of(value)
