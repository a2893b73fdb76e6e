"""RLlib's Repeated space: lists of up to max_len items, flattened as RLlib writes them, read back as RepeatedValues."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import corral
from corral.core.common.preprocessors import RepeatedValuesPreprocessor, get_preprocessor
from corral.core.common.repeated import Repeated, RepeatedValues
from corral.core.common.space_codec import decode_space, encode_space
from corral.core.networks.catalog import ModelCatalog
from corral.core.networks.model_v2 import TorchModelV2, model_v2_obs_space, restore_original_dimensions
from corral.errors import EnvError

PLAYER = gym.spaces.Dict(
    {
        "location": gym.spaces.Box(-100, 100, (2,)),
        "items": Repeated(gym.spaces.Discrete(5), max_len=3),
    }
)
PLAYERS = Repeated(PLAYER, max_len=2)
"""a list of players, each holding a list of items: RLlib's SimpleRPG example, smaller"""


def player(x: float, items: list[int]) -> dict[str, Any]:
    return {"location": np.array([x, -x], np.float32), "items": items}


def test_a_list_is_its_length_then_its_items_then_zeros_as_rllib_writes_it() -> None:
    space = Repeated(gym.spaces.Box(-10, 10, (3,)), max_len=4)
    preprocessor = get_preprocessor(space)(space)
    assert preprocessor.shape == (1 + 4 * 3,)
    row = preprocessor.transform([np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)])
    np.testing.assert_array_equal(row, [2, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(preprocessor.transform([]), np.zeros(13))
    assert get_preprocessor(space) is RepeatedValuesPreprocessor


def test_a_list_longer_than_max_len_is_refused_by_name() -> None:
    space = Repeated(gym.spaces.Discrete(2), max_len=2)
    with pytest.raises(EnvError, match=r"list of 3 items, more than Repeated\(Discrete\(2\), 2\)'s max_len of 2"):
        get_preprocessor(space)(space).transform([0, 1, 1])


def test_a_model_reads_padded_items_and_lengths_and_unbatches_them_to_the_lists() -> None:
    observations = [[player(1.0, [4]), player(2.0, [0, 3])], [player(3.0, [])]]
    preprocessor = get_preprocessor(PLAYERS)(PLAYERS)
    flat = torch.from_numpy(np.stack([preprocessor.transform(o) for o in observations]))

    restored = restore_original_dimensions(flat, model_v2_obs_space(PLAYERS))

    assert isinstance(restored, RepeatedValues) and restored.max_len == 2
    assert restored.lengths.tolist() == [2, 1]
    assert restored.values["location"].shape == (2, 2, 2)  # [B, players, 2]
    items = restored.values["items"]
    assert isinstance(items, RepeatedValues) and items.values.shape == (2, 2, 3, 5)  # [B, players, items, one-hot]
    assert items.lengths.tolist() == [[1, 2], [0, 0]]  # the padded second player of row 1 holds nothing
    positions = restored.unbatch_repeat_dim()
    assert len(positions) == 2 and positions[1]["location"].tolist() == [[2.0, -2.0], [0.0, 0.0]]
    unbatched = restored.unbatch_all()
    assert [len(row) for row in unbatched] == [2, 1]
    for row, original in zip(unbatched, observations, strict=True):
        for read, written in zip(row, original, strict=True):
            assert read["location"].tolist() == written["location"].tolist()
            assert [int(one_hot.argmax()) for one_hot in read["items"]] == written["items"]


def test_the_space_samples_lists_of_one_to_max_len_items_reproducibly_and_round_trips_as_json() -> None:
    first, second = (Repeated(copy.deepcopy(PLAYER), 2, seed=3) for _ in range(2))
    samples = [first.sample() for _ in range(20)]
    assert {len(s) for s in samples} == {1, 2}  # RLlib draws 1 to max_len items
    assert all(first.contains(s) for s in samples)
    assert str(samples) == str([second.sample() for _ in range(20)])  # the child space is seeded too
    assert not first.contains([PLAYER.sample()] * 3) and not first.contains("not a list")
    assert decode_space(encode_space(PLAYERS)) == PLAYERS
    with pytest.raises(ValueError, match=r"max_len is the most items a list holds, at least 1; got 0"):
        Repeated(gym.spaces.Discrete(2), 0)


class ListEnv(gym.Env):
    """Observes a list of players; the episode ends after one step."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.observation_space, self.action_space = PLAYERS, gym.spaces.Discrete(2)
        self.emitted: list[Any] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self.observation_space.seed(seed)
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return self.observation_space.sample(), float(action), True, False, {}


class CountingPlayers(TorchModelV2, torch.nn.Module):
    """Logits from how many players each observation lists: it reads the RepeatedValues' lengths."""

    def __init__(self, obs_space: Any, action_space: Any, num_outputs: int, model_config: dict[str, Any], name: str) -> None:
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        torch.nn.Module.__init__(self)
        self.weight = torch.nn.Parameter(torch.ones(num_outputs))

    def forward(self, input_dict: dict[str, Any], state: list[Any], seq_lens: Any) -> tuple[torch.Tensor, list[Any]]:
        players = input_dict["obs"]
        self._value = players.lengths * 0.0 + self.weight.sum()
        return players.lengths[:, None] * self.weight, state

    def value_function(self) -> torch.Tensor:
        return self._value


def test_ppo_trains_on_lists_and_a_custom_model_reads_them_as_repeated_values(make_algo) -> None:
    ModelCatalog.register_custom_model("counting_players", CountingPlayers)
    config = (
        corral.get_config("PPO")
        .environment(ListEnv)
        .update_from_dict(
            {
                "num_envs_per_env_runner": 2,
                "train_batch_size": 8,
                "minibatch_size": 4,
                "model": {"custom_model": "counting_players"},
            }
        )
    )
    algo = make_algo(config)
    assert algo.train()["num_env_steps_trained"] == 8
    (weight,) = [w for w in algo.get_weights()["default_policy"].values() if w.shape == (2,)]
    for players in ([player(1.0, [2]), player(-1.0, [])], [player(5.0, [0, 1, 2])]):
        _, _, extras = algo.compute_single_action(players, explore=False, full_fetch=True)
        np.testing.assert_allclose(extras["action_dist_inputs"], len(players) * weight, rtol=1e-6)
