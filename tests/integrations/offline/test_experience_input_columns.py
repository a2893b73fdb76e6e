"""What each algorithm reads of offline rows, whoever wrote them: corral (Parquet, JSON lines with and without
compressed columns) or RLlib (its JSON layout, ``dones`` included), processed or not (``postprocess_inputs``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import corral
from corral import ConfigError
from tests.conftest import small_ppo_config

DATA = Path(corral.__file__).parent / "tuned_examples" / "data"
RANDOM = DATA / "cartpole_random.parquet"  # episodes that terminate (about 20 steps each)


def recorded(folder: Path, config: Any, calls: int = 3) -> Path:
    """The one file ``calls`` sample calls of ``config`` write into ``folder``."""
    algo = config.copy().offline_data(output=str(folder)).build()
    for _ in range(calls):
        algo.sample()
    algo.stop()
    (path,) = (p for p in folder.iterdir() if not p.name.startswith("."))
    return path


def reading(input_: Any, algo: str, env: str = "CartPole-v1", **offline_data: Any) -> Any:
    config = corral.get_config(algo).environment(env).offline_data(input_=input_, **offline_data).debugging(seed=0)
    config = config.training(train_batch_size=64)
    if algo in ("DQN", "SimpleQ", "SAC", "CQL"):
        config = config.training(learning_starts=0, n_step=1).update_from_dict({"min_sample_timesteps_per_iteration": 64})
    return config


def rows_of(algo: Any) -> dict[str, np.ndarray]:
    return dict(algo.sample().policy_batches["default_policy"])


def rllib_episodes(episodes: int, dones: bool) -> list[dict[str, Any]]:
    """CartPole episodes as RLlib's JsonWriter writes them with compress_columns=[]: one SampleBatch per line."""
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(0)
    lines = []
    for eps_id in range(episodes):
        obs, _ = env.reset(seed=eps_id)
        columns: dict[str, list[Any]] = {}
        for t in range(500):
            action = int(rng.integers(2))
            new_obs, reward, terminated, truncated, info = env.step(action)
            row = {
                "t": t,
                "eps_id": 1_000_003 * eps_id,
                "agent_index": 0,
                "obs": obs.tolist(),
                "actions": action,
                "action_prob": 0.5,
                "action_logp": float(np.log(0.5)),
                "rewards": reward,
                "prev_actions": 0,
                "prev_rewards": 0.0,
                **({"dones": terminated or truncated} if dones else {"terminateds": terminated, "truncateds": truncated}),
                "infos": info,
                "new_obs": new_obs.tolist(),
                "unroll_id": eps_id,
            }
            for key, value in row.items():
                columns.setdefault(key, []).append(value)
            obs = new_obs
            if terminated or truncated:
                break
        lines.append({"type": "SampleBatch", **columns})
    return lines


def write_lines(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


# ---------------------------------------------------------------------- #
# columns in the policy's dtypes, whatever wrote the file
# ---------------------------------------------------------------------- #
def test_json_lines_without_compressed_columns_train_bc_and_marwil(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    plain_json = small_ppo_config().offline_data(output_config={"format": "json"}, output_compress_columns=[])
    jsonl = recorded(tmp_path / "json", plain_json)
    parquet = recorded(tmp_path / "parquet", small_ppo_config())
    from_json, from_parquet = rows_of(make_algo(reading(str(jsonl), "BC"))), rows_of(make_algo(reading(str(parquet), "BC")))
    for column in ("obs", "new_obs", "actions", "rewards", "terminateds", "action_logp", "vf_preds"):
        assert from_json[column].dtype == from_parquet[column].dtype, column
        np.testing.assert_allclose(from_json[column], from_parquet[column], rtol=1e-6)
    assert (from_json["obs"].dtype, from_json["actions"].dtype, from_json["rewards"].dtype) == (np.float32, np.int64, np.float32)
    assert from_json["terminateds"].dtype == bool
    for algo in ("BC", "MARWIL"):
        result = make_algo(reading(str(jsonl), algo)).train()
        assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["policy_loss"]), algo


def test_rllib_s_json_layout_trains_and_its_dones_end_episodes(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    old = write_lines(tmp_path / "old.json", rllib_episodes(6, dones=True))  # Ray before 2.3
    new = write_lines(tmp_path / "new.json", rllib_episodes(6, dones=False))
    for path in (old, new):
        dqn = make_algo(reading(str(path), "DQN").training(gamma=0.9))
        rows = rows_of(dqn)
        assert rows["obs"].dtype == np.float32 and rows["terminateds"].dtype == bool
        assert rows["terminateds"].sum() >= 2 and not rows["truncateds"].any()
        # one-step targets: the discount is gamma, and 0 where the episode terminated
        np.testing.assert_array_equal(rows["discounts"], np.where(rows["terminateds"], 0.0, 0.9).astype(np.float32))
        assert np.isfinite(dqn.train()["info"]["learner"]["default_policy"]["learner_stats"]["mean_q"])
    # MARWIL's returns stop at each episode's end, which `dones` marks
    marwil = make_algo(reading(str(old), "MARWIL").training(gamma=1.0, train_batch_size=4000))
    rows = rows_of(marwil)
    lengths = [len(line["t"]) for line in rllib_episodes(6, dones=True)]
    assert sorted(np.round(rows["value_targets"][rows["t"] == 0]).astype(int).tolist()) == sorted(lengths)


def test_a_column_rllib_compressed_is_refused_naming_the_setting_that_writes_it_plainly(tmp_path: Path) -> None:
    line = {"type": "SampleBatch", "obs": "BCJNGGhAlwAAAAAAAAA=", "actions": [0, 1], "new_obs": "BCJNGGhAlwAAAAAAAAA="}
    path = write_lines(tmp_path / "packed.json", [line])
    with pytest.raises(ConfigError, match=r"packed\.json' line 1 column 'obs'.*output_compress_columns=\[\]"):
        reading(str(path), "BC").build()


def test_string_episode_ids_put_rows_back_into_their_episodes(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    # RLlib's newer stack names episodes by strings; two interleaved episodes of 2 and 3 steps
    columns = {
        "obs": [[0.0] * 4] * 5,
        "new_obs": [[0.0] * 4] * 5,
        "actions": [0, 1, 0, 1, 0],
        "rewards": [1.0, 10.0, 1.0, 10.0, 10.0],
        "terminateds": [False, False, True, False, True],
        "truncateds": [False] * 5,
        "eps_id": ["a1f", "b07", "a1f", "b07", "b07"],
        "t": [0, 0, 1, 1, 2],
    }
    pq.write_table(pa.table(columns), tmp_path / "ids.parquet")
    rows = rows_of(make_algo(reading(str(tmp_path / "ids.parquet"), "MARWIL").training(gamma=1.0)))
    assert sorted(rows["value_targets"].tolist()) == [1.0, 2.0, 10.0, 20.0, 30.0]


class SmallImages(gym.Env):
    """4x4 uint8 images: the policy's observations stay uint8."""

    observation_space = gym.spaces.Box(0, 255, (4, 4, 1), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        return np.zeros((4, 4, 1), np.uint8), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return np.zeros((4, 4, 1), np.uint8), 1.0, True, False, {}


def test_integer_observations_come_back_exactly_or_are_refused(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    image = np.arange(16).reshape(4, 4, 1)
    exact = write_lines(tmp_path / "exact.json", [{"type": "SampleBatch", "obs": [image.tolist()] * 64, "actions": [1] * 64}])
    config = reading(str(exact), "BC").environment(SmallImages).training(model={"conv_filters": [[4, 2, 1]]})
    rows = rows_of(make_algo(config))
    assert rows["obs"].dtype == np.uint8 and (rows["obs"] == image).all()
    fraction = write_lines(tmp_path / "fraction.json", [{"type": "SampleBatch", "obs": [(image + 0.5).tolist()], "actions": [1]}])
    with pytest.raises(ConfigError, match=r"fraction\.json' column 'obs': holds values that the policy's uint8"):
        config.offline_data(input_=str(fraction)).build()


# ---------------------------------------------------------------------- #
# unprocessed input: one-step transitions, or a ConfigError before training
# ---------------------------------------------------------------------- #
@pytest.mark.parametrize("algo", ["DQN", "SimpleQ"])
def test_replay_algorithms_learn_from_one_step_transitions_as_they_are(algo: str, make_algo: Callable[..., Any]) -> None:
    learner = make_algo(reading(str(RANDOM), algo).training(gamma=0.95))
    rows = rows_of(learner)
    file = pq.read_table(RANDOM).to_pydict()
    count = len(rows["obs"])
    assert set(rows) == {"obs", "actions", "rewards", "new_obs", "terminateds", "truncateds", "discounts"}
    np.testing.assert_array_equal(rows["new_obs"], np.array(file["new_obs"][:count], np.float32))
    np.testing.assert_array_equal(rows["terminateds"], file["terminateds"][:count])
    assert rows["terminateds"].any()
    np.testing.assert_array_equal(rows["discounts"], np.where(rows["terminateds"], 0.0, 0.95).astype(np.float32))
    assert np.isfinite(learner.train()["info"]["learner"]["default_policy"]["learner_stats"]["mean_q"])


def test_sac_and_cql_learn_from_one_step_transitions_as_they_are(make_algo: Callable[..., Any]) -> None:
    pendulum = str(DATA / "pendulum_sac.parquet")
    for algo in ("SAC", "CQL"):
        config = reading(pendulum, algo, env="Pendulum-v1", actions_in_input_normalized=True, postprocess_inputs=False)
        result = make_algo(config.training(model={"fcnet_hiddens": [16]})).train()
        assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["critic_loss"]), algo


@pytest.mark.parametrize("algo", ["DQN", "SAC", "CQL"])
def test_n_step_returns_without_postprocessing_are_refused_before_training(algo: str, make_algo: Callable[..., Any]) -> None:
    env = "CartPole-v1" if algo == "DQN" else "Pendulum-v1"
    data = str(RANDOM if algo == "DQN" else DATA / "pendulum_sac.parquet")
    config = reading(data, algo, env=env, postprocess_inputs=False).training(n_step=3)
    with pytest.raises(ConfigError, match=r"n_step=3 .*set offline_data\(postprocess_inputs=True\), or n_step=1"):
        config.validate()
    if algo == "DQN":  # postprocessing sums them
        rows = rows_of(make_algo(config.offline_data(postprocess_inputs=True)))
        discounts = np.unique(rows["discounts"])
        assert np.isclose(discounts.max(), 0.99**3) and all(np.isclose(discounts[:, None], [0, 0.99, 0.99**2, 0.99**3]).any(1))


@pytest.mark.parametrize(("algo", "column"), [("PPO", "advantages"), ("A2C", "advantages"), ("IMPALA", "valid")])
def test_on_policy_algorithms_on_unprocessed_input_are_refused_at_build(algo: str, column: str, tmp_path: Path) -> None:
    path = recorded(tmp_path / "rec", small_ppo_config())
    with pytest.raises(ConfigError, match=rf"column '{column}': missing.*set offline_data\(postprocess_inputs=True\)"):
        reading(str(path), algo).build()


def test_a_file_that_holds_its_advantages_trains_ppo_as_it_is(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    # RLlib records batches after postprocessing: PPO's files hold advantages and value targets
    sampled = make_algo(small_ppo_config()).sample().policy_batches["default_policy"]
    line = {"type": "SampleBatch", **{k: np.asarray(v).tolist() for k, v in sampled.items()}}
    path = write_lines(tmp_path / "postprocessed.json", [line])
    result = make_algo(reading(str(path), "PPO").training(minibatch_size=32, num_epochs=1)).train()
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["policy_loss"])


@pytest.mark.parametrize(("algo", "column"), [("PPO", "action_logp"), ("A2C", "vf_preds"), ("IMPALA", "action_logp")])
def test_postprocessing_refuses_a_file_without_what_it_reads(algo: str, column: str, tmp_path: Path) -> None:
    # what DQN writes: transitions without the behaviour's log-probabilities or value estimates
    table = pq.read_table(RANDOM).drop_columns(["action_logp", "action_dist_inputs", "vf_preds"])
    pq.write_table(table, tmp_path / "transitions.parquet")
    with pytest.raises(ConfigError, match=rf"transitions\.parquet' column '{column}': missing"):
        reading(str(tmp_path / "transitions.parquet"), algo, postprocess_inputs=True).build()


@pytest.mark.parametrize("algo", ["PPO", "DQN"])
def test_files_mix_with_the_sampler_whichever_comes_first(algo: str, tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    path = recorded(tmp_path / "rec", small_ppo_config())
    config = reading({str(path): 0.5, "sampler": 0.5}, algo, postprocess_inputs=True).training(train_batch_size=256)
    config = config.env_runners(num_envs_per_env_runner=2, rollout_fragment_length=32)  # a train batch of 4 sample calls
    learner = make_algo(config)
    for _ in range(3):
        learner.train()
    assert learner.experience_input.rows_from[0] > 0 and learner.experience_input.rows_from[1] > 0
