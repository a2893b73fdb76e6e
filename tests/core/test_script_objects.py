"""What a user's script defines survives a checkpoint.

A checkpoint is written by a script run in a subprocess (so its mapping
function truly lives in that script) and opened here, in another process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from corral import Algorithm, CheckpointError

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
"""the README's multi-agent example, saved (its lambda maps agent 0 to p1, as no importable function here does)"""


@pytest.fixture(scope="module")
def readme_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("readme")
    (folder / "script.py").write_text(README_MULTI_AGENT, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "script.py", str(folder / "ckpt")], capture_output=True, text=True, cwd=folder, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(next(line for line in proc.stdout.splitlines() if line.startswith("CHECKPOINT ")).split(" ", 1)[1])


def mapped_policies(algo: Algorithm) -> dict[int, str]:
    mapping = algo.config.policy_mapping_fn
    return {agent: mapping(agent, None) for agent in (0, 1)}


def test_the_readme_multi_agent_example_reopens_with_trust_code(readme_checkpoint, restored_algos) -> None:
    config = json.loads((readme_checkpoint / "config.json").read_text())
    assert config["env"] == "corral.core.environments.multi_agent_env:MultiAgent[CartPole-v1]"  # resolved, not imported
    assert config["policy_mapping_fn"] == "__main__:<lambda>" and "__main__:<lambda>" in config["__corral_by_value__"]
    algo = Algorithm.from_checkpoint(readme_checkpoint, trust_code=True)
    restored_algos.append(algo)
    assert mapped_policies(algo) == {0: "p1", 1: "p0"}  # the script's own lambda
    assert algo.train()["training_iteration"] == 2 and set(algo.policies) == {"p0", "p1"}


def test_without_trust_code_the_error_names_what_to_pass_and_passing_it_loads(readme_checkpoint, restored_algos) -> None:
    with pytest.raises(CheckpointError, match=r"'__main__:<lambda>' \(policy_mapping_fn\) by value") as info:
        Algorithm.from_checkpoint(readme_checkpoint)
    assert "from_checkpoint(path, policy_mapping_fn=...)" in str(info.value) and "trust_code=True" in str(info.value)
    algo = Algorithm.from_checkpoint(readme_checkpoint, policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id}")
    restored_algos.append(algo)
    assert mapped_policies(algo) == {0: "p0", 1: "p1"}  # the make_multi_agent env needed nothing passed
    assert algo.train()["training_iteration"] == 2


def test_a_ray_checkpoint_object_or_anything_with_a_path_opens(readme_checkpoint, restored_algos) -> None:
    from ray.tune import Checkpoint

    for checkpoint in (Checkpoint.from_directory(str(readme_checkpoint)), types.SimpleNamespace(path=readme_checkpoint)):
        algo = Algorithm.from_checkpoint(checkpoint, trust_code=True)
        restored_algos.append(algo)
        assert algo.iteration == 1
    with pytest.raises(CheckpointError, match=r"a folder's path or an object with a \.path"):
        Algorithm.from_checkpoint(42)  # type: ignore[arg-type]
