"""The policy server's wire protocol: JSON of numbers and arrays, every field checked before anything is used."""

from __future__ import annotations

import json
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from corral.integrations.serving.protocol import (
    GET_ACTION,
    LOG_RETURNS,
    ProtocolError,
    check_space_supported,
    decode_request,
    encode,
    space_value,
)

CARTPOLE = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
NESTED = gym.spaces.Dict(
    {
        "position": gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32),
        "choice": gym.spaces.Discrete(3, start=1),
        "parts": gym.spaces.Tuple((gym.spaces.MultiDiscrete([2, 5]), gym.spaces.MultiBinary(3))),
    }
)


def _request(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def test_a_request_and_the_values_of_each_kind_of_space_travel_as_json_and_come_back_equal() -> None:
    space = NESTED
    space.seed(0)
    value = space.sample()
    body = encode({"command": GET_ACTION, "episode_id": "ep-1", "observation": value})
    request = decode_request(body)
    assert request.command == GET_ACTION and request.fields["episode_id"] == "ep-1"
    back = space_value(request.fields["observation"], space, "the observation")
    assert space.contains(back)
    assert np.array_equal(back["position"], value["position"]) and back["choice"] == value["choice"]
    assert all(np.array_equal(a, b) for a, b in zip(back["parts"], value["parts"], strict=True))
    assert back["position"].dtype == np.float32 and back["parts"][1].dtype == np.int8


MALFORMED: list[tuple[str, bytes, int, str]] = [
    ("pickle bytes", pickle.dumps({"command": GET_ACTION}), 400, "not UTF-8 JSON"),
    ("truncated JSON", b'{"command": "GET_ACTION", "episode_id": "a"', 400, "not valid JSON"),
    ("a NaN", b'{"command": "LOG_RETURNS", "episode_id": "a", "reward": NaN}', 400, "NaN is not a number"),
    ("an Infinity", b'{"command": "LOG_RETURNS", "episode_id": "a", "reward": -Infinity}', 400, "-Infinity is not"),
    ("a huge body", b" " * (1 << 20) + b"{}", 413, "at most 1,048,576"),
    ("not an object", b'["GET_ACTION"]', 400, "must be a JSON object, not list"),
    ("no command", _request(episode_id="a"), 400, "unknown command None"),
    ("an unknown command", _request(command="EXEC", code="rm -rf /"), 400, "unknown command 'EXEC'"),
    ("a missing field", _request(command=GET_ACTION, episode_id="a"), 400, r"missing \['observation'\]"),
    ("an unknown field", _request(command=LOG_RETURNS, episode_id="a", reward=1.0, done=True), 400, r"unknown \['done'\]"),
    ("an episode id with a slash", _request(command=GET_ACTION, episode_id="../a", observation=[0] * 4), 400, "episode_id"),
    ("a reward as a string", _request(command=LOG_RETURNS, episode_id="a", reward="1.0"), 400, "finite number"),
    ("a reward as a flag", _request(command=LOG_RETURNS, episode_id="a", reward=True), 400, "finite number"),
    ("an info that is a list", _request(command=LOG_RETURNS, episode_id="a", reward=1, info=[1]), 400, "info must"),
    ("a flag that is a string", _request(command="START_EPISODE", training_enabled="yes"), 400, "true or false"),
    (
        "a probability over 1",
        _request(command="LOG_ACTION", episode_id="a", observation=[0] * 4, action=1, action_prob=2),
        400,
        "action_prob",
    ),
    (
        "deep nesting",
        b'{"command": "GET_ACTION", "episode_id": "a", "observation": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        400,
        "nests too deeply|not valid JSON",
    ),
]


@pytest.mark.parametrize(("body", "status", "reason"), [case[1:] for case in MALFORMED], ids=[case[0] for case in MALFORMED])
def test_a_malformed_request_is_refused_with_a_4xx_that_says_why(body: bytes, status: int, reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason) as refused:
        decode_request(body)
    assert refused.value.status == status


WRONG_VALUES: list[tuple[str, Any, gym.Space[Any], str]] = [
    ("a short observation", [0.0, 1.0, 2.0], CARTPOLE, r"shape \(3,\); its space's is \(4,\)"),
    ("a ragged observation", [[0.0, 1.0], [2.0]], gym.spaces.Box(-1, 1, (2, 2)), "finite numbers only"),
    ("strings", ["a", "b", "c", "d"], CARTPOLE, "finite numbers only"),
    ("a scalar for a vector", 0.5, CARTPOLE, r"shape \(\); its space's is \(4,\)"),
    ("out of bounds", [[0.0, 0.0], [0.0, 2.0]], gym.spaces.Box(-1, 1, (2, 2)), "outside its space"),
    ("a fraction for a choice", 1.5, gym.spaces.Discrete(3), r"an integer in \[0, 3\)"),
    ("a choice out of range", 3, gym.spaces.Discrete(3), r"an integer in \[0, 3\)"),
    ("a fraction in a MultiDiscrete", [1, 0.5], gym.spaces.MultiDiscrete([2, 2]), "integers only"),
    ("a missing key", {"choice": 1}, NESTED, r"the keys \['choice', 'parts', 'position'\]"),
    ("a short tuple", [[0, 1]], NESTED["parts"], "a list of 2 values"),
]


@pytest.mark.parametrize(
    ("value", "space", "reason"), [case[1:] for case in WRONG_VALUES], ids=[case[0] for case in WRONG_VALUES]
)
def test_a_value_that_does_not_fit_its_space_is_refused_naming_what_is_wrong(
    value: Any, space: gym.Space[Any], reason: str
) -> None:
    with pytest.raises(ProtocolError, match=reason) as refused:
        space_value(value, space, "GET_ACTION's observation")
    assert refused.value.status == 400 and "GET_ACTION's observation" in str(refused.value)


def test_a_space_without_a_json_form_is_refused_before_a_server_starts() -> None:
    check_space_supported(NESTED, "the observation space")
    with pytest.raises(ProtocolError, match=r"the observation space\['text'\] is a Text"):
        check_space_supported(gym.spaces.Dict({"text": gym.spaces.Text(5)}), "the observation space")


def test_what_the_server_sends_is_never_a_nan() -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        encode({"action": np.array([np.nan])})
