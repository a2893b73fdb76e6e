"""offline_data(input_=...): recorded experiences read back, mixed with the sampler, checked before training."""

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
from corral import ConfigError, make_multi_agent
from corral.integrations.offline.experience_input import as_fragment, training_rows
from tests.conftest import small_ppo_config

DATA = Path(corral.__file__).parent / "tuned_examples" / "data"
EXPERT = DATA / "cartpole_expert.parquet"


def recorded(folder: Path, config: Any, calls: int = 3) -> list[Path]:
    """Record ``calls`` sample calls of ``config`` into ``folder``; the files written."""
    algo = config.copy().offline_data(output=str(folder)).build()
    for _ in range(calls):
        algo.sample()
    algo.stop()
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def offline(input_: Any, algo: str = "BC", **offline_data: Any) -> Any:
    return (
        corral.get_config(algo)
        .environment("CartPole-v1")
        .training(train_batch_size=200)
        .offline_data(input_=input_, **offline_data)
        .debugging(seed=0)
    )


def parquet_rows(path: Path) -> dict[str, np.ndarray]:
    table = pq.read_table(path)
    return {name: np.stack(table.column(name).to_numpy(zero_copy_only=False)) for name in ("obs", "actions")}


def test_rows_are_read_back_as_they_were_written_in_order(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    (path,) = recorded(tmp_path / "rec", small_ppo_config())
    written = parquet_rows(path)
    algo = make_algo(offline(str(tmp_path / "rec")))
    batch = algo.sample().policy_batches["default_policy"]
    rows = len(batch["obs"])
    assert rows == 200  # one sample call's worth: the train batch of one env runner
    np.testing.assert_array_equal(batch["obs"], written["obs"][:rows])
    np.testing.assert_array_equal(batch["actions"], written["actions"][:rows])
    assert algo.counters["num_env_steps_sampled"] == rows


def test_json_lines_read_the_same_rows_as_parquet(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    (parquet,) = recorded(tmp_path / "parquet", small_ppo_config())
    (jsonl,) = recorded(tmp_path / "json", small_ppo_config().offline_data(output_config={"format": "json"}))
    from_parquet = make_algo(offline(str(parquet))).sample().policy_batches["default_policy"]
    from_json = make_algo(offline(str(jsonl))).sample().policy_batches["default_policy"]
    for column in ("obs", "actions"):
        np.testing.assert_array_equal(from_parquet[column], from_json[column])


def test_a_folder_a_glob_and_a_list_name_the_same_files(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    files = recorded(tmp_path / "rec", small_ppo_config().offline_data(output_max_file_size=1), calls=3)
    assert len(files) == 3
    for input_ in (str(tmp_path / "rec"), str(tmp_path / "rec" / "*.parquet"), [str(p) for p in files]):
        reader = make_algo(offline(input_)).experience_input.sources[0][2]
        assert [p for p, _ in reader.files] == files


def test_a_dict_mixes_the_sampler_and_files_in_the_given_proportions(make_algo: Callable[..., Any]) -> None:
    config = offline({"sampler": 0.3, str(EXPERT): 0.7}).env_runners(num_envs_per_env_runner=1, rollout_fragment_length=100)
    algo = make_algo(config)
    total = {"sampler": 0, "file": 0}
    while sum(total.values()) < 10_000:
        before = algo.experience_input.rows_from[:]
        batch = algo.sample()
        after = algo.experience_input.rows_from
        total["sampler" if after[0] > before[0] else "file"] += batch.env_steps
    share = total["sampler"] / sum(total.values())
    assert abs(share - 0.3) <= 0.05 * 0.3, total
    # the sampler's rows are its own episodes: they finish, the file's rows start none
    assert algo.env_runner_group.get_metrics()


def test_file_order_and_shuffling_are_seeded_and_rows_are_drawn_without_replacement(make_algo: Callable[..., Any]) -> None:
    def epoch(seed: int) -> np.ndarray:
        algo = make_algo(offline(str(EXPERT), shuffle_buffer_size=2000).debugging(seed=seed))
        # the file's 10,480 rows: the buffer is refilled (from the next epoch) once fewer than 2,000 are left
        rows = [algo.sample().policy_batches["default_policy"]["obs"] for _ in range((10480 - 2000) // 200)]
        return np.concatenate(rows)

    first, again, other = epoch(0), epoch(0), epoch(1)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    expert_obs = parquet_rows(EXPERT)["obs"]
    assert not np.array_equal(first, expert_obs[: len(first)])  # shuffled
    # without replacement: each of the file's (distinct) rows at most once
    assert len(np.unique(first, axis=0)) == len(first) and len(np.unique(expert_obs, axis=0)) == len(expert_obs)
    assert len(np.unique(np.concatenate([first, expert_obs]), axis=0)) == len(expert_obs)


def test_rllib_s_local_shuffle_buffer_size_shuffles_this_process_s_reading_as_shuffle_buffer_size(
    make_algo: Callable[..., Any],
) -> None:
    def first_rows(**shuffle: Any) -> np.ndarray:
        algo = make_algo(offline(str(EXPERT), input_config={"use_ray_data": False}, **shuffle))
        return algo.sample().policy_batches["default_policy"]["obs"]

    by_rllib_s_name = first_rows(iter_batches_kwargs={"local_shuffle_buffer_size": 2000})
    np.testing.assert_array_equal(by_rllib_s_name, first_rows(shuffle_buffer_size=2000))
    assert not np.array_equal(by_rllib_s_name, first_rows())


def test_reading_resumes_exactly_from_a_checkpoint(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    config = offline({"sampler": 0.5, str(EXPERT): 0.5}, shuffle_buffer_size=1000)
    algo = make_algo(config)
    for _ in range(3):
        algo.sample()
    path = algo.save(tmp_path / "ckpt")
    expected = [algo.sample().policy_batches["default_policy"]["obs"] for _ in range(4)]
    restored = make_algo(config)
    restored.restore(path)
    for rows in expected:
        np.testing.assert_array_equal(restored.sample().policy_batches["default_policy"]["obs"], rows)


def test_box_actions_in_the_env_s_units_are_normalized_unless_the_input_says_they_are(
    tmp_path: Path, make_algo: Callable[..., Any]
) -> None:
    # Pendulum's actions are in [-2, 2]; a run with normalize_actions (the default) records them in [-1, 1]
    pendulum = corral.get_config("SAC").environment("Pendulum-v1").training(learning_starts=10).debugging(seed=0)
    (path,) = recorded(tmp_path / "rec", pendulum)
    written = parquet_rows(path)["actions"]
    assert np.abs(written).max() <= 1.0
    as_env_units = make_algo(offline(str(path), algo="MARWIL").environment("Pendulum-v1").training(beta=0.0))
    np.testing.assert_allclose(
        as_env_units.sample().policy_batches["default_policy"]["actions"], np.clip(written[:200] / 2.0, -1, 1), atol=1e-6
    )
    normalized = offline(str(path), algo="MARWIL", actions_in_input_normalized=True).environment("Pendulum-v1")
    np.testing.assert_array_equal(
        make_algo(normalized.training(beta=0.0)).sample().policy_batches["default_policy"]["actions"], written[:200]
    )


def test_postprocessing_puts_episodes_back_in_order_and_bootstraps_where_one_is_cut() -> None:
    # two episodes, their rows interleaved as a vector env writes them; episode 7 ends, episode 9 is cut off
    rows = {
        "obs": np.array([[0.0], [10.0], [1.0], [11.0], [2.0]], np.float32),
        "new_obs": np.array([[1.0], [11.0], [2.0], [12.0], [3.0]], np.float32),
        "rewards": np.array([1.0, 10.0, 2.0, 20.0, 3.0], np.float32),
        "terminateds": np.array([False, False, False, False, True]),
        "truncateds": np.zeros(5, bool),
        "eps_id": np.array([7, 9, 7, 9, 7]),
        "t": np.array([0, 0, 1, 1, 2]),
    }
    fragment, _ = as_fragment(rows)
    assert fragment["obs"][:, 0, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0]  # a reset row after each episode
    assert fragment["valid"][:, 0].tolist() == [True, True, True, False, True, True, False]
    assert fragment["terminateds"][:, 0].tolist() == [False, False, True, False, False, False, False]
    assert fragment["truncateds"][:, 0].tolist() == [False, False, False, False, False, True, False]  # cut: bootstrapped


def test_marwil_s_returns_are_discounted_to_the_episode_s_end(make_algo: Callable[..., Any]) -> None:
    algo = make_algo(offline(str(EXPERT), algo="MARWIL").training(gamma=0.9))
    policy = algo.get_policy()
    rows = {
        "obs": np.zeros((3, 4), np.float32),
        "new_obs": np.zeros((3, 4), np.float32),
        "actions": np.zeros(3, np.int64),
        "rewards": np.array([1.0, 2.0, 3.0], np.float32),
        "terminateds": np.array([False, False, True]),
        "truncateds": np.zeros(3, bool),
    }
    batch = policy.postprocess_trajectory(*as_fragment(rows))
    np.testing.assert_allclose(batch["value_targets"], [1 + 0.9 * 2 + 0.81 * 3, 2 + 0.9 * 3, 3], rtol=1e-6)


def test_ppo_bootstraps_an_episode_a_file_cuts_off_from_the_value_of_its_next_observation(
    make_algo: Callable[..., Any],
) -> None:
    policy = make_algo(offline(str(EXPERT), algo="PPO", postprocess_inputs=True).training(gamma=0.9)).get_policy()
    next_obs = np.full((1, 4), 0.5, np.float32)
    rows = {  # two steps of an episode that goes on after the file's last row
        "obs": np.zeros((2, 4), np.float32),
        "new_obs": np.concatenate([np.zeros((1, 4), np.float32), next_obs]),
        "actions": np.zeros(2, np.int64),
        "rewards": np.array([1.0, 2.0], np.float32),
        "terminateds": np.zeros(2, bool),
        "truncateds": np.zeros(2, bool),
        "action_logp": np.zeros(2, np.float32),
        "vf_preds": np.zeros(2, np.float32),
    }
    batch = training_rows(policy, rows, postprocess=True)
    bootstrap = float(policy.compute_values(next_obs)[0])
    assert bootstrap != 0.0
    np.testing.assert_allclose(batch["value_targets"][-1], 2.0 + 0.9 * bootstrap, rtol=1e-5)  # r + gamma V(next obs)


def test_multi_agent_files_are_read_per_policy(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    def two_policies(config: Any) -> Any:
        return config.environment(make_multi_agent("CartPole-v1"), env_config={"num_agents": 2}).multi_agent(
            policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id}"
        )

    files = recorded(tmp_path / "rec", two_policies(small_ppo_config()))
    assert len(files) == 2
    algo = make_algo(two_policies(offline(str(tmp_path / "rec"))))
    seen: set[str] = set()
    for _ in range(6):
        seen |= set(algo.sample().policy_batches)
    assert seen == {"p0", "p1"}


# ---------------------------------------------------------------------- #
# bad input, refused before training with the file and the column named
# ---------------------------------------------------------------------- #
def write_table(path: Path, columns: dict[str, Any]) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


def test_a_missing_path_and_a_folder_without_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        offline(str(tmp_path / "nothing")).build()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no input files"):
        offline(str(tmp_path / "empty")).build()


def test_a_file_without_a_column_the_algorithm_reads_is_refused_naming_both(tmp_path: Path) -> None:
    path = write_table(tmp_path / "obs_only.parquet", {"obs": [[0.0, 0.0, 0.0, 0.0]] * 3})
    with pytest.raises(ConfigError, match=r"obs_only\.parquet.*column 'actions': missing"):
        offline(str(path)).build()
    # MARWIL needs rewards too (for its returns)
    path = write_table(tmp_path / "no_rewards.parquet", {"obs": [[0.0] * 4] * 3, "actions": [0, 1, 0]})
    with pytest.raises(ConfigError, match=r"no_rewards\.parquet.*column 'rewards': missing"):
        offline(str(path), algo="MARWIL").build()


def test_observations_of_another_env_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cartpole_expert\.parquet.*column 'obs': rows of shape \(4,\).*\(3,\)"):
        offline(str(EXPERT), algo="MARWIL").environment("Pendulum-v1").training(beta=0.0).build()


def test_actions_outside_the_env_s_space_are_refused(tmp_path: Path) -> None:
    path = write_table(tmp_path / "bad_actions.parquet", {"obs": [[0.0] * 4] * 3, "actions": [0, 5, 1]})
    with pytest.raises(ConfigError, match=r"bad_actions\.parquet.*column 'actions': holds an action outside"):
        offline(str(path)).build()
    path = write_table(tmp_path / "float_actions.parquet", {"obs": [[0.0] * 4] * 3, "actions": [0.5, 0.1, 0.2]})
    with pytest.raises(ConfigError, match=r"float_actions\.parquet.*column 'actions': float64 rows.*integers"):
        offline(str(path)).build()


def test_non_finite_observations_are_refused(tmp_path: Path) -> None:
    path = write_table(tmp_path / "nan_obs.parquet", {"obs": [[0.0] * 4, [float("nan")] * 4], "actions": [0, 1]})
    with pytest.raises(ConfigError, match=r"nan_obs\.parquet.*column 'obs': holds NaN or infinite values"):
        offline(str(path)).build()


def test_renamed_columns_read_through_input_config(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    path = write_table(tmp_path / "foreign.parquet", {"observation": [[0.5] * 4] * 300, "action": [1] * 300})
    algo = make_algo(offline(str(path), input_config={"columns": {"obs": "observation", "actions": "action"}}))
    batch = algo.sample().policy_batches["default_policy"]
    assert batch["obs"].shape == (200, 4) and set(batch["actions"].tolist()) == {1}


def test_files_of_an_unknown_policy_and_unreadable_files_are_refused(tmp_path: Path) -> None:
    files = recorded(tmp_path / "rec", small_ppo_config())
    with pytest.raises(ConfigError, match=r"holds experiences of policy 'default_policy'.*\['p0', 'p1'\]"):
        offline(str(files[0])).environment(make_multi_agent("CartPole-v1"), env_config={"num_agents": 2}).multi_agent(
            policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id}"
        ).build()
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    with pytest.raises(ConfigError, match=r"broken\.parquet' cannot be read as parquet"):
        offline(str(broken)).build()
    bad_json = tmp_path / "bad.json"
    bad_json.write_text(json.dumps({"type": "Episode"}) + "\n")
    with pytest.raises(ConfigError, match=r"bad\.json' line 1: not a SampleBatch"):
        offline(str(bad_json)).build()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"input_": {"sampler": 0.5, "/data": 0.6}}, "sum to 1"),
        ({"input_": 3}, "input_ must be 'sampler'"),
        ({"input_": "/data", "input_config": {"fromat": "json"}}, "input_config has no key 'fromat'"),
        ({"input_config": {"columns": ["obs"]}}, "input_config columns must map"),
    ],
)
def test_bad_input_settings_are_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        corral.get_config("BC").environment("CartPole-v1").offline_data(**settings).validate()


def test_parquet_input_without_pyarrow_names_the_extra(hide_package: Callable[[str], None]) -> None:
    hide_package("pyarrow")
    with pytest.raises(ConfigError, match=r"pip install 'corral\[offline\]'"):
        offline(str(EXPERT)).build()


def test_marwil_needs_its_returns_computed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="postprocess_inputs=True"):
        offline(str(EXPERT), algo="MARWIL", postprocess_inputs=False).validate()
    with pytest.raises(ConfigError, match="BC is MARWIL with beta=0"):
        offline(str(EXPERT)).training(beta=1.0).validate()


def test_evaluation_samples_the_env_whatever_the_input(make_algo: Callable[..., Any]) -> None:
    algo = make_algo(offline(str(EXPERT)).evaluation(evaluation_interval=1, evaluation_duration=2))
    result = algo.train()
    assert result["evaluation"]["episodes_this_iter"] == 2
    assert np.isnan(result["episode_reward_mean"])  # no episodes are played in training: the rows come from a file
    assert gym.spaces.Discrete(2).contains(int(algo.compute_single_action(np.zeros(4, np.float32))))
