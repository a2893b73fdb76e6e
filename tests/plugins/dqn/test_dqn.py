"""DQN and the shared off-policy machinery: replay ratio, targets, priorities, checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

import corral
from corral import ConfigError
from corral.core.learning.policies.target_networks import update_target
from corral.plugins.dqn import DQN, DQNConfig
from corral.plugins.dqn.torch_model import DQNTorchModel

TINY = {
    "num_envs_per_env_runner": 4,
    "train_batch_size": 32,
    "learning_starts": 100,
    "training_intensity": 8.0,
    "min_sample_timesteps_per_iteration": 200,
    "model": {"fcnet_hiddens": [32]},
    "seed": 0,
}


def tiny(**overrides) -> DQNConfig:
    return DQNConfig().environment("CartPole-v1").update_from_dict({**TINY, **overrides})


def test_dqn_is_found_through_corrals_own_entry_point() -> None:
    (info,) = [p for p in corral.list_algorithms() if p.name == "DQN"]
    assert info.dist == "corral" and info.value == "corral.plugins.dqn:DQN"
    assert corral.get_algorithm("dqn") is DQN


def test_box_actions_are_refused_naming_the_algorithms_that_fit() -> None:
    with pytest.raises(ConfigError, match="DQN needs a Discrete action space, but the env has Box") as error:
        DQNConfig().environment("Pendulum-v1").build()
    suggested = str(error.value).split("installed algorithms that support it: ")[1].split(", ")
    assert {"A2C", "PPO", "SAC"} <= set(suggested) and "DQN" not in suggested


def test_nothing_is_learned_before_learning_starts() -> None:
    algo = tiny(learning_starts=10_000).build()
    result = algo.train()
    assert result["num_env_steps_sampled"] >= 200
    assert result["num_env_steps_trained"] == 0
    assert result["info"]["learner"] == {}


def test_replay_ratio_follows_training_intensity() -> None:
    algo = tiny(learning_starts=0).build()
    for _ in range(3):
        result = algo.train()
    ratio = result["num_env_steps_trained"] / result["num_env_steps_sampled"]
    assert ratio == pytest.approx(8.0, rel=0.1)
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    for key in ("loss", "mean_q", "mean_td_error", "grad_gnorm", "cur_epsilon", "cur_lr"):
        assert np.isfinite(stats[key]), key
    assert "td_error" not in stats  # consumed by the replay buffer, not reported


def test_hard_target_updates_happen_every_target_network_update_freq_steps() -> None:
    algo = tiny(learning_starts=0, tau=1.0, target_network_update_freq=10**9).build()
    policy = algo.get_policy()
    algo.train()
    online, target = policy.model.state_dict(), policy.target_model.state_dict()
    assert any(not torch.equal(online[k], target[k]) for k in online)  # never synced after the start
    algo = tiny(learning_starts=0, tau=1.0, target_network_update_freq=1).build()
    algo.train()
    policy = algo.get_policy()
    online, target = policy.model.state_dict(), policy.target_model.state_dict()
    assert all(torch.equal(online[k], target[k]) for k in online)  # synced after the last step


def test_soft_update_moves_the_target_by_tau() -> None:
    source, target = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    before = target.weight.detach().clone()
    update_target(target, source, 0.25)
    torch.testing.assert_close(target.weight, before + 0.25 * (source.weight - before))
    update_target(target, source, 1.0)
    torch.testing.assert_close(target.weight, source.weight)


def test_prioritized_replay_priorities_follow_td_errors() -> None:
    algo = tiny(learning_starts=0, replay_buffer_config={"type": "PrioritizedReplayBuffer", "capacity": 10_000}).build()
    algo.train()
    priorities = algo.replay_buffers["default_policy"].get_state()["priorities"]
    assert len(np.unique(priorities)) > 10  # no longer all equal to the initial max priority


def test_soft_q_exploration_is_an_option() -> None:
    algo = tiny(exploration_config={"type": "SoftQ", "temperature": 0.5}).build()
    assert algo.train()["num_env_steps_sampled"] > 0


def test_multidiscrete_actions_are_refused() -> None:
    from ...toy_envs import ImageEnv  # image observations, MultiDiscrete actions

    with pytest.raises(ConfigError, match="DQN needs a Discrete action space"):
        DQNConfig().environment(ImageEnv).build()


_RESUME = """
import json, sys
import numpy as np
from corral import Algorithm
algo = Algorithm.from_checkpoint(sys.argv[1])
policy = algo.get_policy()
obs = np.array(json.loads(sys.argv[2]), dtype=np.float32)
print(json.dumps({
    "timestep": policy.global_timestep,
    "epsilon": policy.exploration.current_epsilon(policy.global_timestep),
    "sampled": algo.counters["num_env_steps_sampled"],
    "iteration": algo.iteration,
    "buffer": len(algo.replay_buffers["default_policy"]),
    "actions": [algo.compute_single_action(o, explore=False) for o in obs],
}))
algo.train()
print(json.dumps({"sampled_after": algo.counters["num_env_steps_sampled"], "iteration_after": algo.iteration}))
"""


@pytest.mark.parametrize("save_replay_buffer", [False, True])
def test_checkpoint_resumes_in_a_fresh_process(tmp_path, save_replay_buffer) -> None:
    algo = tiny(learning_starts=0, save_replay_buffer=save_replay_buffer).build()
    for _ in range(2):
        algo.train()
    path = algo.save(tmp_path / "ckpt")
    policy = algo.get_policy()
    observations = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    expected_actions = [algo.compute_single_action(o, explore=False) for o in observations]
    proc = subprocess.run(
        [sys.executable, "-c", _RESUME, path, json.dumps(observations.tolist())],
        capture_output=True,
        text=True,
        check=True,
    )
    restored, after = (json.loads(line) for line in proc.stdout.strip().splitlines()[-2:])
    assert restored["timestep"] == policy.global_timestep
    assert restored["epsilon"] == pytest.approx(policy.exploration.current_epsilon(policy.global_timestep))
    assert restored["sampled"] == algo.counters["num_env_steps_sampled"]
    assert restored["iteration"] == 2 and after["iteration_after"] == 3
    assert after["sampled_after"] > restored["sampled"]
    assert restored["actions"] == expected_actions
    assert restored["buffer"] == (len(algo.replay_buffers["default_policy"]) if save_replay_buffer else 0)


class LinearQ(DQNTorchModel):
    """RLlib's way to write a DQN model: derive from DQNTorchModel, write forward (its outputs: the Q-values here)."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, **kw):
        DQNTorchModel.__init__(self, obs_space, action_space, num_outputs, model_config, name, **kw)
        self.linear = torch.nn.Linear(int(np.prod(obs_space.shape)), num_outputs)

    def forward(self, input_dict, state, seq_lens):
        return self.linear(input_dict["obs_flat"]), state


def test_a_model_derived_from_rllib_s_dqn_torch_model_gives_the_q_values_without_a_q_head() -> None:
    algo = tiny(hiddens=[], dueling=False, model={"custom_model": LinearQ}).build()
    try:
        policy = algo.get_policy()
        (model,) = [m for m in policy.model.modules() if isinstance(m, LinearQ)]
        assert model.num_outputs == 2, "without the head's hidden layers it is built with one output per action"
        obs = torch.zeros(3, 4)
        q = policy.model.forward_train(obs)["action_dist_inputs"]
        torch.testing.assert_close(q, model.linear(obs))
        algo.train()
    finally:
        algo.stop()
    with pytest.raises(ConfigError, match=r"distributional \(num_atoms=51\).*not in corral's DQN"):
        LinearQ(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), 2, {}, "q", num_atoms=51)
