"""export_policy_model: TorchScript, torch.export and ONNX files that act as compute_single_action(explore=False)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import corral
from corral import CheckpointError, ConfigError, Policy, make_multi_agent
from corral.core.persistence.policy_export import leaf_values
from tests.toy_envs import DictObsEnv, ImageEnv, MaskedChoiceEnv, TupleObsEnv

# torch 2.13 deprecates TorchScript; corral writes it while torch can, and these tests load it on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")

# Runs the exported files in a fresh interpreter that refuses to import corral.
WITHOUT_CORRAL = textwrap.dedent("""
    import json
    import sys

    class NoCorral:
        def find_spec(self, name, path=None, target=None):
            if name == "corral" or name.startswith("corral."):
                raise ImportError("the exported model must run without corral")
            return None

    sys.meta_path.insert(0, NoCorral())
    import numpy as np
    import torch

    import onnxruntime

    folder, arrays = sys.argv[1], np.load(sys.argv[2])
    names = [item["name"] for item in json.load(open(f"{folder}/model.json"))["inputs"]]
    tensors = [torch.as_tensor(arrays[name]) for name in names]
    actions, inputs = torch.jit.load(f"{folder}/model.pt")(*tensors)
    np.save(f"{folder}/torchscript_actions.npy", actions.numpy())
    actions, inputs = torch.export.load(f"{folder}/model.pt2").module()(*tensors)
    np.save(f"{folder}/export_actions.npy", actions.numpy())
    one_row, _ = torch.export.load(f"{folder}/model.pt2").module()(*[t[:1] for t in tensors])  # any batch size
    assert torch.allclose(one_row.double(), actions[:1].double(), rtol=0, atol=1e-5)  # a batch of 1 as the row of 1,000
    session = onnxruntime.InferenceSession(f"{folder}/model.onnx")
    np.save(f"{folder}/onnx_actions.npy", session.run(["actions"], {name: arrays[name] for name in names})[0])
    assert not any(name.split(".")[0] == "corral" for name in sys.modules)
""")


def run_without_corral(script: str, *arguments: Path) -> None:
    """Run a script in a fresh interpreter whose path holds no corral; it must succeed."""
    proc = subprocess.run(
        [sys.executable, "-c", script, *map(str, arguments)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert proc.returncode == 0, proc.stderr


CASES = {
    "PPO CartPole (Discrete, filtered)": ("PPO", "CartPole-v1", {"observation_filter": "MeanStdFilter", "minibatch_size": 64}),
    "SAC Pendulum (Box)": ("SAC", "Pendulum-v1", {}),
    "PPO images (CNN)": ("PPO", ImageEnv, {"minibatch_size": 64, "model": {"conv_filters": [[8, 3, 1], [16, 3, 1]]}}),
    "PPO Dict observations, Box actions (filtered)": (
        "PPO",
        DictObsEnv,
        {"minibatch_size": 64, "observation_filter": "MeanStdFilter"},
    ),
    "PPO an action mask (Dict with a mask)": ("PPO", MaskedChoiceEnv, {"minibatch_size": 64}),
    "PPO Tuple observations": ("PPO", TupleObsEnv, {"minibatch_size": 64}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_exported_model_acts_as_the_policy_in_a_process_without_corral(case: str, tmp_path: Path) -> None:
    name, env, options = CASES[case]
    algo = (
        corral.get_config(name).environment(env).update_from_dict({"train_batch_size": 64, **options}).debugging(seed=0).build()
    )
    algo.train()
    path = algo.export_policy_model(tmp_path / "export", onnx=17)
    space = algo.get_policy().observation_space
    space.seed(0)
    observations = [space.sample() for _ in range(1000)]
    expected = np.stack([np.asarray(algo.compute_single_action(obs, explore=False)) for obs in observations])
    algo.stop()
    names = [item["name"] for item in json.loads((tmp_path / "export" / "model.json").read_text())["inputs"]]
    leaves = [leaf_values(space, obs) for obs in observations]
    np.savez(tmp_path / "obs.npz", **{n: np.stack([np.asarray(obs[i]) for obs in leaves]) for i, n in enumerate(names)})
    run_without_corral(WITHOUT_CORRAL, path.parent, tmp_path / "obs.npz")
    for runtime in ("torchscript", "export", "onnx"):
        actions = np.load(path.parent / f"{runtime}_actions.npy")
        assert actions.shape == expected.shape and actions.dtype.kind == expected.dtype.kind, runtime
        if expected.dtype.kind == "f":
            np.testing.assert_allclose(actions, expected, rtol=0, atol=1e-5, err_msg=runtime)  # 1 row against 1,000
        else:
            np.testing.assert_array_equal(actions, expected, err_msg=runtime)
    description = json.loads((tmp_path / "export" / "model.json").read_text())
    assert description["policy_id"] == "default_policy" and description["onnx_opset"] == 17


def test_a_structured_observation_is_one_input_per_array_named_by_its_path(tmp_path: Path) -> None:
    algo = corral.get_config("PPO").environment(MaskedChoiceEnv).training(train_batch_size=64, minibatch_size=64).build()
    algo.export_policy_model(tmp_path / "export")
    algo.stop()
    inputs = json.loads((tmp_path / "export" / "model.json").read_text())["inputs"]
    # in the Dict's own order (gymnasium sorts its keys)
    assert [(i["name"], i["dtype"]) for i in inputs] == [("obs.action_mask", "int8"), ("obs.observation", "float32")]
    only_action_2 = torch.tensor([[0, 0, 1, 0, 0, 0]], dtype=torch.int8)
    exported = tmp_path / "export"
    for model in (torch.jit.load(str(exported / "model.pt")), torch.export.load(exported / "model.pt2").module()):
        actions, _ = model(only_action_2, torch.ones(1, 6))
        assert actions.tolist() == [2]  # the mask decides: the one legal action


def test_rllib_s_policy_export_model_writes_the_files_of_export_policy_model(tmp_path: Path) -> None:
    algo = corral.get_config("PPO").environment("CartPole-v1").training(train_batch_size=64, minibatch_size=64).build()
    try:
        algo.get_policy().export_model(tmp_path / "by_policy", onnx=False)  # RLlib's scripts pass False for none
        algo.export_policy_model(tmp_path / "by_algo")
    finally:
        algo.stop()
    assert json.loads((tmp_path / "by_policy" / "model.json").read_text()) == json.loads(
        (tmp_path / "by_algo" / "model.json").read_text()
    )
    assert not (tmp_path / "by_policy" / "model.onnx").exists()
    obs = torch.tensor([[0.01, -0.02, 0.03, 0.04]])
    actions = [torch.export.load(tmp_path / name / "model.pt2").module()(obs)[0] for name in ("by_policy", "by_algo")]
    assert torch.equal(actions[0], actions[1])


def test_corral_export_writes_the_model_from_a_checkpoint(run_cli: Any, tmp_path: Path) -> None:
    algo = corral.get_config("PPO").environment("CartPole-v1").training(train_batch_size=64, minibatch_size=64).build()
    checkpoint = algo.save(str(tmp_path / "checkpoint"))
    algo.stop()
    proc = run_cli("export", checkpoint, "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert "Wrote" in proc.stdout and (tmp_path / "out" / "model.pt").is_file()


def test_onnx_true_as_rllib_s_documentation_writes_it_exports_with_the_default_opset_and_says_which(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    algo = corral.get_config("PPO").environment("CartPole-v1").training(train_batch_size=64, minibatch_size=64).build()
    with caplog.at_level(logging.INFO, logger="corral"):
        algo.get_policy().export_model(tmp_path / "export", onnx=True)
    algo.stop()
    assert json.loads((tmp_path / "export" / "model.json").read_text())["onnx_opset"] == 17
    assert (tmp_path / "export" / "model.onnx").is_file()
    assert any("onnx=True: model.onnx is written with opset 17" in r.getMessage() for r in caplog.records)


def test_an_onnx_opset_torch_cannot_write_or_a_missing_onnx_package_is_refused_before_any_file(
    tmp_path: Path, hide_package: Callable[[str], None]
) -> None:
    algo = corral.get_config("PPO").environment("CartPole-v1").training(train_batch_size=64, minibatch_size=64).build()
    with pytest.raises(ConfigError, match=r"onnx=99 is not an ONNX opset torch writes; use one of 9\.\.20"):
        algo.export_policy_model(tmp_path / "export", onnx=99)
    hide_package("onnx")
    with pytest.raises(ConfigError, match=r"pip install 'corral\[onnx\]'"):
        algo.export_policy_model(tmp_path / "export", onnx=17)
    algo.stop()
    assert not (tmp_path / "export").exists()


def test_a_policy_checkpoint_holds_one_policy_that_loads_alone(tmp_path: Path) -> None:
    algo = (
        corral.get_config("PPO")
        .environment(make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
        .training(train_batch_size=64, minibatch_size=64)
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, episode, **kw: f"p{agent_id}")
        .debugging(seed=0)
        .build()
    )
    algo.train()
    checkpoint = algo.export_policy_checkpoint(tmp_path / "p1", policy_id="p1")
    obs = np.array([0.01, -0.02, 0.03, 0.04], np.float32)
    expected = algo.compute_single_action(obs, explore=False, policy_id="p1")
    weights = algo.get_weights(["p1"])["p1"]
    algo.stop()
    policy = Policy.from_checkpoint(checkpoint, "p1")
    assert policy.compute_single_action(obs, explore=False)[0] == expected
    assert all(np.array_equal(policy.get_weights()[k], weights[k]) for k in weights)
    with pytest.raises(CheckpointError, match="'p0'"):
        Policy.from_checkpoint(checkpoint, "p0")


def test_checkpoints_carry_native_model_files_when_asked_and_still_restore(tmp_path: Path) -> None:
    config = (
        corral.get_config("PPO")
        .environment("CartPole-v1")
        .training(train_batch_size=64, minibatch_size=64)
        .checkpointing(export_native_model_files=True)
    )
    algo = config.build()
    checkpoint = Path(algo.save(str(tmp_path / "checkpoint")))
    algo.stop()
    folder = checkpoint / "policies" / "default_policy"
    for model in (torch.jit.load(str(folder / "model.pt")), torch.export.load(folder / "model.pt2").module()):
        actions, _ = model(torch.zeros(3, 4))
        assert actions.shape == (3,)
    restored = corral.Algorithm.from_checkpoint(checkpoint)
    restored.train()
    restored.stop()


def test_corral_export_refuses_a_bad_opset_before_loading_the_checkpoint(run_cli: Any, tmp_path: Path) -> None:
    algo = corral.get_config("PPO").environment("CartPole-v1").training(train_batch_size=64, minibatch_size=64).build()
    checkpoint = algo.save(str(tmp_path / "checkpoint"))
    algo.stop()
    proc = run_cli("export", checkpoint, "--out", str(tmp_path / "out"), "--onnx", "3")
    assert proc.returncode != 0 and "onnx=3 is not an ONNX opset" in proc.stderr
    assert not (tmp_path / "out").exists()
    proc = run_cli("export", checkpoint, "--out", str(tmp_path / "out"), "--onnx", "17")
    assert proc.returncode == 0, proc.stderr
    assert {"model.pt", "model.onnx", "model.json"} <= {f.name for f in (tmp_path / "out").iterdir()}


# Steps a CartPole episode with each exported file of a recurrent policy, carrying its state, in a process without corral.
RECURRENT_EPISODE = WITHOUT_CORRAL.split("folder, arrays")[0] + textwrap.dedent("""
    import gymnasium as gym

    folder = sys.argv[1]
    inputs = json.load(open(f"{folder}/model.json"))["inputs"]
    runtimes = {
        "torchscript": torch.jit.load(f"{folder}/model.pt"),
        "export": torch.export.load(f"{folder}/model.pt2").module(),
        "onnx": onnxruntime.InferenceSession(f"{folder}/model.onnx"),
    }
    for runtime, model in runtimes.items():
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=7)
        state = [np.zeros([1, *item["shape"]], np.float32) for item in inputs if item["name"].startswith("state_in_")]
        prev_action, prev_reward, actions = np.zeros(1, np.int64), np.zeros(1, np.float32), []
        for _ in range(60):
            feed = [obs[None].astype(np.float32), *state, prev_action, prev_reward]
            if runtime == "onnx":
                out = model.run(None, {item["name"]: value for item, value in zip(inputs, feed)})
            else:
                out = [t.numpy() for t in model(*[torch.as_tensor(value) for value in feed])]
            action, state = int(out[0][0]), list(out[2:])
            actions.append(action)
            obs, reward, terminated, truncated, _ = env.step(action)
            prev_action, prev_reward = np.array([action]), np.array([reward], np.float32)
            if terminated or truncated:
                break
        np.save(f"{folder}/{runtime}_actions.npy", np.array(actions))
    assert not any(name.split(".")[0] == "corral" for name in sys.modules)
""")


MEMORIES = {
    "lstm": {"use_lstm": True, "lstm_cell_size": 16, "lstm_use_prev_action": True, "lstm_use_prev_reward": True},
    "attention": {
        "use_attention": True,
        "attention_dim": 16,
        "attention_memory_inference": 8,
        "attention_memory_training": 8,
        "attention_use_n_prev_actions": 1,
        "attention_use_n_prev_rewards": 1,
    },
}
STATE_INPUTS = {"lstm": ["state_in_0", "state_in_1"], "attention": ["state_in_0"]}


@pytest.mark.parametrize("memory", MEMORIES)
def test_an_exported_recurrent_policy_steps_an_episode_as_compute_single_action_does(memory: str, tmp_path: Path) -> None:
    model = MEMORIES[memory]
    algo = (
        corral.get_config("PPO").environment("CartPole-v1").training(train_batch_size=64, model=model).debugging(seed=0).build()
    )
    algo.train()
    path = algo.export_policy_model(tmp_path / "export", onnx=17)
    env = __import__("gymnasium").make("CartPole-v1")
    obs, _ = env.reset(seed=7)
    state, prev_action, prev_reward, expected = algo.get_policy().get_initial_state(), 0, 0.0, []
    for _ in range(60):
        action, state, _ = algo.compute_single_action(obs, state, prev_action=prev_action, prev_reward=prev_reward, explore=False)
        expected.append(action)
        obs, prev_reward, terminated, truncated, _ = env.step(action)
        prev_action = action
        if terminated or truncated:
            break
    algo.stop()
    names = [item["name"] for item in json.loads((path.parent / "model.json").read_text())["inputs"]]
    assert names == ["obs", *STATE_INPUTS[memory], "prev_actions", "prev_rewards"]
    run_without_corral(RECURRENT_EPISODE, path.parent)
    for runtime in ("torchscript", "export", "onnx"):
        np.testing.assert_array_equal(np.load(path.parent / f"{runtime}_actions.npy"), expected, err_msg=runtime)
