"""What a user's script defines survives a checkpoint and an in-memory state; RLlib's overrides() checks options.

A checkpoint is written by a script run in a subprocess (so its mapping
function truly lives in that script) and opened here, in another process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

import corral
from corral import Algorithm, CheckpointError, ConfigError, PolicySpec
from corral.plugins.ppo import PPO, PPOConfig

from .test_exact_resume import configure, deterministic, same, weights_as_lists

README_MULTI_AGENT = textwrap.dedent(
    """
    import sys

    import corral
    from corral import PolicySpec, make_multi_agent

    config = (
        corral.get_config("PPO")
        .environment(make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
        .multi_agent(
            policies={"p0": PolicySpec(config={"lr": 1e-4}), "p1": None},
            policy_mapping_fn=lambda agent_id, episode, **kwargs: f"p{1 - agent_id}",  # agent 0 -> p1
            policies_to_train=["p0"],
        )
        .training(train_batch_size=128, minibatch_size=64, num_epochs=1)
        .debugging(seed=0)
        .reporting(log_to_tensorboard=False)
    )
    algo = config.build()
    algo.train()
    print("CHECKPOINT " + algo.save(sys.argv[1]))
    algo.stop()
    """
)
"""docs/multi-agent.md's example, saved (its lambda maps agent 0 to p1, as no importable function here does)"""


@pytest.fixture(scope="module")
def readme_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("readme")
    (folder / "script.py").write_text(README_MULTI_AGENT, encoding="utf-8")
    # a module's fixture runs before each test points CORRAL_RESULTS_DIR at its own folder
    env = {**os.environ, "CORRAL_RESULTS_DIR": str(folder / "corral_results")}
    proc = subprocess.run(
        [sys.executable, "script.py", str(folder / "ckpt")], capture_output=True, text=True, cwd=folder, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(next(line for line in proc.stdout.splitlines() if line.startswith("CHECKPOINT ")).split(" ", 1)[1])


def mapped_policies(algo: Algorithm) -> dict[int, str]:
    mapping = algo.config.policy_mapping_fn
    return {agent: mapping(agent, None) for agent in (0, 1)}


# before any test here loads the checkpoint with trust_code: once this process has unpickled the script's lambda, it
# is this process's own object, and the checkpoint reopens with it (nothing more is unpickled)
def test_without_trust_code_the_error_names_what_to_pass_and_passing_it_loads(readme_checkpoint, restored_algos) -> None:
    with pytest.raises(CheckpointError, match=r"'__main__:<lambda>' \(policy_mapping_fn\) by value") as info:
        Algorithm.from_checkpoint(readme_checkpoint)
    assert "from_checkpoint(path, policy_mapping_fn=...)" in str(info.value) and "trust_code=True" in str(info.value)
    algo = Algorithm.from_checkpoint(readme_checkpoint, policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id}")
    restored_algos.append(algo)
    assert mapped_policies(algo) == {0: "p0", 1: "p1"}  # the make_multi_agent env needed nothing passed
    assert algo.train()["training_iteration"] == 2


def test_the_readme_multi_agent_example_reopens_with_trust_code(readme_checkpoint, restored_algos) -> None:
    config = json.loads((readme_checkpoint / "config.json").read_text())
    assert config["env"] == "corral.core.environments.multi_agent_env:MultiAgent[CartPole-v1]"  # resolved, not imported
    assert config["policy_mapping_fn"] == "__main__:<lambda>" and "__main__:<lambda>" in config["__corral_by_value__"]
    algo = Algorithm.from_checkpoint(readme_checkpoint, trust_code=True)
    restored_algos.append(algo)
    assert mapped_policies(algo) == {0: "p1", 1: "p0"}  # the script's own lambda
    assert algo.train()["training_iteration"] == 2 and set(algo.policies) == {"p0", "p1"}


def test_a_ray_checkpoint_object_or_anything_with_a_path_opens(readme_checkpoint, restored_algos) -> None:
    from ray.tune import Checkpoint

    for checkpoint in (Checkpoint.from_directory(str(readme_checkpoint)), types.SimpleNamespace(path=readme_checkpoint)):
        algo = Algorithm.from_checkpoint(checkpoint, trust_code=True)
        restored_algos.append(algo)
        assert algo.iteration == 1
    with pytest.raises(CheckpointError, match=r"a folder's path or an object with a \.path"):
        Algorithm.from_checkpoint(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["PPO", "DQN", "PPO-multi-agent"])
def test_from_state_of_get_state_goes_on_exactly_as_the_algorithm_would(name, make_algo, restored_algos) -> None:
    algo = make_algo(configure(name))
    algo.train()
    state = algo.get_state()
    assert state["algorithm_class"] is type(algo) and state["config"] is algo.config and state["iteration"] == 1
    assert set(state["policy_states"]) == set(algo.policies)
    going_on = [json.loads(json.dumps(deterministic(algo.train()), default=str)) for _ in range(2)]
    twin = Algorithm.from_state(state)  # taken before those two iterations: they did not change it
    restored_algos.append(twin)
    assert type(twin) is type(algo) and twin.iteration == 1
    resumed = [json.loads(json.dumps(deterministic(twin.train()), default=str)) for _ in range(2)]
    same(going_on, resumed, "results")
    same(weights_as_lists(algo), weights_as_lists(twin), "weights")


def test_from_state_refuses_what_get_state_did_not_return(make_algo) -> None:
    with pytest.raises(CheckpointError, match=r"needs what Algorithm\.get_state\(\) returns"):
        Algorithm.from_state({"iteration": 3})
    state = make_algo(configure("DQN")).get_state()
    with pytest.raises(CheckpointError, match="the state is of DQN, not PPO"):
        PPO.from_state(state)


def test_overrides_checks_options_at_once_and_fits_where_rllib_uses_it(make_algo) -> None:
    assert PPOConfig.overrides(explore=False, lambda_=0.9) == {"explore": False, "lambda_": 0.9}
    with pytest.raises(ConfigError, match="Did you mean 'explore'"):
        PPOConfig.overrides(explor=False)
    with pytest.raises(ConfigError, match="lr"):
        PPOConfig.overrides(lr=-1.0)
    config = (
        corral.get_config("PPO")
        .environment("corral.testing.envs:MultiAgentCartPole", env_config={"num_agents": 2})
        .multi_agent(
            policies={"p0": PolicySpec(config=PPOConfig.overrides(lr=1e-4)), "p1": None},
            policy_mapping_fn="corral.core.contracts.multi_agent_config:policy_per_agent",
        )
        .evaluation(evaluation_interval=1, evaluation_duration=1, evaluation_config=PPOConfig.overrides(explore=False))
        .training(train_batch_size=128, minibatch_size=64, num_epochs=1)
    )
    result = make_algo(config).train()
    assert result["info"]["learner"]["p0"]["learner_stats"]["cur_lr"] == 1e-4 and "evaluation" in result


def test_from_checkpoint_takes_rllib_s_keyword_names_once(readme_checkpoint, restored_algos) -> None:
    for given in ({"checkpoint": readme_checkpoint}, {"path": readme_checkpoint}):
        algo = Algorithm.from_checkpoint(**given, trust_code=True)
        restored_algos.append(algo)
        assert algo.iteration == 1
    with pytest.raises(TypeError, match=r"takes the checkpoint once"):
        Algorithm.from_checkpoint(readme_checkpoint, path=readme_checkpoint)
    with pytest.raises(TypeError, match=r"takes the checkpoint once"):
        Algorithm.from_checkpoint()
