"""offline_data(output=...): every sampled transition written, in Parquet or JSON lines, each file whole or absent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq
import pytest

import corral
from corral import Callbacks, ConfigError, make_multi_agent
from corral.core.common import state_codec

COLUMNS = {
    "obs",
    "new_obs",
    "actions",
    "rewards",
    "terminateds",
    "truncateds",
    "action_logp",
    "eps_id",
    "agent_index",
    "t",
    "infos",
}


class InfoCartPole(gym.Wrapper):
    """CartPole whose step's info holds the step number (numpy), the pole's state (an array) and an object."""

    def __init__(self, config: Any = None) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.steps = 0

    def reset(self, **kwargs: Any) -> Any:
        self.steps = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        return obs, reward, terminated, truncated, {**info, "step": np.int64(self.steps), "pole": obs[2:], "env": self}


class EpisodeReturns(Callbacks):
    """Remembers every finished episode's return by id."""

    returns: ClassVar[dict[int, float]] = {}

    def on_episode_end(self, *, episode: Any, **kwargs: Any) -> None:
        EpisodeReturns.returns[episode.episode_id] = episode.total_reward


def ppo(folder: Path, **offline: Any) -> Any:
    return (
        corral.get_config("PPO")
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2)
        .training(train_batch_size=400, minibatch_size=100, num_epochs=1)
        .offline_data(output=str(folder), **offline)
        .debugging(seed=0)
    )


def read_parquet(folder: Path) -> dict[str, np.ndarray]:
    """Every visible Parquet file of a folder as one set of columns, multi-dimensional ones reshaped."""
    columns: dict[str, list[np.ndarray]] = {}
    for file in sorted(folder.glob("output-*.parquet")):
        table = pq.read_table(file)
        shapes = json.loads(table.schema.metadata[b"corral.shapes"])
        for name in table.column_names:
            column = table.column(name).combine_chunks()
            if name == "infos":
                values = np.asarray([json.loads(text) for text in column.to_pylist()] + [None])[:-1]
            elif name in shapes:
                values = column.flatten().to_numpy(zero_copy_only=False).reshape(-1, *shapes[name])
            else:
                values = column.to_numpy(zero_copy_only=False)
            columns.setdefault(name, []).append(values)
    return {name: np.concatenate(parts) for name, parts in columns.items()}


def read_json(folder: Path) -> dict[str, np.ndarray]:
    columns: dict[str, list[np.ndarray]] = {}
    for file in sorted(folder.glob("output-*.json")):
        for line in file.read_text().splitlines():
            batch = json.loads(line)
            assert batch.pop("type") == "SampleBatch"
            for name, value in batch.items():
                columns.setdefault(name, []).append(np.asarray(state_codec.decode(value)))
    return {name: np.concatenate(parts) for name, parts in columns.items()}


def test_every_sampled_transition_is_written_and_each_episode_s_rewards_sum_to_its_return(tmp_path: Path) -> None:
    EpisodeReturns.returns = {}
    algo = ppo(tmp_path / "out").callbacks(EpisodeReturns).build()
    for _ in range(2):
        algo.train()
    sampled = algo.counters["num_env_steps_sampled"]
    algo.stop()
    rows = read_parquet(tmp_path / "out")
    assert set(rows) >= COLUMNS and len(rows["obs"]) == sampled
    assert not list((tmp_path / "out").glob(".*"))  # stopped: no file left half-written
    finished = 0
    for eps_id in np.unique(rows["eps_id"]):
        mine = rows["eps_id"] == eps_id
        t = rows["t"][mine]
        assert list(t) == list(range(t[0], t[0] + len(t)))  # an episode's rows together, in order
        # each row's next observation is the next row's observation
        np.testing.assert_array_equal(rows["new_obs"][mine][:-1], rows["obs"][mine][1:])
        done = rows["terminateds"][mine] | rows["truncateds"][mine]
        assert not done[:-1].any()
        if done[-1] and t[0] == 0:
            finished += 1
            assert rows["rewards"][mine].sum() == pytest.approx(EpisodeReturns.returns[int(eps_id)])
    assert finished >= 10
    assert set(rows["agent_index"]) == {0}


def test_json_lines_hold_the_same_rows_as_parquet_and_plain_columns_for_rllib_s_reader(tmp_path: Path) -> None:
    for folder, offline in [("parquet", {}), ("json", {"output_config": {"format": "json"}})]:
        algo = ppo(tmp_path / folder, **offline).build()
        algo.train()
        algo.stop()
    parquet, lines = read_parquet(tmp_path / "parquet"), read_json(tmp_path / "json")
    assert parquet.keys() == lines.keys()
    for name in parquet:
        np.testing.assert_array_equal(parquet[name], lines[name], err_msg=name)
    first = json.loads(next((tmp_path / "json").glob("output-*.json")).read_text().splitlines()[0])
    assert state_codec.decode(first["obs"]).dtype == np.float32  # compressed by default: an encoded array
    assert isinstance(first["rewards"], list) and isinstance(first["actions"][0], int)


def test_the_documented_debugging_recipe_writes_plain_json(run_cli: Any, tmp_path: Path) -> None:
    config = json.dumps({"output": str(tmp_path / "debug"), "output_compress_columns": [], "output_config": {"format": "json"}})
    proc = run_cli("train", "--algo", "PPO", "--env", "CartPole-v1", "--stop", '{"training_iteration": 1}', "--config", config)
    assert proc.returncode == 0, proc.stderr
    (file,) = (tmp_path / "debug").glob("output-*_worker-0_0.json")
    batch = json.loads(file.read_text().splitlines()[0])
    assert batch["type"] == "SampleBatch" and isinstance(batch["obs"][0], list) and len(batch["obs"][0]) == 4


def test_files_roll_over_at_the_size_limit_and_each_one_reads(tmp_path: Path) -> None:
    algo = ppo(tmp_path / "out", output_max_file_size=4096).build()
    for _ in range(3):
        algo.train()
    sampled = algo.counters["num_env_steps_sampled"]
    algo.stop()
    files = sorted((tmp_path / "out").glob("output-*.parquet"))
    assert len(files) >= 3 and sum(pq.read_table(f).num_rows for f in files) == sampled


def test_a_killed_run_leaves_every_published_file_readable(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    script = textwrap.dedent(f"""
        import corral
        algo = (corral.get_config("PPO").environment("CartPole-v1").env_runners(num_envs_per_env_runner=2)
                .training(train_batch_size=200, minibatch_size=100, num_epochs=1)
                .offline_data(output={str(folder)!r}, output_max_file_size=2048).debugging(seed=0).build())
        while True:
            algo.train()
    """)
    env = {**os.environ, "CORRAL_RESULTS_DIR": str(tmp_path / "results")}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        deadline = time.monotonic() + 120
        while len(list(folder.glob("output-*.parquet"))) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    published = sorted(folder.glob("output-*.parquet"))
    assert len(published) >= 3
    for file in published:
        assert pq.read_table(file).num_rows > 0
    assert all(f.name.startswith(".") and f.name.endswith(".tmp") for f in folder.iterdir() if f not in published)


def test_multi_agent_output_is_written_per_policy(tmp_path: Path) -> None:
    algo = (
        corral.get_config("PPO")
        .environment(make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
        .env_runners(num_envs_per_env_runner=2)
        .training(train_batch_size=200, minibatch_size=100, num_epochs=1)
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, episode, **kw: f"p{agent_id}")
        .offline_data(output="logdir")
        .debugging(seed=0)
        .build()
    )
    algo.train()
    trained = algo.counters["num_agent_steps_sampled"]
    algo.stop()
    rows = 0
    for index, policy_id in enumerate(["p0", "p1"]):
        (file,) = algo.logdir.glob(f"output-*_worker-0_policy-{policy_id}_0.parquet")
        table = pq.read_table(file)
        assert table.schema.metadata[b"corral.policy_id"] == policy_id.encode()
        assert set(table.column("agent_index").to_pylist()) == {index}  # agent i plays policy p{i}
        rows += table.num_rows
    assert rows == trained


def test_writing_output_changes_nothing_in_training(tmp_path: Path) -> None:
    from tests.core.test_exact_resume import same

    weights = []
    for output in (None, str(tmp_path / "out")):
        config = ppo(tmp_path).offline_data(output=output)
        algo = config.build()
        algo.train()
        algo.train()
        weights.append(algo.get_weights())
        algo.stop()
    same(weights[0], weights[1])


def test_bad_output_settings_are_refused_before_sampling(tmp_path: Path, hide_package: Callable[[str], None]) -> None:
    with pytest.raises(ConfigError, match="output_config has no key 'compression'; it takes 'format'"):
        ppo(tmp_path, output_config={"compression": "zstd"})
    with pytest.raises(ConfigError, match="output_config format 'csv' is not one of 'parquet', 'json'"):
        ppo(tmp_path, output_config={"format": "csv"})
    hide_package("pyarrow")
    with pytest.raises(ConfigError, match=r"pip install 'corral\[offline\]', or .* output_config=\{'format': 'json'\}"):
        ppo(tmp_path / "out").build()
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_compressed_array_reads_back_exactly_and_a_damaged_one_is_refused() -> None:
    array = np.arange(1000, dtype=np.float32).reshape(250, 4)
    encoded = state_codec.encode(array, compress=True)
    assert encoded["__ndarray__"]["zlib"] is True
    np.testing.assert_array_equal(state_codec.decode(encoded), array)
    spec = encoded["__ndarray__"]
    with pytest.raises(ValueError, match="inflates to more or fewer bytes"):
        state_codec.decode({"__ndarray__": {**spec, "shape": [10, 4]}})  # more bytes than the shape holds
    with pytest.raises(ValueError, match="damaged"):
        state_codec.decode({"__ndarray__": {**spec, "base64": "AAAAAAAA"}})


def test_a_restored_run_writes_the_episodes_it_resumes_under_their_ids(tmp_path: Path) -> None:
    algo = ppo(tmp_path / "before").build()
    algo.train()
    checkpoint = algo.save(str(tmp_path / "checkpoint"))
    algo.stop()
    restored = corral.Algorithm.from_checkpoint(checkpoint, config_overrides={"output": str(tmp_path / "after")})
    restored.train()
    restored.stop()
    before, after = read_parquet(tmp_path / "before"), read_parquet(tmp_path / "after")
    last_step = {int(e): int(t) for e, t in zip(before["eps_id"], before["t"], strict=True)}
    first_step = {}
    for eps_id, t in zip(after["eps_id"], after["t"], strict=True):
        first_step.setdefault(int(eps_id), int(t))
    resumed = set(last_step) & set(first_step)
    assert len(resumed) == 2  # one episode in progress per sub-environment
    for eps_id in resumed:
        assert first_step[eps_id] == last_step[eps_id] + 1


def player_policy(agent_id: Any, episode: Any, **kwargs: Any) -> str:
    return f"p{agent_id}"


@pytest.mark.parametrize("output_before", [True, False])
def test_a_turn_based_run_restored_with_output_switched_on_or_off_goes_on(tmp_path: Path, output_before: bool) -> None:
    """A checkpoint of a turn-based game holds open rows (a move waiting for the reply), with or without output columns."""
    from tests.core.test_multi_agent_training import Relay, relay_config

    corral.register_env("relay_for_output", Relay)  # restored by name, mid-episode

    def config(output: bool) -> Any:
        return (
            relay_config()
            .training(train_batch_size=8, minibatch_size=8)
            .env_runners(rollout_fragment_length=8)  # ends while a move waits for its reply
            .environment("relay_for_output")
            .multi_agent(policy_mapping_fn=player_policy)
            .offline_data(output=str(tmp_path / "out") if output else None)
        )

    algo = config(output_before).build()
    algo.train()
    assert algo.env_runner_group.local_env_runner.get_state()["open_rows"]["pending"]
    checkpoint = algo.save(str(tmp_path / "checkpoint"))
    algo.stop()
    overrides = {"output": config(not output_before).output, "policy_mapping_fn": player_policy}
    restored = corral.Algorithm.from_checkpoint(checkpoint, config_overrides=overrides)
    restored.train()
    restored.stop()
    assert len(read_parquet(tmp_path / "out")["obs"]) > 0


@pytest.mark.parametrize("multi_agent", [False, True])
def test_each_row_carries_the_info_of_its_step_as_json_data(tmp_path: Path, multi_agent: bool) -> None:
    config = ppo(tmp_path / "out")
    if multi_agent:
        config = config.environment(make_multi_agent(InfoCartPole), env_config={"num_agents": 2}).multi_agent(
            policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, episode, **kw: f"p{agent_id}"
        )
    else:
        config = config.environment(InfoCartPole)
    algo = config.build()
    algo.train()
    algo.stop()
    rows = read_parquet(tmp_path / "out")
    assert len(rows["infos"]) == len(rows["t"]) > 0
    for info, t, obs in zip(rows["infos"], rows["t"], rows["new_obs"], strict=True):
        assert set(info) == {"step", "pole"}  # the env object is left out
        assert info["step"] == t + 1
        np.testing.assert_allclose(info["pole"], obs[2:], rtol=1e-6)  # the unfiltered state after the step


def test_a_recurrent_policy_s_output_holds_its_state_in_and_out_and_previous_actions_and_rewards(tmp_path: Path) -> None:
    algo = ppo(tmp_path / "out").training(model={"use_lstm": True, "lstm_cell_size": 8}).build()
    algo.train()
    algo.stop()
    rows = read_parquet(tmp_path / "out")
    assert rows["state_in_0"].shape == rows["state_out_0"].shape == (len(rows["obs"]), 8)
    episode = rows["eps_id"] == rows["eps_id"][0]
    # within an episode (rows in time order), each step starts from the state the step before ended in
    np.testing.assert_array_equal(rows["state_in_1"][episode][1:], rows["state_out_1"][episode][:-1])
    np.testing.assert_array_equal(rows["prev_actions"][episode][1:], rows["actions"][episode][:-1])
    first_steps = rows["t"] == 0
    assert first_steps.any() and not rows["state_in_0"][first_steps].any() and not rows["prev_rewards"][first_steps].any()
