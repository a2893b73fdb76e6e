"""Exact reproducibility: seeded algorithms in one process do not disturb each other; a resume is bit for bit.

Each algorithm draws from generators it owns (``corral.core.seeding``), and a
checkpoint holds all of them, the environments' state mid-episode and the
metrics history. So: train 3 iterations, save, and in a fresh process restore
and train 2 more; the results and the weights equal 5 uninterrupted
iterations exactly (wall-clock fields aside).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from corral import get_config

from .resume_worker import deterministic

WORKER = Path(__file__).with_name("resume_worker.py")

COMPLETE_EPISODES = {
    "batch_mode": "complete_episodes",
    "num_envs_per_env_runner": 3,
    "rollout_fragment_length": 7,
    "train_batch_size": 60,
    "minibatch_size": 30,
    "num_epochs": 2,
}
"""PPO on whole episodes, with a fragment (3 x 7) that cuts most of them"""

CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "PPO": (
        "PPO",
        {"env": "CartPole-v1", "num_envs_per_env_runner": 4, "train_batch_size": 256, "minibatch_size": 64, "num_epochs": 2},
    ),
    # an LSTM: each sub-environment's state and previous action carry over in the checkpoint
    "PPO-LSTM": (
        "PPO",
        {
            "env": "CartPole-v1",
            "num_envs_per_env_runner": 4,
            "train_batch_size": 256,
            "minibatch_size": 64,
            "num_epochs": 2,
            "model": {"use_lstm": True, "lstm_cell_size": 16, "max_seq_len": 8, "lstm_use_prev_action": True},
        },
    ),
    "DQN": (
        "DQN",
        {
            "env": "CartPole-v1",
            "num_envs_per_env_runner": 4,
            "train_batch_size": 32,
            "learning_starts": 100,
            "min_sample_timesteps_per_iteration": 200,
            "replay_buffer_config": {"type": "PrioritizedReplayBuffer", "capacity": 5000},
            "save_replay_buffer": True,
        },
    ),
    "SAC": (
        "SAC",
        {
            "env": "Pendulum-v1",
            "train_batch_size": 32,
            "learning_starts": 50,
            "min_sample_timesteps_per_iteration": 150,
            "model": {"fcnet_hiddens": [32]},
            "save_replay_buffer": True,
        },
    ),
    "IMPALA": (
        "IMPALA",
        {
            "env": "CartPole-v1",
            "num_envs_per_env_runner": 4,
            "train_batch_size": 80,
            "rollout_fragment_length": 20,
            "min_sample_timesteps_per_iteration": 200,
        },
    ),
    # whole episodes only: sub-environments whose episode a fragment cut are skipped into the next call
    "PPO-complete-episodes": ("PPO", {"env": "corral.testing.envs:CountingEnv", **COMPLETE_EPISODES}),
    # whole episodes of agents that leave at different steps: each sub-environment's skipping carries over
    "PPO-multi-agent-complete-episodes": (
        "PPO",
        {"env": "corral.testing.envs:MultiAgentCountingEnv", "env_config": {"num_agents": 2}, **COMPLETE_EPISODES},
    ),
    # turn-based, masked, one policy per player: rows stay open across sample calls and the checkpoint
    "PPO-multi-agent": (
        "PPO",
        {
            "env": "corral.testing.envs:TurnBasedToyEnv",
            "policies": ["pfirst", "psecond"],
            "policy_mapping_fn": "corral.core.contracts.multi_agent_config:policy_per_agent",
            "num_envs_per_env_runner": 3,
            "train_batch_size": 90,
            "minibatch_size": 30,
            "num_epochs": 2,
            "observation_filter": "MeanStdFilter",
        },
    ),
    # agents that leave at different steps, with an LSTM: each agent's state, previous action and reward carry over
    "PPO-multi-agent-LSTM": (
        "PPO",
        {
            "env": "corral.testing.envs:MultiAgentCountingEnv",
            "env_config": {"num_agents": 2},
            "num_envs_per_env_runner": 3,
            "rollout_fragment_length": 7,
            "train_batch_size": 90,
            "minibatch_size": 30,
            "num_epochs": 2,
            "model": {"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 4, "lstm_use_prev_reward": True},
        },
    ),
    # one shared policy, agents that leave mid-episode, a replay buffer in the checkpoint
    "DQN-multi-agent": (
        "DQN",
        {
            "env": "corral.testing.envs:MultiAgentCartPole",
            "env_config": {"num_agents": 2},
            "num_envs_per_env_runner": 2,
            "train_batch_size": 32,
            "learning_starts": 100,
            "min_sample_timesteps_per_iteration": 200,
            "save_replay_buffer": True,
        },
    ),
}


def configure(name: str, **overrides: Any) -> Any:
    """The config of ``CONFIGS[name]``, seed 0 unless overridden."""
    algorithm, values = CONFIGS[name]
    return get_config(algorithm).update_from_dict({**values, "seed": 0, "log_to_tensorboard": False, **overrides})


def same(a: Any, b: Any, where: str = "result") -> None:
    """Equal, NaN equal to NaN (an iteration that finished no episode reports NaN means); tensors and arrays exactly."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: keys differ"
        for key in a:
            same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert isinstance(b, type(a)) and len(a) == len(b), f"{where}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), f"{where}: tensors differ"
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and np.array_equal(a, b), f"{where}: arrays differ"
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), f"{where}: {a!r} != {b!r}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def weights_as_lists(algo: Any) -> dict[str, dict[str, list[Any]]]:
    return {pid: {k: v.tolist() for k, v in w.items()} for pid, w in algo.get_weights().items()}


def check_resume_in_a_fresh_process(algo: Any, tmp_path: Path) -> None:
    """3 iterations, save, then 2 more here and 2 more in a fresh process from the checkpoint: identical."""
    for _ in range(3):
        algo.train()
    checkpoint = algo.save(tmp_path / "ckpt")
    output = tmp_path / "resumed.json"
    worker = subprocess.Popen([sys.executable, str(WORKER), checkpoint, "2", str(output)], stderr=subprocess.PIPE, text=True)
    uninterrupted = [json.loads(json.dumps(deterministic(algo.train()), default=str)) for _ in range(2)]
    _, stderr = worker.communicate(timeout=300)
    assert worker.returncode == 0, stderr
    resumed = json.loads(output.read_text())
    for i, (a, b) in enumerate(zip(uninterrupted, resumed["results"], strict=True)):
        same(a, b, f"iteration {4 + i}")
    same(weights_as_lists(algo), resumed["weights"], "weights")


@pytest.mark.parametrize("name", list(CONFIGS))
def test_save_and_resume_in_a_fresh_process_is_bit_identical(name, make_algo, tmp_path) -> None:
    check_resume_in_a_fresh_process(make_algo(configure(name)), tmp_path)


@pytest.mark.slow
@pytest.mark.usefixtures("ray_on_two_cpus")
def test_with_two_remote_runners_too(make_algo, tmp_path) -> None:
    """PPO with 2 Ray runners and a MeanStdFilter: each runner's envs, generators and policy copy travel."""
    check_resume_in_a_fresh_process(make_algo(configure("PPO", num_env_runners=2, observation_filter="MeanStdFilter")), tmp_path)


def learner_trace(algo: Any, iterations: int) -> list[Any]:
    return [algo.train()["info"]["learner"] for _ in range(iterations)]


def flat_weights(algo: Any) -> np.ndarray:
    return np.concatenate([v.ravel() for v in algo.get_weights()["default_policy"].values()])


def test_seeded_algorithms_interleaved_in_one_process_equal_each_alone(make_algo) -> None:
    alone_ppo = make_algo(configure("PPO"))
    ppo_trace, ppo_weights = learner_trace(alone_ppo, 3), flat_weights(alone_ppo)
    alone_dqn = make_algo(configure("DQN", seed=1))
    dqn_trace, dqn_weights = learner_trace(alone_dqn, 3), flat_weights(alone_dqn)

    first, second, dqn = make_algo(configure("PPO")), make_algo(configure("PPO")), make_algo(configure("DQN", seed=1))
    traces: dict[int, list[Any]] = {id(a): [] for a in (first, second, dqn)}
    for _ in range(3):
        for algo in (first, dqn, second):
            traces[id(algo)].append(algo.train()["info"]["learner"])
    for algo, trace, weights in (
        (first, ppo_trace, ppo_weights),
        (second, ppo_trace, ppo_weights),
        (dqn, dqn_trace, dqn_weights),
    ):
        same(json.loads(json.dumps(traces[id(algo)], default=str)), json.loads(json.dumps(trace, default=str)), "learner stats")
        np.testing.assert_array_equal(flat_weights(algo), weights)


def test_another_seed_differs(make_algo) -> None:
    a, b = make_algo(configure("PPO")), make_algo(configure("PPO", seed=1))
    a.train()
    b.train()
    assert not np.array_equal(flat_weights(a), flat_weights(b))


def test_building_an_algorithm_leaves_torchs_global_generator_alone(make_algo) -> None:
    import torch

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    make_algo(configure("PPO")).train()
    assert torch.equal(torch.rand(3), expected)


def test_a_restore_built_differently_starts_new_episodes(make_algo, tmp_path, restored_algos) -> None:
    """Another number of sub-environments (as corral evaluate asks for) cannot continue the saved episodes."""
    from corral import Algorithm

    algo = make_algo(configure("PPO"))
    algo.train()
    checkpoint = algo.save(tmp_path / "ckpt")
    other = Algorithm.from_checkpoint(checkpoint, config_overrides={"num_envs_per_env_runner": 2})
    restored_algos.append(other)
    assert other.env_runner_group.local_env_runner._obs is None  # not started: the next sample resets
    assert other.train()["training_iteration"] == 2
