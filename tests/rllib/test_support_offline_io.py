"""RLlib's offline I/O written in corral: SampleBatchBuilder, JsonWriter and JsonReader, and corral's input reading them."""

from __future__ import annotations

import json
import logging
import random
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest

import corral
from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch
from corral.core.sampling.external.io_context import IOContext
from corral.rllib.support.offline_io import InputReader, JsonReader, JsonWriter, ShuffledInput
from corral.rllib.support.sample_batch_builder import SampleBatchBuilder

# Two lines RLlib 2.9's JsonWriter wrote (compress_columns=[]): an older file's "dones", a multi-agent batch.
RLLIB_LINES = (
    '{"type": "SampleBatch", "obs": [[0.5, 1.0], [1.5, 2.0]], "actions": [0, 1], "rewards": [1.0, 0.5], '
    '"dones": [false, true], "eps_id": [7, 7], "infos": [{}, {"k": 1}]}\n'
    '{"type": "MultiAgentBatch", "count": 1, "policy_batches": {"p0": {"obs": [[1.0, 2.0]], "actions": [1]}}}\n'
)
# ... and with its default compression (LZ4 over a pickle), which corral never opens.
RLLIB_PACKED = '{"type": "SampleBatch", "obs": "BCJNGGhAiAAAAAAAAAAcfgAAAFKABZV9AAEA8hmM", "actions": [0]}\n'


def episode(length: int, eps_id: int, rng: np.random.Generator) -> SampleBatch:
    """A CartPole episode of random actions, built as RLlib's saving_experiences example builds one."""
    builder = SampleBatchBuilder()
    for t in range(length):
        obs = rng.normal(size=4).astype(np.float32)
        builder.add_values(
            t=t,
            eps_id=eps_id,
            agent_index=0,
            obs=obs,
            actions=int(rng.integers(2)),
            action_prob=1.0,
            action_logp=0.0,
            rewards=1.0,
            prev_actions=0,
            prev_rewards=0.0,
            terminateds=t == length - 1,
            truncateds=False,
            infos={"step": t},
            new_obs=obs + 1,
        )
    return builder.build_and_reset()


def visible(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def assert_same_batch(read: SampleBatch, written: SampleBatch) -> None:
    assert set(read) == set(written)
    for key, value in written.items():
        if key == "infos":
            assert list(read[key]) == list(value)
        else:
            np.testing.assert_array_equal(read[key], value, err_msg=key)


def test_the_builder_makes_arrays_of_rows_and_numbers_its_batches() -> None:
    builder = SampleBatchBuilder()
    builder.add_values(obs=[0.5, 1.0], rewards=1.0, infos={"a": 1})
    builder.add_values(obs=[1.5, 2.0], rewards=0.0, infos={})
    assert builder.count == 2
    builder.add_batch(SampleBatch({"obs": np.array([[3.0, 4.0]]), "rewards": np.array([2.0]), "infos": np.array([{}])}))
    assert builder.count == 3
    first = builder.build_and_reset()
    assert first.count == 3 and builder.count == 0 and not builder.buffers
    assert first["obs"].dtype == first["rewards"].dtype == np.float32  # float64 rows become float32, as in RLlib
    assert first["infos"].dtype == object and first["infos"][0] == {"a": 1}
    builder.add_values(obs=[0.0, 0.0], rewards=0.0)
    second = builder.build_and_reset()
    assert len(set(first["unroll_id"])) == 1 and second["unroll_id"][0] == first["unroll_id"][0] + 1


def test_the_builder_names_what_does_not_fit() -> None:
    builder = SampleBatchBuilder()
    builder.add_values(obs=[0.0], rewards=1.0)
    builder.add_values(obs=[0.0])
    with pytest.raises(ValueError, match=r"the columns differ in length \{'obs': 2, 'rewards': 1\}"):
        builder.build_and_reset()
    ragged = SampleBatchBuilder()
    ragged.add_values(obs=[0.0])
    ragged.add_values(obs=[0.0, 1.0])
    with pytest.raises(ValueError, match="column 'obs' cannot be one array, its values differ in shape"):
        ragged.build_and_reset()
    with pytest.raises(TypeError, match=r"add each policy's batch of \.policy_batches"):
        builder.add_batch(SampleBatch({"obs": np.ones(1)}).as_multi_agent())  # type: ignore[arg-type]


def test_what_the_writer_writes_the_reader_reads_back_exactly(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    written = [episode(5, 0, rng), episode(3, 1, rng)]
    writer = JsonWriter(str(tmp_path / "out"))
    for batch in written:
        writer.write(batch)
    writer.write(SampleBatch())  # nothing: readers skip empty batches anyway
    assert visible(tmp_path / "out") == []  # hidden until the file is closed
    writer.close()
    (path,) = visible(tmp_path / "out")
    assert path.name.startswith("output-") and path.name.endswith("_worker-0_0.json")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 2 and lines[0]["type"] == "SampleBatch" and lines[0]["rewards"] == [1.0] * 5
    assert "__ndarray__" in lines[0]["obs"]  # compressed as corral's encoded array (exact dtype)

    reader = JsonReader(str(tmp_path / "out"))
    assert isinstance(reader, InputReader) and reader.batch_size == 1  # no config: one line per call
    for expected in written + written:  # one file: its lines in order, and again from the start
        read = reader.next()
        assert isinstance(read, SampleBatch)
        assert_same_batch(read, expected)
        assert read["obs"].dtype == np.float32  # compressed columns keep their dtype; lists come back as JSON's numbers


def test_multi_agent_batches_keep_their_policies_and_env_steps(tmp_path: Path) -> None:
    batch = MultiAgentBatch(
        {"p0": SampleBatch({"obs": np.ones((2, 3), np.float32)}), "p1": SampleBatch({"obs": np.zeros((1, 3), np.float32)})}, 2
    )
    with JsonWriter(tmp_path, compress_columns=[]) as writer:
        writer.write(batch)
    (path,) = visible(tmp_path)
    record = json.loads(path.read_text())
    assert record["type"] == "MultiAgentBatch" and record["count"] == 2 and record["policy_batches"]["p1"]["obs"] == [[0.0] * 3]
    read = JsonReader([str(path)]).next()
    assert isinstance(read, MultiAgentBatch) and read.env_steps == 2
    np.testing.assert_array_equal(read.policy_batches["p0"]["obs"], batch.policy_batches["p0"]["obs"])


def test_the_reader_reads_rllib_s_own_files_and_joins_lines_to_the_train_batch_size(tmp_path: Path) -> None:
    (tmp_path / "rllib.json").write_text(RLLIB_LINES.split("\n")[0] + "\n\nnot json\n" + RLLIB_LINES.split("\n")[0] + "\n")
    reader = JsonReader(str(tmp_path / "rllib.json"), IOContext(config={"train_batch_size": 3}))
    batch = reader.next()
    assert isinstance(batch, SampleBatch) and batch.count == 4  # whole lines until 3 rows; the empty and corrupt ones skipped
    assert "dones" not in batch and list(batch["terminateds"]) == [False, True, False, True]  # RLlib's older name
    assert batch["infos"][1] == {"k": 1}
    reader = JsonReader(str(tmp_path / "rllib.json"), IOContext(config={"train_batch_size": 4, "num_workers": 2}))
    assert reader.batch_size == 2  # shared among the env runners, as in RLlib
    (tmp_path / "multi.json").write_text(RLLIB_LINES.split("\n")[1])
    multi = JsonReader(str(tmp_path / "multi.json")).next()
    assert isinstance(multi, MultiAgentBatch) and multi.env_steps == 1 and multi.policy_batches["p0"]["actions"].tolist() == [1]


def test_a_corrupt_line_is_skipped_with_a_message(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "a.json").write_text('{"type": "SampleBatch", "obs": [1.0\n' + RLLIB_LINES)
    with caplog.at_level(logging.WARNING, logger="corral"):
        read = JsonReader(str(tmp_path / "a.json")).next()
    assert isinstance(read, SampleBatch) and read.count == 2
    assert "ignoring a corrupt record" in caplog.text


def test_folders_globs_lists_and_zips_name_the_files(tmp_path: Path) -> None:
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(RLLIB_LINES)
    (tmp_path / "notes.txt").write_text("not read")
    with zipfile.ZipFile(tmp_path / "c.zip", "w") as archive:
        archive.writestr("c.json", RLLIB_LINES)
    folder = JsonReader(str(tmp_path)).files
    assert [Path(f).name for f in folder] == ["a.json", "b.json", "c.zip"]
    assert JsonReader(str(tmp_path / "*.json")).files == folder[:2]
    assert JsonReader([str(tmp_path / "a.json"), tmp_path / "b.json"]).files == folder[:2]
    assert JsonReader([str(tmp_path)]).files == folder
    zipped = JsonReader(str(tmp_path / "c.zip")).next()
    assert isinstance(zipped, SampleBatch) and zipped.count == 2


def test_reading_goes_on_across_files_in_random_order_and_a_runner_starts_at_its_own(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.json").write_text(RLLIB_LINES.split("\n")[0].replace("7, 7", f"{ord(name)}, {ord(name)}") + "\n")
    random.seed(0)
    reader = JsonReader(str(tmp_path))
    seen = {int(reader.next()["eps_id"][0]) for _ in range(30)}  # type: ignore[index]
    assert seen == {ord("a"), ord("b"), ord("c")}
    runner = type("Runner", (), {"worker_index": 2, "num_workers": 2, "policy_map": {"default_policy": None}})()
    last = JsonReader(str(tmp_path), IOContext(worker_index=2, worker=runner)).next()
    assert int(last["eps_id"][0]) == ord("c")  # type: ignore[index]  # index 2 of 2 remote runners: the last file


def test_bad_input_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no files found matching"):
        JsonReader(str(tmp_path / "*.json"))
    with pytest.raises(ValueError, match="is a URI"):
        JsonReader("s3://bucket/data/*.json")
    with pytest.raises(ValueError, match="a path, a glob pattern or a folder, or a list of them; got int"):
        JsonReader(3)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        JsonReader([str(tmp_path / "missing.json")]).next()
    (tmp_path / "packed.json").write_text(RLLIB_PACKED)
    with pytest.raises(ValueError, match=r"column 'obs' is one string, as RLlib packs.*compress_columns=\[\]"):
        JsonReader(str(tmp_path / "packed.json")).next()
    with pytest.raises(ValueError, match="is a URI"):
        JsonWriter("s3://bucket/out")
    with pytest.raises(ValueError, match="max_file_size must be a positive number of bytes"):
        JsonWriter(tmp_path, max_file_size=0)
    with pytest.raises(TypeError, match="takes a SampleBatch or a MultiAgentBatch, got list"):
        JsonWriter(tmp_path).write([1, 2])  # type: ignore[arg-type]


def test_a_full_file_is_published_and_the_next_begun(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    writer = JsonWriter(tmp_path, ioctx=IOContext(worker_index=3), max_file_size=1)
    for eps_id in range(3):
        writer.write(episode(2, eps_id, rng))
    assert len(visible(tmp_path)) == 2  # each file took one line; the third is still being written
    del writer  # a writer that goes away publishes its file (so does the interpreter's exit)
    files = visible(tmp_path)
    assert len(files) == 3 and all("_worker-3_" in f.name for f in files)
    assert not list(tmp_path.glob(".*.tmp"))


def write_cartpole_episodes(folder: Path, episodes: int = 4) -> Path:
    """RLlib's saving_experiences recipe, with random actions: ``episodes`` CartPole episodes in ``folder``."""
    env = gym.make("CartPole-v1")
    writer = JsonWriter(folder)
    for eps_id in range(episodes):
        builder = SampleBatchBuilder()
        obs, _ = env.reset(seed=eps_id)
        done, t = False, 0
        while not done:
            action = int(env.action_space.sample())
            new_obs, reward, terminated, truncated, info = env.step(action)
            builder.add_values(
                t=t, eps_id=eps_id, agent_index=0, obs=obs, actions=action, action_prob=0.5, action_logp=np.log(0.5),
                rewards=reward, prev_actions=0, prev_rewards=0.0, terminateds=terminated, truncateds=truncated,
                infos=info, new_obs=new_obs,
            )  # fmt: skip
            obs, done, t = new_obs, terminated or truncated, t + 1
        writer.write(builder.build_and_reset())
    writer.close()
    return folder


def test_a_written_file_trains_bc_through_corral_s_offline_input(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    config = (
        corral.get_config("BC")
        .environment("CartPole-v1")
        .training(train_batch_size=32)
        .offline_data(input_=str(write_cartpole_episodes(tmp_path / "demo-out")))
        .debugging(seed=0)
    )
    result = make_algo(config).train()
    assert result["num_env_steps_trained"] >= 32


class CountingReader(InputReader):
    """RLlib's custom_input_api reader: a JsonReader of the file its own input_config key names, counting its calls."""

    made: ClassVar[list[CountingReader]] = []

    def __init__(self, ioctx: IOContext) -> None:
        self.ioctx = ioctx
        self.inner = JsonReader(ioctx.input_config["input_files"], ioctx)
        self.calls = 0
        CountingReader.made.append(self)

    def next(self) -> SampleBatch | MultiAgentBatch:
        self.calls += 1
        return self.inner.next()


@pytest.mark.parametrize("given", ["registered name", "class", "ray.tune.registry name"])
def test_an_input_creator_s_reader_is_what_training_reads(tmp_path: Path, make_algo: Callable[..., Any], given: str) -> None:
    """RLlib's input API: ``input_`` is a creator of an InputReader, by name, or the creator itself; the reader gets the
    IOContext with the run's own ``input_config`` keys, and training reads its batches (nothing is sampled)."""
    CountingReader.made.clear()
    creator: Any = lambda ioctx: ShuffledInput(CountingReader(ioctx), n=2)  # noqa: E731
    if given == "registered name":
        corral.register_input("corral-test-counting-reader", creator)
        input_: Any = "corral-test-counting-reader"
    elif given == "ray.tune.registry name":
        from ray.tune.registry import register_input

        register_input("corral-test-tune-reader", creator)  # Ray's registry, as RLlib's scripts register (no Ray started)
        input_ = "corral-test-tune-reader"
    else:
        input_ = CountingReader
    files = str(write_cartpole_episodes(tmp_path / "demo-out"))
    config = (
        corral.get_config("BC")
        .environment("CartPole-v1")
        .training(train_batch_size=32)
        .offline_data(input_=input_, input_config={"input_files": files})
        .debugging(seed=0)
    )
    algo = make_algo(config)
    result = algo.train()
    [reader] = CountingReader.made
    assert reader.ioctx.worker_index == 0 and reader.ioctx.config.input_config == {"input_files": files}
    assert reader.calls >= 1 and result["num_env_steps_trained"] >= 32
    assert result["num_env_steps_sampled"] == result["num_env_steps_trained"], "what was read, none sampled"
    assert algo.workers.local_worker().env is None


def test_reader_keys_in_input_config_are_refused_where_input_names_files() -> None:
    config = corral.get_config("BC").environment("CartPole-v1")
    with pytest.raises(corral.ConfigError, match=r"input_config has no key 'input_files'.*ioctx.input_config"):
        config.offline_data(input_="/data/expert", input_config={"input_files": "/data"}).validate()
    config.offline_data(input_=CountingReader, input_config={"input_files": "/data"}).validate()


def test_a_creator_that_makes_neither_a_reader_nor_an_external_env_is_named(make_algo: Callable[..., Any]) -> None:
    config = corral.get_config("BC").environment("CartPole-v1").offline_data(input_=lambda ioctx: "/data/expert")
    with pytest.raises(corral.ConfigError, match=r"made a str for env runner 0; an input creator makes an InputReader"):
        make_algo(config)


class Numbered(InputReader):
    def __init__(self) -> None:
        self.count = 0

    def next(self) -> SampleBatch:
        self.count += 1
        return SampleBatch({"obs": np.array([self.count])})


def test_shuffled_input_draws_each_batch_once_from_a_window_of_n() -> None:
    random.seed(0)
    shuffled = ShuffledInput(Numbered(), n=4)
    drawn = [int(shuffled.next()["obs"][0]) for _ in range(40)]
    assert len(set(drawn)) == 40 and drawn != sorted(drawn), "each batch once, out of order"
    assert all(value <= i + 4 for i, value in enumerate(drawn, start=1)), "never further ahead than the window"
    assert [int(ShuffledInput(Numbered()).next()["obs"][0]) for _ in range(1)] == [1]
    in_order = ShuffledInput(Numbered(), n=1)
    assert [int(in_order.next()["obs"][0]) for _ in range(3)] == [1, 2, 3]
    with pytest.raises(ValueError, match=r"n >= 0 batches, not -1"):
        ShuffledInput(Numbered(), n=-1)
