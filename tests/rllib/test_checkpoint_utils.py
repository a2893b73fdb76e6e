"""RLlib's save-then-reload scripts: a checkpoint reopens in the process that saved it, and converts to one without pickles.

RLlib's documentation saves a multi-agent algorithm whose ``policy_mapping_fn``
is a lambda and reopens it with ``Algorithm.from_checkpoint(path)`` in the
same script; ``convert_to_msgpack_checkpoint`` copies a checkpoint into one
that holds no pickle.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corral import Algorithm, CheckpointError, make_multi_agent
from corral.plugins.ppo import PPOConfig
from corral.rllib.utils.checkpoints import convert_to_msgpack_checkpoint

from ..core.test_exact_resume import weights_as_lists


@pytest.fixture
def saved(make_algo, tmp_path: Path) -> tuple[Algorithm, Path]:
    """A two-policy PPO, its mapping function a lambda of this script, trained one iteration and saved."""
    config = (
        PPOConfig()
        .environment(make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
        .multi_agent(policies={"pol0", "pol1"}, policy_mapping_fn=lambda agent_id, episode, **kw: f"pol{agent_id}")
        .training(train_batch_size=128, minibatch_size=64, num_epochs=1)
        .debugging(seed=0)
    )
    algo = make_algo(config)
    algo.train()
    return algo, Path(algo.save(tmp_path / "ckpt"))


def test_the_saving_process_reopens_its_own_lambda_without_trust_code(saved, restored_algos) -> None:
    algo, path = saved
    clone = Algorithm.from_checkpoint(path)
    restored_algos.append(clone)
    assert clone.config.policy_mapping_fn is algo.config.policy_mapping_fn  # the script's own object, nothing unpickled
    assert weights_as_lists(clone) == weights_as_lists(algo)


def test_a_pickle_this_process_did_not_write_is_still_refused(saved) -> None:
    _, path = saved
    config = json.loads((path / "config.json").read_text())
    name = config["policy_mapping_fn"]
    config["__corral_by_value__"][name] = "gASVAAAAAAAAAAA="  # another pickle under the same name
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"<lambda>.* \(policy_mapping_fn\) by value"):
        Algorithm.from_checkpoint(path)


def test_a_converted_checkpoint_holds_no_pickle_and_asks_for_the_function_again(saved, tmp_path, restored_algos) -> None:
    algo, path = saved
    (tmp_path / "converted").mkdir()  # RLlib's documentation converts into an empty temporary folder
    copy = Path(convert_to_msgpack_checkpoint(path, tmp_path / "converted"))
    config = json.loads((copy / "config.json").read_text())
    name = json.loads((path / "config.json").read_text())["policy_mapping_fn"]
    assert "__corral_by_value__" not in config and config["policy_mapping_fn"] == name and "<lambda>" in name
    with pytest.raises(CheckpointError, match=r"<lambda>.* \(policy_mapping_fn\).*policy_mapping_fn=\.\.\."):
        Algorithm.from_checkpoint(copy)
    clone = Algorithm.from_checkpoint(copy, policy_mapping_fn=algo.config.policy_mapping_fn)
    restored_algos.append(clone)
    assert weights_as_lists(clone) == weights_as_lists(algo) and clone.iteration == algo.iteration
    assert (path / "config.json").is_file()  # the original is untouched


def test_converting_into_a_folder_of_other_files_is_refused_and_leaves_them(saved, tmp_path) -> None:
    _, path = saved
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(CheckpointError, match=r"holds files that are not a checkpoint"):
        convert_to_msgpack_checkpoint(path, tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    with pytest.raises(CheckpointError, match=r"does not exist"):
        convert_to_msgpack_checkpoint(tmp_path / "nothing", tmp_path / "out")
