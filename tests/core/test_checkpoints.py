"""Checkpoints: the round trip, the folder layout, safety against tampered files, atomic writes, clear errors."""

from __future__ import annotations

import json
import pathlib
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import corral
from corral import Algorithm, CheckpointError
from corral.core.persistence import checkpoints
from corral.plugins.ppo import PPO, PPOConfig

from ..conftest import small_ppo_config


def tensors_equal(a: Any, b: Any, where: str = "") -> None:
    """Assert two nested structures of tensors/numbers/dicts/lists are equal."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            tensors_equal(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            tensors_equal(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), where
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=where)
    else:
        assert a == b, where


@pytest.fixture
def trained(make_algo) -> Any:
    """A PPO trained for two iterations."""
    algo = make_algo()
    algo.train()
    algo.train()
    return algo


@pytest.fixture
def checkpoint(trained, tmp_path) -> Path:
    """A checkpoint of ``trained``, in its own folder."""
    return Path(trained.save(tmp_path / "ckpt"))


def load(path: Any, restored_algos: list[Any], **kwargs: Any) -> Any:
    algo = Algorithm.from_checkpoint(path, **kwargs)
    restored_algos.append(algo)
    return algo


# ---------------------------------------------------------------------- #
# round trip
# ---------------------------------------------------------------------- #
def test_from_checkpoint_restores_everything_and_training_continues(trained, checkpoint, restored_algos) -> None:
    policy = trained.get_policy()
    policy.kl_coeff = 0.123  # something other than the config default, to see it travel
    path = Path(trained.save(checkpoint))  # same path again: overwritten in place

    algo = load(path, restored_algos)
    assert type(algo) is PPO
    assert algo.iteration == trained.iteration == 2
    assert algo.counters == trained.counters
    assert algo.config.to_dict() == trained.config.to_dict()

    original, copy = trained.get_weights()["default_policy"], algo.get_weights()["default_policy"]
    assert original.keys() == copy.keys()
    for name in original:
        np.testing.assert_array_equal(original[name], copy[name], err_msg=name)
    tensors_equal(policy.optimizer.state_dict(), algo.get_policy().optimizer.state_dict(), "optimizer")
    assert algo.get_policy().optimizer.state_dict()["state"], "the Adam moments were restored, not empty"
    assert algo.get_policy().kl_coeff == pytest.approx(0.123)
    assert algo.get_policy().global_timestep == policy.global_timestep

    result = algo.train()
    assert result["training_iteration"] == 3
    assert result["num_env_steps_sampled"] > trained.counters["num_env_steps_sampled"]
    assert result["episodes_total"] >= trained.history.total


def test_restore_into_an_existing_algorithm(trained, checkpoint, make_algo) -> None:
    fresh = make_algo(seed=5)
    fresh.restore(checkpoint)
    assert fresh.iteration == 2
    for name, value in trained.get_weights()["default_policy"].items():
        np.testing.assert_array_equal(value, fresh.get_weights()["default_policy"][name])


def test_checkpoint_folder_layout(trained, checkpoint) -> None:
    assert sorted(p.name for p in checkpoint.iterdir()) == [
        "algorithm_state.json", "config.json", "corral_checkpoint.json", "policies",
    ]  # fmt: skip
    meta = json.loads((checkpoint / "corral_checkpoint.json").read_text())
    assert meta["format_version"] == checkpoints.FORMAT_VERSION
    assert meta["algorithm"] == "PPO"
    assert meta["distribution"] == "corral"
    assert meta["corral_version"] == corral.__version__

    config = json.loads((checkpoint / "config.json").read_text())
    assert PPOConfig.from_dict(config).to_dict() == trained.config.to_dict()

    state = json.loads((checkpoint / "algorithm_state.json").read_text())
    assert state["iteration"] == 2
    assert state["counters"]["num_env_steps_sampled"] == trained.counters["num_env_steps_sampled"]

    policy_file = checkpoint / "policies" / "default_policy" / "policy_state.pt"
    assert policy_file.is_file()
    # Tensors only: loadable with weights_only=True.
    state = torch.load(policy_file, weights_only=True)
    assert {"weights", "optimizer"} <= set(state)


def test_save_into_the_experiment_folder_by_default(trained) -> None:
    saved = trained.save()
    path = Path(saved)
    assert path.parent == Path(trained.logdir).resolve()
    assert path.name == "checkpoint_000002"
    # read as Ray 2.7+'s save() result too: algo.save().checkpoint.path, with the latest result as its metrics
    assert saved.checkpoint.path == str(path) and type(saved.checkpoint.path) is str
    assert saved.metrics["training_iteration"] == 2
    assert pickle.loads(pickle.dumps(saved)) == saved


def test_mean_std_filter_survives_a_round_trip(make_algo, tmp_path, restored_algos) -> None:
    config = small_ppo_config().env_runners(observation_filter="MeanStdFilter")
    algo = make_algo(config)
    algo.train()
    filt = algo.get_policy().observation_filter
    assert filt is not None and filt.count > 0
    assert not np.allclose(filt.mean, 0.0)

    copy = load(algo.save(tmp_path / "ckpt"), restored_algos).get_policy().observation_filter
    assert copy is not None
    np.testing.assert_array_equal(copy.mean, filt.mean)
    np.testing.assert_array_equal(copy.var, filt.var)
    assert copy.count == filt.count
    obs = np.array([[0.1, -0.2, 0.03, 0.4]], dtype=np.float32)
    np.testing.assert_array_equal(copy(obs, update=False), filt(obs, update=False))


# ---------------------------------------------------------------------- #
# loading never runs code
# ---------------------------------------------------------------------- #
class _Payload:
    """Unpickling this touches a marker file: what a malicious checkpoint would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_tampered_policy_file_raises_and_runs_no_code(checkpoint, tmp_path) -> None:
    marker = tmp_path / "pwned"
    evil = {"weights": _Payload(marker)}

    # The payload is live: an unsafe load does run it.
    probe = tmp_path / "probe.pt"
    torch.save(evil, probe)
    torch.load(probe, weights_only=False)
    assert marker.exists()
    marker.unlink()

    torch.save(evil, checkpoint / "policies" / "default_policy" / "policy_state.pt")
    with pytest.raises(CheckpointError, match=r"policy_state\.pt"):
        Algorithm.from_checkpoint(checkpoint)
    assert not marker.exists()


def test_corrupt_policy_file_raises_checkpoint_error(checkpoint) -> None:
    (checkpoint / "policies" / "default_policy" / "policy_state.pt").write_bytes(b"not a zip file")
    with pytest.raises(CheckpointError, match=r"policy_state\.pt"):
        Algorithm.from_checkpoint(checkpoint)


# ---------------------------------------------------------------------- #
# errors that say which
# ---------------------------------------------------------------------- #
def edit_meta(checkpoint: Path, **changes: Any) -> None:
    file = checkpoint / "corral_checkpoint.json"
    meta = json.loads(file.read_text())
    meta.update(changes)
    file.write_text(json.dumps(meta))


def test_newer_format_version_asks_to_upgrade(checkpoint) -> None:
    edit_meta(checkpoint, format_version=999)
    with pytest.raises(CheckpointError, match="upgrade") as info:
        Algorithm.from_checkpoint(checkpoint)
    assert "999" in str(info.value)


def test_missing_algorithm_plugin_is_named(checkpoint) -> None:
    edit_meta(checkpoint, algorithm="NoSuchAlgo", algorithm_class="nosuch.module:X")
    with pytest.raises(CheckpointError, match="NoSuchAlgo") as info:
        Algorithm.from_checkpoint(checkpoint)
    assert "not installed" in str(info.value)


def test_other_observation_space_is_named(checkpoint) -> None:
    with pytest.raises(CheckpointError, match="observation_space") as info:
        Algorithm.from_checkpoint(checkpoint, env="Acrobot-v1")
    assert "Box" in str(info.value)


def test_restore_into_another_algorithm_class_is_refused(checkpoint, make_algo) -> None:
    from corral.plugins.ppo import PPOPolicy

    class NotPPO(corral.Algorithm):
        config_class = PPOConfig
        policy_class = PPOPolicy
        name = "NotPPO"

    other = NotPPO(config=small_ppo_config())
    try:
        with pytest.raises(CheckpointError, match="PPO"):
            other.restore(checkpoint)
    finally:
        other.stop()
        # NotPPO's definition made itself PPOConfig's algo class only if PPO had not; check it did not.
        assert PPOConfig.algo_class is PPO


def test_nonexistent_path_raises(tmp_path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        Algorithm.from_checkpoint(tmp_path / "nowhere")


def test_folder_that_is_not_a_checkpoint_raises(tmp_path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello")
    with pytest.raises(CheckpointError, match="not a corral checkpoint"):
        Algorithm.from_checkpoint(folder)


def test_missing_policy_file_raises(checkpoint) -> None:
    (checkpoint / "policies" / "default_policy" / "policy_state.pt").unlink()
    with pytest.raises(CheckpointError, match=r"policy_state\.pt"):
        Algorithm.from_checkpoint(checkpoint)


def test_invalid_json_raises(checkpoint) -> None:
    (checkpoint / "algorithm_state.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"algorithm_state\.json"):
        Algorithm.from_checkpoint(checkpoint)


# ---------------------------------------------------------------------- #
# atomic writes
# ---------------------------------------------------------------------- #
def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


def test_saving_twice_to_one_path_leaves_one_complete_checkpoint(trained, tmp_path, restored_algos) -> None:
    target = tmp_path / "ckpt"
    trained.save(target)
    trained.train()
    trained.save(target)

    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "corral_results") == ["ckpt"]
    assert not leftovers(tmp_path)
    assert json.loads((target / "algorithm_state.json").read_text())["iteration"] == 3
    assert load(target, restored_algos).iteration == 3


def test_crash_while_writing_keeps_the_previous_checkpoint(trained, tmp_path, monkeypatch, restored_algos) -> None:
    target = tmp_path / "ckpt"
    trained.save(target)
    before = {p.relative_to(target): p.read_bytes() for p in target.rglob("*") if p.is_file()}
    trained.train()

    def crash(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        trained.save(target)
    monkeypatch.undo()

    after = {p.relative_to(target): p.read_bytes() for p in target.rglob("*") if p.is_file()}
    assert after == before
    assert not leftovers(tmp_path)
    assert load(target, restored_algos).iteration == 2


def test_crash_on_a_first_save_leaves_nothing(trained, tmp_path, monkeypatch) -> None:
    def crash(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError):
        trained.save(tmp_path / "ckpt")
    assert not (tmp_path / "ckpt").exists()
    assert not leftovers(tmp_path)


def test_a_checkpoint_loads_its_algorithm_from_the_distribution_it_records(
    checkpoint, tmp_path, monkeypatch, restored_algos
) -> None:
    """A second distribution providing 'PPO' makes the name ambiguous, but not the checkpoint: it records 'corral'."""
    import corral.registry as registry
    from corral import PluginLoadError

    from ..registry.conftest import PluginEnv

    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    plugins = PluginEnv(site)
    plugins.add_dist(
        "corral-fastppo",
        entry_points={"corral.algorithms": {"PPO": "fake_fastppo:PPO"}},
        modules={"fake_fastppo": "raise ImportError('the other PPO must not be imported')\n"},
    )
    registry.refresh()
    try:
        with pytest.raises(PluginLoadError, match="corral-fastppo"):
            corral.get_algorithm("PPO")
        algo = load(checkpoint, restored_algos)
        assert type(algo) is PPO and algo.iteration == 2
    finally:
        registry.refresh()
        plugins.forget_modules()


def test_rllib_s_checkpointable_names_save_and_restore_the_same_checkpoint(trained, make_algo, tmp_path) -> None:
    path = trained.save_to_path(tmp_path / "ckpt")
    assert type(path) is str and (Path(path) / "algorithm_state.json").is_file()
    fresh = make_algo(trained.config.copy(copy_frozen=False))
    fresh.restore_from_path(path)
    assert fresh.iteration == trained.iteration
    with pytest.raises(TypeError, match=r"save_to_path\(\) takes a path only.*use_msgpack is not taken"):
        trained.save_to_path(tmp_path / "other", use_msgpack=True)
    with pytest.raises(CheckpointError, match=r"component 'learner_group' is not one corral restores alone.*rl_module"):
        fresh.restore_from_path(path, component="learner_group")
    with pytest.raises(TypeError, match=r"filesystem is not taken"):
        fresh.restore_from_path(path, filesystem="s3")


def same_weights(algo: Any, other: Any) -> None:
    for name, value in other.get_weights()["default_policy"].items():
        np.testing.assert_array_equal(algo.get_weights()["default_policy"][name], value, err_msg=name)


def test_restore_from_path_with_rllib_s_rl_module_component_loads_the_models_alone(trained, make_algo, tmp_path) -> None:
    """RLlib's restore_from_path(path, component=COMPONENT_RL_MODULE): the weights, not the counters or optimizer."""
    from corral.rllib.core import COMPONENT_LEARNER, COMPONENT_LEARNER_GROUP, COMPONENT_RL_MODULE

    path = trained.save(tmp_path / "ckpt")
    fresh = make_algo(trained.config.copy(copy_frozen=False))
    fresh.restore_from_path(path, component=COMPONENT_RL_MODULE)
    same_weights(fresh, trained)
    assert trained.get_policy().optimizer.state_dict()["state"], "the trained optimizer has moments to restore"
    assert fresh.iteration == 0 and fresh.get_policy().optimizer.state_dict()["state"] == {}
    # RLlib's full component path, and the path of the modules inside the checkpoint, name the same models
    other = make_algo(trained.config.copy(copy_frozen=False))
    modules = f"{COMPONENT_LEARNER_GROUP}/{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}"
    other.restore_from_path(Path(path) / modules, component=f"{modules}/default_policy")
    same_weights(other, trained)
    with pytest.raises(CheckpointError, match=r"policy 'p9' is not in both checkpoint"):
        other.restore_from_path(path, component=f"{modules}/p9")
