"""RLlib's ModelV2 as a custom model: written as RLlib's docs write it, registered by name, run by corral's algorithms.

The model here is what an RLlib user has: ``TorchModelV2`` and ``nn.Module``,
``forward(input_dict, state, seq_lens)`` keeping its features for
``value_function()`` through a ``_value_branch``, registered with
``ModelCatalog.register_custom_model``. Only the import of ``TorchModelV2``
and ``ModelCatalog`` changes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from corral import ConfigError
from corral.core import (
    FullyConnectedNetwork,
    ModelCatalog,
    SampleBatch,
    TorchFC,
    TorchModelV2,
    restore_original_dimensions,
)
from corral.plugins.dqn import DQNConfig
from corral.plugins.impala import IMPALAConfig
from corral.plugins.ppo import PPOConfig
from tests.conftest import SMALL_PPO

ROOT = Path(__file__).resolve().parents[2]
NAME = "rllib_style_mlp"

SEEN: list[dict[str, Any]] = []
"""what the last RLlibStyleModel built was given: its obs_space, then each forward's input_dict"""


class RLlibStyleModel(TorchModelV2, nn.Module):
    """A small MLP with a value branch, written as RLlib's custom-model docs write one."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, hidden=64):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        SEEN.clear()
        SEEN.append({"obs_space": obs_space, "num_outputs": num_outputs, "name": name, "hidden": hidden})
        inputs = int(np.prod(obs_space.shape))
        self.body = nn.Sequential(nn.Linear(inputs, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.logits = nn.Linear(hidden, num_outputs)
        self._value_branch = nn.Linear(hidden, 1)
        self._features = None

    def forward(self, input_dict, state, seq_lens):
        SEEN.append(input_dict)
        self._features = self.body(input_dict["obs_flat"].float())
        return self.logits(self._features), state

    def value_function(self):
        assert self._features is not None, "must call forward() first"
        return torch.reshape(self._value_branch(self._features), [-1])


@pytest.fixture(autouse=True)
def registered() -> None:
    ModelCatalog.register_custom_model(NAME, RLlibStyleModel)


def ppo(env: str = "CartPole-v1", **training: Any) -> PPOConfig:
    model = {"custom_model": NAME, "custom_model_config": {"hidden": 32}}
    return PPOConfig().environment(env).training(**{"model": model, **SMALL_PPO, **training}).debugging(seed=0)


def test_a_registered_model_v2_is_the_policy_s_model_as_rllib_s_accessing_model_state_shows() -> None:
    algo = ppo().build()
    try:
        policy = algo.get_policy()
        assert isinstance(policy.model, RLlibStyleModel) and SEEN[0]["hidden"] == 32 and SEEN[0]["name"]
        assert SEEN[0]["num_outputs"] == 2 and SEEN[0]["obs_space"].shape == (4,)
        obs = torch.from_numpy(np.array([[0.1, 0.2, 0.3, 0.4]], np.float32))
        logits, state = policy.model({"obs": obs})
        assert logits.shape == (1, 2) and state == []
        assert policy.model.value_function().shape == (1,)
        assert SEEN[-1]["is_training"] is False and torch.equal(SEEN[-1]["obs_flat"], obs)
        with torch.no_grad():
            out = policy.model.forward_train(obs)
        assert SEEN[-1]["is_training"] is True, "the loss's forward pass says it is training"
        assert torch.equal(out[SampleBatch.ACTION_DIST_INPUTS], logits.detach())
        assert torch.equal(out[SampleBatch.VF_PREDS], policy.model.value_function())
        before = [p.detach().clone() for p in policy.model.parameters()]
        algo.train()
        assert all(not torch.equal(b, p) for b, p in zip(before, policy.model.parameters(), strict=True)), (
            "the value branch learns with the rest"
        )
    finally:
        algo.stop()


def test_ppo_learns_cartpole_with_a_registered_model_v2() -> None:
    model = {"custom_model": NAME, "custom_model_config": {"hidden": 64}}
    algo = ppo(model=model, train_batch_size=2000, minibatch_size=128, num_epochs=10, lr=1e-3).build()
    try:
        result: dict[str, Any] = {}
        while not result or (result["episode_reward_mean"] < 120 and result["timesteps_total"] < 50_000):
            result = algo.train()
        assert result["episode_reward_mean"] >= 120, result["timesteps_total"]
    finally:
        algo.stop()


def test_dqn_puts_its_q_head_on_a_model_v2_s_outputs_as_rllib_does() -> None:
    config = DQNConfig().environment("CartPole-v1").training(model={"custom_model": NAME}, hiddens=[128], train_batch_size=32)
    algo = config.reporting(min_sample_timesteps_per_iteration=64).debugging(seed=0).build()
    try:
        assert SEEN[0]["num_outputs"] == 128, "RLlib: ([256] + fcnet_hiddens)[-1] features under a Q head with hiddens"
        model = algo.get_policy().model
        (inner,) = [m for m in model.modules() if isinstance(m, RLlibStyleModel)]
        assert inner.value_outputs is False
        assert model(torch.zeros(3, 4))[SampleBatch.ACTION_DIST_INPUTS].shape == (3, 2)
        assert algo.train()["training_iteration"] == 1
    finally:
        algo.stop()


def test_impala_trains_a_model_v2_whose_value_function_is_its_value_head() -> None:
    config = IMPALAConfig().environment("CartPole-v1").training(model={"custom_model": RLlibStyleModel})
    algo = config.update_from_dict({"train_batch_size": 64, "rollout_fragment_length": 16, "seed": 0}).build()
    try:
        policy = algo.get_policy()
        assert isinstance(policy.model, RLlibStyleModel) and policy.model.value_outputs is True
        before = policy.model._value_branch.weight.detach().clone()
        assert algo.train()["training_iteration"] == 1
        assert not torch.equal(before, policy.model._value_branch.weight)
    finally:
        algo.stop()


def test_a_dict_observation_arrives_as_its_dict_as_restore_original_dimensions_gives_it() -> None:
    algo = ppo("tests.toy_envs:DictObsEnv").build()
    try:
        space = SEEN[0]["obs_space"]
        assert space.shape == (6,) and isinstance(space.original_space, gym.spaces.Dict)
        assert SEEN[0]["num_outputs"] == 4, "a Box(2) action's means and log standard deviations"
        algo.train()
        given = SEEN[-1]
        assert set(given["obs"]) == {"pos", "vel"} and given["is_training"] is True
        rows = given["obs_flat"].shape[0]
        assert given["obs"]["pos"].shape == (rows, 4) and given["obs"]["vel"].shape == (rows, 2)
        assert torch.equal(torch.cat([given["obs"]["pos"], given["obs"]["vel"]], dim=1), given["obs_flat"])
        assert torch.all(given["obs"]["pos"].sum(dim=1) == 1), "a Discrete part arrives one-hot, as in RLlib"
    finally:
        algo.stop()


def test_restore_original_dimensions_rebuilds_nested_tuples_and_shaped_boxes() -> None:
    space = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Dict({"m": gym.spaces.Box(0, 1, (2, 3))})))
    flat = torch.arange(16, dtype=torch.float32).reshape(2, 8)
    one_hot, inner = restore_original_dimensions(flat, space)
    assert torch.equal(one_hot, flat[:, :2]) and torch.equal(inner["m"], flat[:, 2:].reshape(2, 2, 3))
    images = torch.zeros(2, 8, 8, 3)
    assert restore_original_dimensions(images, gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)) is images


CHILD = """
import json, sys
import numpy as np
from corral import Algorithm
from corral.core import ModelCatalog
if sys.argv[2] == "register":
    from tests.core.test_model_v2 import NAME, RLlibStyleModel
    ModelCatalog.register_custom_model(NAME, RLlibStyleModel)
try:
    algo = Algorithm.from_checkpoint(sys.argv[1])
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
else:
    obs = np.array([0.01, -0.02, 0.03, 0.04], np.float32)
    action = int(algo.compute_single_action(obs, explore=False))
    print(json.dumps({"action": action, "model": type(algo.get_policy().model).__name__}))
    algo.stop()
"""


def reopen(checkpoint: str, register: bool) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH", "")] if p)}
    args = [sys.executable, "-c", CHILD, checkpoint, "register" if register else "no"]
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_checkpoint_records_the_name_and_reopens_where_the_name_is_registered_again(tmp_path: Path) -> None:
    algo = ppo().build()
    try:
        algo.train()
        checkpoint = algo.save(str(tmp_path / "ckpt"))
        obs = np.array([0.01, -0.02, 0.03, 0.04], np.float32)
        action = int(algo.compute_single_action(obs, explore=False))
    finally:
        algo.stop()
    config = json.loads((Path(checkpoint) / "config.json").read_text())
    assert config["model"]["custom_model"] == NAME, "the name is data: no class path, nothing pickled"
    assert reopen(checkpoint, register=True) == {"action": action, "model": "RLlibStyleModel"}
    error = reopen(checkpoint, register=False)["error"]
    assert f"model.custom_model '{NAME}' is not a registered model name" in error
    assert "ModelCatalog.register_custom_model" in error


@pytest.mark.usefixtures("ray_on_two_cpus")
def test_a_remote_env_runner_gets_the_registered_model_with_its_config() -> None:
    # its process has an empty registry: the class travels with the runner, as a registered env creator does
    algo = ppo().env_runners(num_env_runners=1).build()
    try:
        assert algo.train()["timesteps_total"] >= 256
        names = algo.workers.foreach_worker(lambda worker: type(worker.get_policy().model).__name__)
        assert names == ["RLlibStyleModel", "RLlibStyleModel"]
    finally:
        algo.stop()


def test_an_unknown_name_is_refused_with_the_closest_registered_one() -> None:
    with pytest.raises(ConfigError, match=rf"'rllib_style_mpl' is not a registered model name\. Did you mean '{NAME}'\?"):
        ppo().training(model={"custom_model": "rllib_style_mpl"}).build()


def test_register_custom_model_takes_only_torch_modules() -> None:
    with pytest.raises(ConfigError, match=r"needs a torch\.nn\.Module subclass"):
        ModelCatalog.register_custom_model("not_a_model", dict)
    with pytest.raises(ConfigError, match="non-empty string name"):
        ModelCatalog.register_custom_model("", RLlibStyleModel)


class WithCustomLoss(RLlibStyleModel):
    """RLlib's custom_loss() and metrics(): a term on a weight only the custom loss reads, reported as a metric."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.anchor = nn.Parameter(torch.ones(3))
        self.seen_columns: list[str] = []
        self._term = torch.zeros(())

    def custom_loss(self, policy_loss, loss_inputs):
        self.seen_columns = sorted(loss_inputs)
        self._term = self.anchor.pow(2).sum()
        return [loss + self._term for loss in policy_loss]  # RLlib's: a loss per optimizer, in a list

    def metrics(self):
        return {"anchor_term": self._term}


def test_custom_loss_is_backpropagated_and_metrics_reach_the_result_under_model() -> None:
    algo = ppo().training(model={"custom_model": WithCustomLoss}).build()
    model = algo.get_policy().model
    result = algo.train()
    assert model.anchor.detach().abs().max() < 1.0  # its only gradient is the custom term's
    assert SampleBatch.OBS in model.seen_columns and SampleBatch.ADVANTAGES in model.seen_columns
    assert 0.0 < result["info"]["learner"]["default_policy"]["model"]["anchor_term"] < 3.0
    algo.stop()


class HoldsTorchFC(TorchModelV2, nn.Module):
    """RLlib's wrapper pattern (its action-masking and parametric-action examples): a model around the default network."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.internal_model = TorchFC(obs_space, action_space, num_outputs, model_config, name + "_fc")

    def forward(self, input_dict, state, seq_lens):
        logits, _ = self.internal_model({"obs": input_dict["obs"]})
        return logits, state

    def value_function(self):
        return self.internal_model.value_function()


def test_rllib_s_default_network_is_there_for_a_custom_model_to_hold() -> None:
    algo = PPOConfig().environment("CartPole-v1").training(**SMALL_PPO, model={"custom_model": HoldsTorchFC}).build()
    try:
        inner = algo.get_policy().model.internal_model
        assert isinstance(inner, TorchFC) and inner.name == "model_fc"
        assert [m.out_features for m in inner._hidden_layers if isinstance(m, nn.Linear)] == [64, 64]
        before = [p.detach().clone() for p in inner.parameters()]
        algo.train()
        assert all(not torch.equal(a, b) for a, b in zip(before, inner.parameters(), strict=True)), "policy and value learn"
    finally:
        algo.stop()


def test_the_default_network_gives_features_without_num_outputs_and_shares_layers_when_asked() -> None:
    box = gym.spaces.Box(-1, 1, (3,))
    features = FullyConnectedNetwork(box, gym.spaces.Discrete(2), None, {"fcnet_hiddens": [8]}, "f")
    out, _ = features({"obs": torch.zeros(5, 3)})
    assert out.shape == (5, 8) and features.num_outputs == 8
    shared = ModelCatalog.get_model_v2(box, gym.spaces.Discrete(2), 2, {"fcnet_hiddens": [8], "vf_share_layers": True})
    shared({"obs": torch.zeros(5, 3)})
    assert shared.value_function().shape == (5,) and shared._value_branch_separate is None
    gaussian = ModelCatalog.get_model_v2(box, gym.spaces.Box(-1, 1, (2,)), 4, {})
    logits, _ = gaussian({"obs": torch.zeros(1, 3)})
    assert torch.equal(logits[0, 2:], torch.zeros(2)), "free_log_std: a learned log standard deviation, zero at first"
    value_net = FullyConnectedNetwork(box, gym.spaces.Discrete(2), 1, {}, "vf")  # RLlib's centralized-critic models
    assert value_net({"obs": torch.zeros(5, 3)})[0].shape == (5, 1), "free_log_std is for Box actions only"
    registered = ModelCatalog.get_model_v2(box, gym.spaces.Discrete(2), 2, {"custom_model": NAME}, hidden=16)
    assert isinstance(registered, RLlibStyleModel) and SEEN[0]["hidden"] == 16


def test_get_model_v2_refuses_what_it_cannot_build_and_says_what_to_do() -> None:
    box = gym.spaces.Box(-1, 1, (3,))
    with pytest.raises(ConfigError, match="corral builds torch models only"):
        ModelCatalog.get_model_v2(box, gym.spaces.Discrete(2), 2, {}, framework="tf2")
    with pytest.raises(ConfigError, match="set it in the policy's model config"):
        ModelCatalog.get_model_v2(box, gym.spaces.Discrete(2), 2, {"use_lstm": True})
    with pytest.raises(ConfigError, match="no ModelV2 vision network"):
        ModelCatalog.get_model_v2(gym.spaces.Box(0, 255, (16, 16, 3), np.uint8), gym.spaces.Discrete(2), 2, {})
    with pytest.raises(ConfigError, match=r"model_config has no option 'fcnet_hidens'. Did you mean 'fcnet_hiddens'"):
        ModelCatalog.get_model_v2(box, gym.spaces.Discrete(2), 2, {"fcnet_hidens": [8]})


class DoublesItsObservation(TorchModelV2, nn.Module):
    """RLlib's lstm_auto_wrapping example: a body whose constructor says how many features it gives (num_outputs)."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.num_outputs = int(np.prod(obs_space.shape))

    def forward(self, input_dict, state, seq_lens):
        return input_dict["obs_flat"] * 2.0, []

    def value_function(self):
        raise AssertionError("an LSTM-wrapped body's value function is never asked for: the LSTM's value head is")


def test_use_lstm_reads_as_many_features_as_the_wrapped_model_v2_sets_in_num_outputs() -> None:
    algo = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(**SMALL_PPO, model={"custom_model": DoublesItsObservation, "use_lstm": True, "lstm_cell_size": 8})
        .build()
    )
    try:
        assert algo.get_policy().model.lstm.input_size == 4  # CartPole's observation, not fcnet_hiddens[-1]
        assert algo.train()["num_env_steps_trained"] > 0
    finally:
        algo.stop()


class TakesNoOptions(TorchModelV2, nn.Module):
    """RLlib's custom_rnn_model example passes custom_model_config keys its model's constructor does not take."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, hidden=8):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.hidden = hidden
        self.body = RLlibStyleModel(obs_space, action_space, num_outputs, model_config, name, hidden=hidden)

    def forward(self, input_dict, state, seq_lens):
        return self.body(input_dict, state, seq_lens)

    def value_function(self):
        return self.body.value_function()


def test_custom_model_config_keys_the_constructor_does_not_take_are_left_out_with_a_warning_as_rllib_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = {"custom_model": TakesNoOptions, "custom_model_config": {"cell_size": 32}}
    with caplog.at_level("WARNING", logger="corral"):
        algo = ppo().training(model=model).build()
    assert algo.get_policy().model.hidden == 8
    assert "does not take custom_model_config's keys ['cell_size']" in caplog.text
    algo.stop()


class MasksItself(TorchModelV2, nn.Module):
    """RLlib's parametric-actions pattern: the model reads the action mask from its observation and masks itself."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.inner = TorchFC(obs_space.original_space["observation"], action_space, num_outputs, model_config, name)
        self.masks_seen: list[torch.Tensor] = []

    def forward(self, input_dict, state, seq_lens):
        mask = input_dict["obs"]["action_mask"]
        self.masks_seen.append(mask)
        logits, _ = self.inner({"obs": input_dict["obs"]["observation"]})
        return logits + torch.clamp(torch.log(mask), min=-1e30), state

    def value_function(self):
        return self.inner.value_function()


@pytest.mark.parametrize("algo_name", ["PPO", "DQN"])
def test_a_model_v2_sees_the_whole_observation_with_its_action_mask_and_its_actions_stay_legal(algo_name: str) -> None:
    from tests.toy_envs import MaskedChoiceEnv

    if algo_name == "PPO":
        config = PPOConfig().training(**SMALL_PPO, model={"custom_model": MasksItself})
    else:  # RLlib's parametric-actions DQN: no Q head layers, so the model's outputs are the Q-values as it masked them
        config = DQNConfig().training(model={"custom_model": MasksItself}, hiddens=[], dueling=False, train_batch_size=32)
        config = config.reporting(min_sample_timesteps_per_iteration=64)
    algo = config.environment(MaskedChoiceEnv).debugging(seed=0).build()
    try:
        if algo_name == "DQN":
            assert isinstance(algo.get_policy().model.advantage_head, nn.Identity)
        env = MaskedChoiceEnv()
        obs, _ = env.reset(seed=3)
        (model,) = [m for m in algo.get_policy().model.modules() if isinstance(m, MasksItself)]
        model.masks_seen.clear()
        action = algo.compute_single_action(obs)
        np.testing.assert_array_equal(model.masks_seen[-1][0].numpy(), obs["action_mask"])  # RLlib's: the whole Dict
        assert obs["action_mask"][action] == 1
        algo.train()  # MaskedChoiceEnv raises on an illegal action: sampling finishing says corral's mask held too
    finally:
        algo.stop()


def test_rllib_s_slim_fc_and_normc_initializer_build_layers_as_rllib_s_models_use_them() -> None:
    from corral.core import SlimFC, normc_initializer

    torch.manual_seed(0)
    layer = SlimFC(5, 3, initializer=normc_initializer(0.01), activation_fn="tanh", bias_init=0.5)
    linear = layer._model[0]
    assert torch.allclose(linear.weight.norm(dim=1), torch.full((3,), 0.01)), "each output's weights have norm 0.01"
    assert torch.equal(linear.bias, torch.full((3,), 0.5))
    x = torch.randn(4, 5)
    assert torch.allclose(layer(x), torch.tanh(linear(x)))
    plain = SlimFC(5, 2, use_bias=False)
    assert plain._model[0].bias is None and len(plain._model) == 1, "no activation unless asked"
    with pytest.raises(ConfigError, match="activation_fn='gelu'"):
        SlimFC(5, 2, activation_fn="gelu")
