"""RLlib's RLModule (new API stack) as a policy's model: written as RLlib's docs write one, run by corral's algorithms.

The modules here are what an RLlib user has: ``TorchRLModule`` with
``setup()``, ``_forward`` returning ``Columns`` keys and ``compute_values``
(RLlib's ValueFunctionAPI), or a stateful one with ``get_initial_state()``
returning a dict, handed over with ``config.rl_module(rl_module_spec=RLModuleSpec(...))``.
Only the imports change.
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

import corral
from corral import ConfigError
from corral.core import (
    Columns,
    ModelCatalog,
    MultiRLModuleSpec,
    RLModule,
    RLModuleConfig,
    RLModuleSpec,
    SingleAgentRLModuleSpec,
    TorchModelV2,
    TorchRLModule,
    make_multi_agent,
)
from corral.plugins.dqn import DQNConfig
from corral.plugins.ppo import PPOConfig
from corral.plugins.sac import SACConfig
from corral.testing.envs import StatelessCartPole
from tests.conftest import SMALL_PPO

ROOT = Path(__file__).resolve().parents[2]


def dist_inputs_width(space: gym.Space[Any]) -> int:
    """The width of the action distribution's inputs, as an RLlib module computes it from its action space."""
    return int(space.n) if isinstance(space, gym.spaces.Discrete) else 2 * int(np.prod(space.shape))


class PolicyAndValue(TorchRLModule):
    """A feed-forward module with a value branch, as RLlib's custom RLModule examples write one."""

    def setup(self) -> None:
        hidden = self.model_config.get("hidden", 64)
        inputs = self.observation_space.shape[0]
        self.pi = nn.Sequential(nn.Linear(inputs, hidden), nn.Tanh(), nn.Linear(hidden, dist_inputs_width(self.action_space)))
        self.vf = nn.Sequential(nn.Linear(inputs, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.pi(batch[Columns.OBS])}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        return self.vf(batch[Columns.OBS]).squeeze(-1)


class LSTMModule(TorchRLModule):
    """A stateful module: obs ``[B, T, n]``, ``state_in`` a dict, embeddings reused by ``compute_values``."""

    def setup(self) -> None:
        self.cell = self.model_config.get("cell", 32)
        self.lstm = nn.LSTM(self.observation_space.shape[0], self.cell, batch_first=True)
        self.pi = nn.Linear(self.cell, int(self.action_space.n))
        self.vf = nn.Linear(self.cell, 1)

    def get_initial_state(self) -> dict[str, torch.Tensor]:
        return {"h": torch.zeros(self.cell), "c": torch.zeros(self.cell)}

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        state = batch[Columns.STATE_IN]
        out, (h, c) = self.lstm(batch[Columns.OBS], (state["h"].unsqueeze(0), state["c"].unsqueeze(0)))
        return {
            Columns.ACTION_DIST_INPUTS: self.pi(out),
            Columns.EMBEDDINGS: out,
            Columns.STATE_OUT: {"h": h[0], "c": c[0]},
        }

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        return self.vf(embeddings).squeeze(-1)


class FeaturesV2(TorchModelV2, nn.Module):
    """A ModelV2 with a value branch: the policy network in PPO, the body under DQN's Q head, SAC's actor or critic."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, hidden=32):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.body = nn.Sequential(nn.Linear(int(np.prod(obs_space.shape)), hidden), nn.ReLU())
        self.out = nn.Linear(hidden, num_outputs)
        self.value = nn.Linear(hidden, 1)
        self._features: torch.Tensor | None = None

    def forward(self, input_dict, state, seq_lens):
        self._features = self.body(input_dict["obs_flat"].float())
        return self.out(self._features), state

    def value_function(self):
        return self.value(self._features).reshape(-1)


REGISTERED = {"rl_module_pv": PolicyAndValue, "model_v2_features": FeaturesV2}


@pytest.fixture(autouse=True)
def registered() -> None:
    for name, cls in REGISTERED.items():
        ModelCatalog.register_custom_model(name, cls)


def ppo_with(spec: Any, env: Any = "CartPole-v1") -> PPOConfig:
    return PPOConfig().environment(env).training(**SMALL_PPO).rl_module(rl_module_spec=spec).debugging(seed=0)


def test_the_spec_s_module_is_the_policy_s_model_and_takes_rllib_s_batches() -> None:
    algo = ppo_with(RLModuleSpec(module_class=PolicyAndValue, model_config={"hidden": 16})).build()
    try:
        module = algo.get_module()
        assert module is algo.get_policy().model and isinstance(module, PolicyAndValue)
        assert module.model_config == {"hidden": 16} and module.config.model_config_dict == {"hidden": 16}
        assert module.observation_space.shape == (4,) and module.action_space == gym.spaces.Discrete(2)
        obs = torch.zeros(3, 4)
        out = module.forward_inference({Columns.OBS: obs})
        assert set(out) == {Columns.ACTION_DIST_INPUTS}, "RLlib's batch in, the module's own outputs back"
        before = [p.detach().clone() for p in module.parameters()]
        result = algo.train()
        assert result["timesteps_total"] >= 256
        assert all(not torch.equal(a, b) for a, b in zip(before, module.parameters(), strict=True)), "pi and vf learn"
        values = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(values["vf_loss"])
    finally:
        algo.stop()


@pytest.mark.slow
def test_ppo_learns_cartpole_with_an_rl_module() -> None:
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .rl_module(rl_module_spec=RLModuleSpec(module_class="rl_module_pv", model_config={"hidden": 64}))
        .debugging(seed=0)
    )
    algo = config.build()
    try:
        best = 0.0
        while algo.iteration < 40 and best < 150:
            best = max(best, algo.train()["episode_reward_mean"])
        assert best >= 150, f"best mean return {best} after {algo.iteration} iterations"
    finally:
        algo.stop()


def test_a_stateful_module_gets_time_major_batches_and_its_state_dict_and_carries_it() -> None:
    algo = ppo_with(RLModuleSpec(module_class=LSTMModule, model_config={"cell": 8}), env=StatelessCartPole).build()
    try:
        policy = algo.get_policy()
        assert policy.is_recurrent and [p.shape for p in policy.get_initial_state()] == [(8,), (8,)]
        assert algo.train()["timesteps_total"] >= 256
        obs = np.array([0.1, -0.2], np.float32)
        action, state, extras = algo.compute_single_action(obs, state=policy.get_initial_state(), explore=False)
        assert action in (0, 1) and len(state) == 2 and "vf_preds" in extras
        _, state_after, _ = algo.compute_single_action(obs, state=state, explore=False)
        assert not np.allclose(state_after[0], state[0]), "the state moves from step to step"
        module = policy.model
        batch = {Columns.OBS: torch.zeros(2, 5, 2), Columns.STATE_IN: {"h": torch.zeros(2, 8), "c": torch.zeros(2, 8)}}
        out = module.forward_train(batch)
        assert out[Columns.ACTION_DIST_INPUTS].shape == (2, 5, 2) and set(out[Columns.STATE_OUT]) == {"h", "c"}
    finally:
        algo.stop()


def test_rl_module_model_config_shapes_corral_s_own_model_and_a_multi_spec_gives_each_policy_its_module() -> None:
    config = PPOConfig().rl_module(model_config={"fcnet_hiddens": [16]})
    assert config.model.fcnet_hiddens == [16]
    assert PPOConfig().rl_module(model_config_dict={"vf_share_layers": True}).model.vf_share_layers  # Ray 2.5-2.9
    box, two = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    spaced = PPOConfig().rl_module(rl_module_spec=RLModuleSpec(PolicyAndValue, observation_space=box, action_space=two))
    assert (spaced.observation_space, spaced.action_space) == (box, two), "the spec's spaces are the env's"
    specs = {"p0": RLModuleSpec(module_class=PolicyAndValue), "p1": SingleAgentRLModuleSpec(model_config={"fcnet_hiddens": [8]})}
    config = (
        PPOConfig()
        .environment(make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id}")
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs))
        .training(**SMALL_PPO)
    )
    algo = config.build()
    try:
        assert isinstance(algo.get_module("p0"), PolicyAndValue)
        assert algo.get_policy("p1").model.encoder[0].out_features == 8, "corral's model, shaped by its spec"
        assert algo.train()["timesteps_total"] >= 256
    finally:
        algo.stop()


class QModule(TorchRLModule):
    """A DQN module in RLlib's spelling: Q-values as ``qf_preds``."""

    def setup(self) -> None:
        self.q = nn.Sequential(nn.Linear(self.observation_space.shape[0], 32), nn.ReLU(), nn.Linear(32, self.action_space.n))

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {"qf_preds": self.q(batch[Columns.OBS])}


def test_dqn_reads_an_rl_module_s_outputs_as_its_q_values() -> None:
    config = DQNConfig().environment("CartPole-v1").rl_module(rl_module_spec=RLModuleSpec(module_class=QModule))
    algo = config.training(learning_starts=64, train_batch_size=32).debugging(seed=0).build()
    try:
        model = algo.get_policy().model
        assert isinstance(model, QModule)
        obs = torch.zeros(1, 4)
        assert torch.equal(model.forward_inference(obs)[Columns.ACTION_DIST_INPUTS], model.q(obs))
        while algo.get_policy().global_timestep < 300:
            result = algo.train()
        assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["mean_td_error"])
    finally:
        algo.stop()


def test_sac_takes_custom_actors_and_critics_as_rllib_s_model_configs_do() -> None:
    config = (
        SACConfig()
        .environment("Pendulum-v1")
        .rl_module(rl_module_spec=RLModuleSpec(module_class=PolicyAndValue, model_config={"hidden": 16}))
        .training(q_model_config={"custom_model": "model_v2_features"}, learning_starts=64)
        .debugging(seed=0)
    )
    algo = config.build()
    try:
        model = algo.get_policy().model
        assert isinstance(model.actor.model, PolicyAndValue), "model's custom_model is the actor"
        critics = list(model.critics.members)
        assert len(critics) == 2 and critics[0].model.obs_space.shape == (4,), "a critic reads observations and actions"
        used = {name: p for name, p in model.named_parameters() if ".vf." not in name and ".value." not in name}
        before = {name: p.detach().clone() for name, p in used.items()}
        while algo.get_policy().global_timestep < 200:
            algo.train()
        assert [name for name, p in used.items() if torch.equal(before[name], p)] == [], "actor and critics learn"
    finally:
        algo.stop()


def test_what_corral_cannot_honour_is_refused_with_what_to_do_instead() -> None:
    class NoValues(TorchRLModule):
        def setup(self) -> None:
            self.pi = nn.Linear(4, 2)

        def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            return {Columns.ACTION_DIST_INPUTS: self.pi(batch[Columns.OBS])}

    class OwnDistribution(NoValues):
        def get_train_action_dist_cls(self) -> Any:
            return None

    class NoOutputs(NoValues):
        def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            return {"logits": self.pi(batch[Columns.OBS])}

    with pytest.raises(ConfigError, match=r"NoValues gives no value estimates.*write compute_values"):
        ppo_with(RLModuleSpec(module_class=NoValues)).build()
    with pytest.raises(ConfigError, match=r"defines get_train_action_dist_cls.*corral chooses the action distribution"):
        ppo_with(RLModuleSpec(module_class=OwnDistribution)).build()
    with pytest.raises(ConfigError, match=r"returned \['logits'\], without 'action_dist_inputs'"):
        DQNConfig().environment("CartPole-v1").rl_module(rl_module_spec=RLModuleSpec(module_class=NoOutputs)).build()
    with pytest.raises(ConfigError, match=r"q_model_config.custom_model=.*NoValues is an RLModule"):
        SACConfig().environment("Pendulum-v1").training(q_model_config={"custom_model": NoValues}).build()
    with pytest.raises(ConfigError, match=r"LSTMModule is a stateful RLModule, but SAC's actor reads single steps"):
        SACConfig().environment("CartPole-v1").training(model={"custom_model": LSTMModule}).build()
    with pytest.raises(ValueError, match=r"load_state_path.*Algorithm.from_checkpoint"):
        RLModuleSpec(module_class=NoValues, load_state_path="/somewhere")
    with pytest.raises(ValueError, match=r"catalog_class=.* with a module_class"):
        RLModuleSpec(module_class=NoValues, catalog_class=object)
    with pytest.raises(ConfigError, match=r"a module of your own builds its layers in setup\(\)"):
        NoValues(observation_space=gym.spaces.Box(-1, 1, (4,)), action_space=gym.spaces.Discrete(2), catalog_class=object)
    with pytest.raises(ValueError, match="multi_rl_module_class"):
        MultiRLModuleSpec(multi_rl_module_class=object)


def test_ray_2_9_s_module_config_and_the_spec_s_build_give_the_same_module() -> None:
    obs_space, action_space = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    old = PolicyAndValue(RLModuleConfig(obs_space, action_space, model_config_dict={"hidden": 8}))
    new = RLModuleSpec(PolicyAndValue, obs_space, action_space, model_config={"hidden": 8}).build()
    assert old.model_config == new.model_config == {"hidden": 8}
    assert [p.shape for p in old.parameters()] == [p.shape for p in new.parameters()]


CHILD = """
import json, sys
import numpy as np
from corral import Algorithm
from corral.core import ModelCatalog
from tests.core.test_rl_module import REGISTERED
for name, cls in REGISTERED.items():
    ModelCatalog.register_custom_model(name, cls)
answers = {}
for key, (checkpoint, obs) in json.loads(sys.argv[1]).items():
    algo = Algorithm.from_checkpoint(checkpoint)
    action = algo.compute_single_action(np.asarray(obs, np.float32), explore=False)
    answers[key] = [np.asarray(action).tolist(), type(algo.get_policy().model).__name__]
    algo.stop()
print(json.dumps(answers))
"""

PENDULUM_OBS = [0.6, 0.8, -0.3]
CARTPOLE_OBS = [0.01, -0.02, 0.03, 0.04]


def small(name: str, custom_model: str) -> Any:
    model = {"custom_model": custom_model}
    if name == "PPO":
        return PPOConfig().environment("CartPole-v1").training(model=model, **SMALL_PPO)
    if name == "DQN":
        return DQNConfig().environment("CartPole-v1").training(model=model, learning_starts=32)
    return SACConfig().environment("Pendulum-v1").training(model=model, learning_starts=32)


def test_a_registered_model_v2_and_rl_module_train_in_ppo_dqn_and_sac_and_reopen_in_a_fresh_process(tmp_path: Path) -> None:
    expected, checkpoints = {}, {}
    for algorithm in ("PPO", "DQN", "SAC"):
        for custom_model in REGISTERED:
            key = f"{algorithm}/{custom_model}"
            algo = small(algorithm, custom_model).debugging(seed=0).build()
            try:
                algo.train()
                obs = PENDULUM_OBS if algorithm == "SAC" else CARTPOLE_OBS
                action = algo.compute_single_action(np.asarray(obs, np.float32), explore=False)
                checkpoint = algo.save(str(tmp_path / key))
                expected[key] = [np.asarray(action).tolist(), type(algo.get_policy().model).__name__]
                checkpoints[key] = (checkpoint, obs)
            finally:
                algo.stop()
            saved = json.loads((Path(checkpoint) / "config.json").read_text())
            assert saved["model"]["custom_model"] == custom_model, "the name is data: no class path, nothing pickled"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH", "")] if p)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(checkpoints)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == expected


DATA = Path(corral.__file__).parent / "tuned_examples" / "data"


def every_algorithm(name: str, model: dict[str, Any]) -> Any:
    """A one-iteration config of each built-in algorithm with a model of the RLModule's kind."""
    if name in ("PPO", "A2C"):
        return corral.get_config(name).environment("CartPole-v1").training(model=model, train_batch_size=128)
    if name == "IMPALA":
        config = corral.get_config(name).environment("CartPole-v1").training(model=model, train_batch_size=100)
        return config.env_runners(rollout_fragment_length=25, num_envs_per_env_runner=4)
    if name in ("MARWIL", "BC"):
        config = corral.get_config(name).environment("CartPole-v1").training(model=model, train_batch_size=200)
        return config.offline_data(input_=str(DATA / "cartpole_expert.parquet")).reporting(min_sample_timesteps_per_iteration=200)
    small = {"model": model, "train_batch_size": 32, "learning_starts": 32}
    if name == "CQL":
        config = corral.get_config(name).environment("Pendulum-v1").training(**small, training_intensity=32)
        pendulum = str(DATA / "pendulum_sac.parquet")
        config = config.offline_data(input_=pendulum, actions_in_input_normalized=True, postprocess_inputs=True)
        return config.reporting(min_sample_timesteps_per_iteration=100)
    env = "Pendulum-v1" if name == "SAC" else "CartPole-v1"
    return corral.get_config(name).environment(env).training(**small).reporting(min_sample_timesteps_per_iteration=100)


@pytest.mark.parametrize("name", ["PPO", "A2C", "IMPALA", "MARWIL", "BC", "DQN", "SAC", "CQL"])
def test_an_rl_module_runs_in_every_algorithm_with_a_model_of_its_kind(name: str) -> None:
    algo = every_algorithm(name, {"custom_model": "rl_module_pv"}).debugging(seed=0).build()
    try:
        model = algo.get_module()
        module = getattr(getattr(model, "actor", None), "model", model)  # SAC and CQL: the actor
        assert isinstance(module, PolicyAndValue)
        before = [p.detach().clone() for p in module.pi.parameters()]
        algo.train()
        assert any(not torch.equal(a, b) for a, b in zip(before, module.pi.parameters(), strict=True)), "it learns"
    finally:
        algo.stop()


def test_a_multi_agent_run_gives_each_policy_its_rl_module_and_trains_them() -> None:
    specs = {"p0": RLModuleSpec(module_class=PolicyAndValue), "p1": RLModuleSpec(module_class=LSTMModule)}
    config = (
        PPOConfig()
        .environment(make_multi_agent(lambda _: StatelessCartPole()), env_config={"num_agents": 2})
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id}")
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs))
        .training(**SMALL_PPO)
    )
    algo = config.build()
    try:
        assert isinstance(algo.get_module("p0"), PolicyAndValue) and algo.get_policy("p1").is_recurrent
        result = algo.train()
        assert set(result["info"]["learner"]) == {"p0", "p1"}
    finally:
        algo.stop()


def test_a_keyword_an_rl_module_does_not_know_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"PolicyAndValue\(model_config_dict=\.\.\.\): an RLModule takes observation_space"):
        PolicyAndValue(observation_space=gym.spaces.Box(-1, 1, (4,)), action_space=gym.spaces.Discrete(2), model_config_dict={})


def test_corral_s_own_model_gives_and_takes_its_state_as_an_rl_module_does(make_algo) -> None:
    algo = make_algo(PPOConfig().environment("CartPole-v1").training(**SMALL_PPO).env_runners(num_env_runners=0))
    module = algo.get_module()
    assert algo.env_runner.module is module  # RLlib 2.10's algo.env_runner, the algorithm's own
    state = module.get_state()
    assert state and all(isinstance(value, np.ndarray) for value in state.values())
    state[next(iter(state))][...] = 0.0  # a copy: the module is untouched
    assert not all(np.array_equal(state[key], value) for key, value in module.get_state().items())
    module.set_state(state)
    assert all(np.array_equal(state[key], value) for key, value in module.get_state().items())
    assert all(np.array_equal(state[key], value) for key, value in algo.get_policy().get_weights().items())


def test_the_modules_of_a_checkpoint_load_alone_by_rllib_s_paths_and_act_alike(make_algo, tmp_path: Path) -> None:
    algo = make_algo(PPOConfig().environment("CartPole-v1").training(**SMALL_PPO).env_runners(num_env_runners=0))
    algo.train()
    checkpoint = Path(algo.save_to_path(tmp_path / "ckpt"))
    modules = RLModule.from_checkpoint(checkpoint / "learner_group" / "learner" / "rl_module")
    assert set(modules) == {"default_policy"}
    one = RLModule.from_checkpoint(checkpoint / "learner_group" / "learner" / "rl_module" / "default_policy")
    obs = {"obs": torch.from_numpy(np.array([[0.01, -0.02, 0.03, 0.04]], dtype=np.float32))}
    expected = algo.get_module().forward_inference(obs)["action_dist_inputs"]
    for module in (modules["default_policy"], one, RLModule.from_checkpoint(checkpoint)["default_policy"]):
        assert torch.equal(module.forward_inference(obs)["action_dist_inputs"], expected)


def test_rllib_s_acting_calls_run_without_autograd_and_its_train_call_with_it(make_algo) -> None:
    obs = torch.zeros(2, 4)
    model = make_algo(PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0)).get_module()
    assert not model.forward_inference({"obs": obs})["action_dist_inputs"].requires_grad  # `.numpy()` works, as in RLlib
    assert not model.forward_exploration({"obs": obs})["action_dist_inputs"].requires_grad
    assert model.forward_train({"obs": obs})["action_dist_inputs"].requires_grad
    assert model.forward_inference(obs)["action_dist_inputs"].requires_grad  # corral's own tensor call is left as it was
    module = PolicyAndValue(
        observation_space=gym.spaces.Box(-1.0, 1.0, (4,)), action_space=gym.spaces.Discrete(2), model_config={}
    )
    assert not module.forward_inference({"obs": obs})["action_dist_inputs"].requires_grad
    assert module.forward_train({"obs": obs})["action_dist_inputs"].requires_grad
