"""Tuple and Dict action spaces, as RLlib takes them: one flat action per row to the policy, the structure to the env.

RLlib's ``nested_action_spaces.py`` and ``autoregressive_action_dist.py``
examples, written here: a policy acts in a nested Dict of Discrete,
MultiDiscrete and Box parts, and a custom distribution samples a tuple
``(a1, a2)`` whose second part depends on the first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import corral
from corral import ConfigError
from corral.core import ModelCatalog, TorchCategorical, TorchDistributionWrapper, TorchModelV2
from corral.core.common.actions import ActionAdapter
from corral.core.common.spaces import stack_observations
from corral.plugins.dqn import DQNConfig
from corral.plugins.ppo import PPOConfig
from tests.conftest import SMALL_PPO, best_return_within

NESTED = gym.spaces.Dict(
    {
        "a": gym.spaces.Tuple([gym.spaces.Dict({"d": gym.spaces.Box(-10.0, 10.0, ()), "e": gym.spaces.Discrete(3)})]),
        "b": gym.spaces.Box(-10.0, 10.0, (2,)),
        "c": gym.spaces.MultiDiscrete([3, 3]),
        "d": gym.spaces.Discrete(2, start=5),
    }
)
"""the space of RLlib's nested-action example, with a Discrete that starts at 5"""


class RepeatStructure(gym.Env):
    """The observation is a sample of :data:`NESTED`; repeating it earns 1 per matching discrete value, minus a tenth of
    each Box part's distance. Episodes of 20 steps."""

    def __init__(self, config: Any = None) -> None:
        self.observation_space = self.action_space = NESTED
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.t = 0
        self.obs = self.observation_space.sample()
        return self.obs, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        inner = {**action["a"][0], "d": np.asarray(action["a"][0]["d"])}  # a vector env hands a scalar Box out as a scalar
        if not self.action_space.contains({**action, "a": (inner,)}):
            raise ValueError(f"{action!r} is outside {self.action_space}")
        seen, self.t = self.obs, self.t + 1
        reward = (
            float(inner["e"] == seen["a"][0]["e"]) + float(action["d"] == seen["d"]) + float(np.sum(action["c"] == seen["c"]))
        )
        reward -= (abs(float(inner["d"]) - float(seen["a"][0]["d"])) + float(np.abs(action["b"] - seen["b"]).sum())) / 10
        self.obs = self.observation_space.sample()
        return self.obs, reward, False, self.t >= 20, {}


def test_the_policy_acts_in_one_flat_vector_whose_columns_are_the_leaves_in_the_space_s_order() -> None:
    adapter = ActionAdapter(NESTED, normalize_actions=True, clip_actions=False)
    assert [(path, (s.start, s.stop)) for path, _, s in adapter.leaves] == [
        ("['a'][0]['d']", (0, 1)),
        ("['a'][0]['e']", (1, 2)),
        ("['b']", (2, 4)),
        ("['c']", (4, 6)),
        ("['d']", (6, 7)),
    ]
    assert adapter.policy_space == gym.spaces.Box(
        np.array([-1, 0, -1, -1, 0, 0, 0], np.float32), np.array([1, 2, 1, 1, 2, 2, 1], np.float32)
    ), "Box leaves in [-1, 1] (normalize_actions), a Discrete leaf its index, a MultiDiscrete leaf one per component"
    flat = np.array([[1.0, 2.0, -1.0, 0.0, 1.0, 2.0, 1.0], [-1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]], np.float32)
    batch = adapter(flat)
    np.testing.assert_allclose(batch["a"][0]["d"], [10.0, -10.0])
    np.testing.assert_array_equal(batch["a"][0]["e"], [2, 0])
    np.testing.assert_allclose(batch["b"], [[-10.0, 0.0], [10.0, 10.0]])
    np.testing.assert_array_equal(batch["c"], [[1, 2], [0, 0]])
    np.testing.assert_array_equal(batch["d"], [6, 5]), "a Discrete starting at 5 gets its start back"
    rows = adapter.rows(batch)
    assert rows[0]["d"] == 6 and type(rows[0]["d"]) is int and isinstance(rows[0]["a"], tuple)
    assert all(NESTED.contains(row) for row in rows)


def test_a_tuple_or_dict_with_a_part_the_policy_cannot_act_in_is_refused_naming_the_part() -> None:
    space = gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Dict({"text": gym.spaces.Text(5)})])
    with pytest.raises(corral.EnvError, match=r"\[1\]\['text'\].*Discrete, MultiDiscrete, Box"):
        PPOConfig().environment(_with_actions(space)).build()
    with pytest.raises(ConfigError, match="Tuple"):
        DQNConfig().environment(_with_actions(gym.spaces.Tuple([gym.spaces.Discrete(2)]))).build()


def _with_actions(space: gym.Space[Any]) -> type[gym.Env]:
    class Env(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = space

        def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
            return np.zeros(2, np.float32), {}

        def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
            return np.zeros(2, np.float32), 0.0, False, True, {}

    return Env


@pytest.mark.slow
def test_ppo_learns_to_repeat_a_nested_dict_of_discrete_multidiscrete_and_box_parts() -> None:
    # RLlib's nested_action_spaces.py settings: a bandit (gamma 0), 20 envs, lr 5e-4, 4 epochs
    algo = (
        PPOConfig()
        .environment(RepeatStructure)
        .env_runners(num_envs_per_env_runner=20)
        .training(gamma=0.0, lr=5e-4, num_epochs=4, entropy_coeff=5e-5, vf_loss_coeff=0.01)
        .debugging(seed=0)
        .build()
    )
    try:
        first = algo.train()["episode_reward_mean"]
        best, steps = best_return_within(algo, 60_000, 35.0)
        # acting at random earns about -10 an episode; repeating everything, 100
        assert first < 10.0 and best >= 35.0, f"mean return {first:.1f} at first, {best:.1f} after {steps} steps"
    finally:
        algo.stop()


def test_single_actions_batches_and_agents_come_back_as_structures_and_a_checkpoint_acts_the_same(tmp_path: Path) -> None:
    algo = PPOConfig().environment(RepeatStructure).training(**SMALL_PPO).debugging(seed=0).build()
    try:
        algo.train()
        obs = [NESTED.sample() for _ in range(3)]
        single = algo.compute_single_action(obs[0], explore=False)
        assert isinstance(single, dict) and isinstance(single["a"], tuple) and type(single["d"]) is int
        batch = algo.compute_actions(stack_observations(obs), explore=False)  # a Dict observation's batch: its parts
        assert batch["d"].shape == (3,) and batch["b"].shape == (3, 2) and batch["a"][0]["e"].shape == (3,)
        assert _same(ActionAdapter(NESTED, True, False).rows(batch)[0], single)
        path = algo.save(str(tmp_path / "checkpoint"))
        restored = corral.Algorithm.from_checkpoint(path, env=RepeatStructure)
        try:
            for o in obs:
                assert _same(restored.compute_single_action(o, explore=False), algo.compute_single_action(o, explore=False))
        finally:
            restored.stop()
    finally:
        algo.stop()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(np.array_equal(a, b))


# --------------------------------------------------------------------------- #
# RLlib's autoregressive action distribution, written here in its style
# --------------------------------------------------------------------------- #
class MatchPair(gym.Env):
    """Observe a bit; choose ``(a1, a2)``: 1 for ``a1`` equal to the bit, 1 for ``a2`` equal to ``a1``. 10 steps."""

    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Discrete(2)])

    def __init__(self, config: Any = None) -> None:
        self.t, self.bit = 0, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self.t, self.bit = 0, int(self.np_random.integers(2))
        return self.bit, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        a1, a2 = action
        reward = float(a1 == self.bit) + float(a2 == a1)
        self.t, self.bit = self.t + 1, int(self.np_random.integers(2))
        return self.bit, reward, False, self.t >= 10, {}


class PairModel(TorchModelV2, nn.Module):
    """A context from the observation, a value head, and ``action_module(context, a1)``: both parts' logits."""

    def __init__(self, obs_space: Any, action_space: Any, num_outputs: int, model_config: dict, name: str) -> None:
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        assert isinstance(action_space, gym.spaces.Tuple), "the model is told of the Tuple, as RLlib's are"
        self.context = nn.Sequential(nn.Linear(2, num_outputs), nn.Tanh())
        self.value = nn.Linear(num_outputs, 1)
        self.a1_logits = nn.Linear(num_outputs, 2)
        self.a2_logits = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 2))
        self._context: torch.Tensor | None = None

    def forward(self, input_dict: dict, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
        self._context = self.context(input_dict["obs"].float())
        return self._context, state

    def value_function(self) -> torch.Tensor:
        assert self._context is not None
        return self.value(self._context).squeeze(-1)

    def action_module(self, context: torch.Tensor, a1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.a1_logits(context), self.a2_logits(a1)


class PairDistribution(TorchDistributionWrapper):
    """P(a1, a2) = P(a1) P(a2 | a1): ``sample`` returns the tuple ``(a1, a2)``, ``logp`` reads ``actions[:, 0]``, ``[:, 1]``."""

    def _a1(self) -> TorchCategorical:
        return TorchCategorical(self.model.action_module(self.inputs, torch.zeros(len(self.inputs), 1))[0])

    def _a2(self, a1: torch.Tensor) -> TorchCategorical:
        return TorchCategorical(self.model.action_module(self.inputs, a1.float().unsqueeze(1))[1])

    def sample(self) -> tuple[torch.Tensor, torch.Tensor]:
        a1 = self._a1().sample()
        return a1, self._a2(a1).sample()

    def deterministic_sample(self) -> tuple[torch.Tensor, torch.Tensor]:
        a1 = self._a1().deterministic_sample()
        return a1, self._a2(a1).deterministic_sample()

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        a1, a2 = actions[:, 0], actions[:, 1]
        return self._a1().logp(a1) + self._a2(a1).logp(a2)

    def entropy(self) -> torch.Tensor:
        first = self._a1()
        return first.entropy() + self._a2(first.sample()).entropy()

    def kl(self, other: Any) -> torch.Tensor:
        first = self._a1()
        a1 = first.sample()
        return first.kl(other._a1()) + self._a2(a1).kl(other._a2(a1))

    @staticmethod
    def required_model_output_shape(action_space: gym.Space[Any], model_config: dict[str, Any]) -> int:
        return 16


@pytest.fixture
def pair() -> PPOConfig:
    ModelCatalog.register_custom_model("pair_model", PairModel)
    ModelCatalog.register_custom_action_dist("pair_distribution", PairDistribution)
    model = {"custom_model": "pair_model", "custom_action_dist": "pair_distribution"}
    return PPOConfig().environment(MatchPair).training(model=model).debugging(seed=0)


def test_an_autoregressive_distribution_s_tuple_sample_is_stored_flat_and_its_logp_reads_the_columns(pair: PPOConfig) -> None:
    algo = pair.training(**SMALL_PPO).build()
    try:
        result = algo.train()
        assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
        action, _, extras = algo.compute_single_action(1, full_fetch=True)
        assert isinstance(action, tuple) and all(type(a) is int for a in action)
        agents = algo.compute_actions({"x": 0, "y": 1})
        assert all(isinstance(a, tuple) and MatchPair.action_space.contains(a) for a in agents.values())
        policy = algo.get_policy()
        inputs = torch.as_tensor(extras["action_dist_inputs"])[None]
        with torch.no_grad():
            expected = PairDistribution(inputs, policy.model).logp(torch.tensor([action], dtype=torch.float32))
        assert np.isclose(extras["action_logp"], float(expected), atol=1e-6), "the logp recorded is the distribution's"
    finally:
        algo.stop()


@pytest.mark.slow
def test_ppo_learns_correlated_actions_with_the_autoregressive_distribution(pair: PPOConfig) -> None:
    algo = pair.training(gamma=0.5).build()  # RLlib's example's gamma
    try:
        best, steps = best_return_within(algo, 32_000, 19.0)
        assert best >= 19.0, f"mean return {best:.1f} of 20 (10 at random) after {steps} steps"
        for bit in (0, 1):
            assert algo.compute_single_action(bit, explore=False) == (bit, bit)
    finally:
        algo.stop()


def test_an_exported_policy_writes_the_leaves_side_by_side_in_the_env_s_units_and_says_which_columns(tmp_path: Path) -> None:
    algo = PPOConfig().environment(RepeatStructure).training(**SMALL_PPO).debugging(seed=0).build()
    try:
        algo.train()
        algo.export_policy_model(str(tmp_path))
        description = json.loads((tmp_path / "model.json").read_text())
        layout = {leaf["path"]: leaf["columns"] for leaf in description["action_layout"]}
        assert layout == {"['a'][0]['d']": [0, 1], "['a'][0]['e']": [1, 2], "['b']": [2, 4], "['c']": [4, 6], "['d']": [6, 7]}
        module = torch.jit.load(str(tmp_path / "model.pt"))
        obs = NESTED.sample()
        names = [entry["name"] for entry in description["inputs"]]
        leaves = {
            "obs.a.0.d": obs["a"][0]["d"],
            "obs.a.0.e": obs["a"][0]["e"],
            "obs.b": obs["b"],
            "obs.c": obs["c"],
            "obs.d": obs["d"],
        }
        actions = module(*(torch.as_tensor(np.asarray(leaves[name]))[None] for name in names))[0][0].numpy()
        expected = algo.compute_single_action(obs, explore=False)
        np.testing.assert_allclose(actions[0], expected["a"][0]["d"], rtol=1e-5)
        np.testing.assert_allclose(actions[2:4], expected["b"], rtol=1e-5)
        assert [int(actions[1]), *actions[4:6].astype(int), int(actions[6])] == [
            expected["a"][0]["e"],
            *expected["c"],
            expected["d"],
        ]
    finally:
        algo.stop()


def test_offline_output_stores_the_flat_actions_and_behaviour_cloning_trains_on_them(tmp_path: Path) -> None:
    from corral.plugins.marwil import BCConfig

    out = tmp_path / "data"
    algo = PPOConfig().environment(MatchPair).training(**SMALL_PPO).offline_data(output=str(out)).debugging(seed=0).build()
    try:
        algo.train()
    finally:
        algo.stop()
    import pyarrow.parquet as pq

    actions = np.stack(pq.read_table(str(out)).column("actions").to_pylist())
    assert actions.shape[1:] == (2,) and set(np.unique(actions)) <= {0.0, 1.0}, "(a1, a2) side by side, as RLlib stores them"
    bc = BCConfig().environment(MatchPair).offline_data(input_=str(out)).training(train_batch_size=128).debugging(seed=0).build()
    try:
        result = bc.train()
        assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["policy_loss"])
        action = bc.compute_single_action(1, explore=False)
        assert isinstance(action, tuple) and MatchPair.action_space.contains(action)
    finally:
        bc.stop()


def test_agents_of_a_multi_agent_env_act_in_tuple_and_dict_spaces() -> None:
    from corral.testing.envs import DictActionEnv, TupleActionEnv

    for env in (TupleActionEnv, DictActionEnv):  # each checks every action it gets is a structure in its space
        algo = (
            PPOConfig()
            .environment(corral.make_multi_agent(env), env_config={"num_agents": 2})
            .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent, *args, **kwargs: f"p{agent}")
            .training(**SMALL_PPO)
            .debugging(seed=0)
            .build()
        )
        try:
            assert algo.train()["num_env_steps_sampled"] >= 256
        finally:
            algo.stop()
