"""RLlib's helpers that scripts import, written in corral: each does what RLlib's does."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.rllib.support import annotations, framework, numeric, spaces, test_utils


def test_try_import_torch_gives_torch_and_the_others_none_with_one_note() -> None:
    assert framework.try_import_torch() == (torch, torch.nn)
    framework._noted.discard("TensorFlow")
    with pytest.warns(UserWarning, match=r"corral runs on torch: importing TensorFlow gives None"):
        assert framework.try_import_tf() == (None, None, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert framework.try_import_tf() == (None, None, None)  # once per process
    with pytest.raises(ImportError, match=r"never imports JAX"):
        framework.try_import_jax(error=True)


def test_override_checks_the_class_derives_from_the_named_parent() -> None:
    class Base:
        def act(self) -> int:
            return 0

    class Child(Base):
        @annotations.override(Base)
        def act(self) -> int:
            return 1

    class UnderClassmethod(Base):  # RLlib's own order: @classmethod above @override
        @classmethod
        @annotations.override(Base)
        def make(cls, value: int) -> tuple[type, int]:
            return cls, value

    assert Child().act() == 1
    assert UnderClassmethod.make(3) == (UnderClassmethod, 3)
    with pytest.raises(RuntimeError) as raised:  # __set_name__'s error, as Python reports it
        type("Stray", (), {"act": annotations.override(Base)(lambda self: 2)})
    assert "does not derive from it" in str(raised.value.__cause__ or raised.value)
    with pytest.raises(TypeError, match=r"needs the parent class"):
        annotations.override(lambda: None)  # type: ignore[arg-type]


def test_deprecated_raises_or_warns_and_is_overridden_tells_an_override() -> None:
    @annotations.Deprecated(new="new_fn", error=True)
    def old_fn() -> int:
        return 1

    @annotations.Deprecated(help="use the other one", error=False)
    def soft() -> int:
        return 2

    with pytest.raises(ValueError, match=r"`old_fn` has been deprecated. Use `new_fn` instead."):
        old_fn()
    with pytest.warns(DeprecationWarning, match=r"use the other one"):
        assert soft() == 2

    class Base:
        @annotations.OverrideToImplementCustomLogic
        def hook(self) -> None: ...

    class Mine(Base):
        def hook(self) -> None: ...

    assert not annotations.is_overridden(Base().hook) and annotations.is_overridden(Mine().hook)


def test_numeric_helpers_compute_what_rllib_s_do() -> None:
    converted = numeric.convert_to_numpy({"a": torch.ones(2, dtype=torch.float64), "b": [torch.tensor(3)]})
    assert converted["a"].dtype == np.float32 and converted["b"] == [3]
    back = numeric.convert_to_torch_tensor({"x": np.zeros(3, np.float64)})
    assert back["x"].dtype == torch.float32
    probs = numeric.softmax([1000.0, 1000.0])
    np.testing.assert_allclose(probs, [0.5, 0.5])
    np.testing.assert_array_equal(numeric.one_hot(np.array([0, 2]), depth=3), [[1, 0, 0], [0, 0, 1]])
    with pytest.raises(ValueError, match=r"indices must lie in \[0, 2\)"):
        numeric.one_hot(np.array([2]), depth=2)
    hot = numeric.torch_one_hot(torch.tensor([[0, 1]]), gym.spaces.MultiDiscrete([2, 3]))
    assert hot.tolist() == [[1, 0, 0, 1, 0]]
    y = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert numeric.explained_variance(y, y).item() == pytest.approx(1.0, abs=1e-5)
    assert numeric.explained_variance(y, torch.zeros(4)).item() < 0
    mask = numeric.sequence_mask(torch.tensor([1, 3]), maxlen=3)
    assert mask.tolist() == [[True, False, False], [True, True, True]]
    standard = numeric.standardized(np.array([1.0, 2.0, 3.0]))
    assert standard.mean() == pytest.approx(0.0) and standard.std() == pytest.approx(1.0)


def test_preprocessors_and_flatten_space_follow_rllib_s_layout() -> None:
    space = gym.spaces.Dict({"b": gym.spaces.Discrete(3), "a": gym.spaces.Box(-1, 1, (2,))})
    prep = spaces.get_preprocessor(space)(space)
    assert prep.shape == (5,) and prep.size == 5
    flat = prep.transform({"a": np.array([0.5, -0.5], np.float32), "b": 2})
    np.testing.assert_array_equal(flat, [0.5, -0.5, 0.0, 0.0, 1.0])  # keys in the space's (sorted) order
    box = gym.spaces.Box(0, 1, (2, 2))
    assert spaces.get_preprocessor(box) is spaces.NoPreprocessor and spaces.NoPreprocessor(box).shape == (2, 2)
    nested = gym.spaces.Tuple([gym.spaces.Discrete(2), space])
    assert spaces.flatten_space(nested) == [gym.spaces.Discrete(2), space["a"], space["b"]]
    assert spaces.get_base_struct_from_space(nested) == (gym.spaces.Discrete(2), {"a": space["a"], "b": space["b"]})


def test_batch_stacks_alike_structs_and_unbatch_gives_them_back() -> None:
    space = gym.spaces.Dict(
        {"a": gym.spaces.Tuple([gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,))]), "b": gym.spaces.Discrete(2)}
    )
    space.seed(0)
    items = [space.sample() for _ in range(4)]
    batched = spaces.batch(items)
    assert batched["a"][1].shape == (4, 2) and batched["b"].shape == (4,)
    assert np.array_equal(batched["a"][0], [item["a"][0] for item in items])
    back = spaces.unbatch(batched)
    assert len(back) == 4
    assert all(np.array_equal(b["a"][1], i["a"][1]) and b["b"] == i["b"] for b, i in zip(back, items, strict=True))
    assert spaces.batch([np.zeros((2, 3)), np.ones((1, 3))], individual_items_already_have_batch_dim=True).shape == (3, 3)
    with pytest.raises(ValueError, match=r"not alike"):
        spaces.batch([{"a": 1}, {"b": 2}])
    with pytest.raises(ValueError, match=r"at least one item"):
        spaces.batch([])


def test_check_compares_nested_values_within_decimals_or_asserts_a_difference() -> None:
    test_utils.check({"a": [1.0, torch.tensor(2.0)], "b": np.ones(2)}, {"a": [1.000001, 2.0], "b": [1.0, 1.0]})
    with pytest.raises(AssertionError):
        test_utils.check([1.0, 2.0], [1.0, 2.1])
    test_utils.check([1.0, 2.0], [1.0, 2.1], false=True)
    with pytest.raises(AssertionError, match=r"keys differ"):
        test_utils.check({"a": 1}, {"b": 1})
    test_utils.check(1.0, 1.05, atol=0.1)


def test_check_learning_achieved_reads_rllib_s_result_keys_and_raises_below_the_value(capsys: pytest.CaptureFixture[str]) -> None:
    results = [{"episode_reward_mean": 40.0}, {"episode_reward_mean": 160.0, "evaluation": {"episode_reward_mean": 90.0}}]
    test_utils.check_learning_achieved(results, 150.0, evaluation=False, metric="sampler_results/episode_reward_mean")
    assert "reached! ok" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"`env_runners/episode_return_mean` of 100.0 not reached! \(the best was 90.0\)"):
        test_utils.check_learning_achieved(results[1:], 100.0, metric="env_runners/episode_return_mean")  # evaluation's
    with pytest.raises(ValueError, match=r"no result reported it"):
        test_utils.check_learning_achieved([{}], 1.0)


def test_the_example_script_flags_parse_with_rllib_s_names_and_defaults() -> None:
    args = test_utils.add_rllib_example_script_args(default_reward=150.0, default_iters=3).parse_args(
        ["--stop-iters", "2", "--as-test", "--framework", "tf2", "--num-env-runners", "0"]
    )
    assert (args.stop_iters, args.stop_reward, args.stop_timesteps, args.as_test) == (2, 150.0, 100_000, True)
    assert (args.framework, args.num_env_runners, args.no_tune, args.algo) == ("tf2", 0, False, "PPO")


def test_an_example_experiment_without_tune_trains_until_a_stop_and_as_test_raises_when_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from corral.rllib.algorithms.ppo import PPOConfig

    monkeypatch.setenv("CORRAL_RESULTS_DIR", str(tmp_path))
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size=128, minibatch_size=64, num_epochs=1)
        .reporting(min_sample_timesteps_per_iteration=0)
        .debugging(seed=0)
    )
    parser = argparse.ArgumentParser()
    flags = ["--no-tune", "--num-env-runners", "0", "--stop-iters", "5", "--stop-timesteps", "256"]
    args = test_utils.add_rllib_example_script_args(parser).parse_args(flags)
    result = test_utils.run_rllib_example_script_experiment(config, args)
    assert result["timesteps_total"] >= 256 and result["training_iteration"] == 2  # the timesteps stop came first
    assert config.num_env_runners == 0 and not config.is_frozen  # the script's own config is left as it was
    args = test_utils.add_rllib_example_script_args().parse_args([*flags, "--as-test", "--stop-reward", "1000"])
    with pytest.raises(ValueError, match=r"`episode_reward_mean` of 1000.0 not reached!"):
        test_utils.run_rllib_example_script_experiment(config, args)


def test_a_batch_s_dones_are_its_terminations_or_truncations_as_rllib_s_and_no_other_column_is_made_up() -> None:
    from corral.core.common.sample_batch import SampleBatch

    batch = SampleBatch(terminateds=np.array([False, True, False]), truncateds=np.array([False, False, True]))
    np.testing.assert_array_equal(batch[SampleBatch.DONES], [False, True, True])
    assert SampleBatch.DONES not in batch and set(batch) == {"terminateds", "truncateds"}, "derived, never stored"
    with pytest.raises(KeyError, match="rewards"):
        batch["rewards"]
    with pytest.raises(KeyError, match="dones"):
        SampleBatch(terminateds=np.zeros(2, bool))["dones"]
