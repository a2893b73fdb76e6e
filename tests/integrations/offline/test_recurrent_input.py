"""Recurrent policies learning from files: each episode's steps as sequences, from the recorded state or the model's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import corral
from corral import ConfigError
from corral.core import SampleBatch
from corral.core.learning.recurrent.sequences import step_inputs
from corral.integrations.offline.experience_input import as_fragment, training_rows, with_previous_steps
from corral.integrations.offline.input_files import read_experiences
from corral.plugins.marwil import BCConfig
from corral.plugins.ppo import PPOConfig
from corral.testing.envs import RepeatAfterMe, StatelessCartPole
from tests.conftest import SMALL_PPO

LSTM = {"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 5, "fcnet_hiddens": [8]}
EPISODE = 20


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two sample calls of an LSTM PPO policy that reads its previous action, recorded without training (JSON lines)."""
    folder = tmp_path_factory.mktemp("recorded")
    model = {**LSTM, "lstm_use_prev_action": True}
    config = (
        PPOConfig()
        .environment(StatelessCartPole)
        .env_runners(num_envs_per_env_runner=2)
        .training(**SMALL_PPO, model=model)
        .offline_data(output=str(folder), output_config={"format": "json"})
        .debugging(seed=0)
    )
    algo = config.build()
    algo.sample()
    algo.sample()
    algo.stop()
    return folder


def learner(algo: str, input_: Any, **offline_data: Any) -> Any:
    model = {**LSTM, "lstm_use_prev_action": True}
    config = corral.get_config(algo).environment(StatelessCartPole).training(model=model, train_batch_size=200)
    return config.offline_data(input_=input_, **offline_data).debugging(seed=0)


def rows_of(folder: Path) -> dict[str, np.ndarray]:
    (path,) = [p for p in folder.iterdir() if not p.name.startswith(".")]
    (rows,) = read_experiences(path, "json").values()
    return rows


def demonstrations(path: Path, episodes: int) -> None:
    """RepeatAfterMe played perfectly (each action the bit seen one step before), with no state columns."""
    rng = np.random.default_rng(0)
    bits = rng.integers(2, size=(episodes, EPISODE))
    actions = np.concatenate([rng.integers(2, size=(episodes, 1)), bits[:, :-1]], axis=1)  # the first has nothing to repeat
    one_hot = np.eye(2, dtype=np.float32)[bits.reshape(-1)]  # the policy's preprocessed observations
    columns = {
        "obs": list(one_hot),
        "actions": actions.reshape(-1),
        "eps_id": np.repeat(np.arange(episodes), EPISODE),
        "t": np.tile(np.arange(EPISODE), episodes),
    }
    pq.write_table(pa.table(columns), path)


def evaluated_return(algo: Any) -> float:
    return float(algo.evaluate()["episode_reward_mean"])


def test_bc_with_an_lstm_learns_a_memory_task_from_demonstrations_that_recorded_no_state(tmp_path: Path) -> None:
    demonstrations(tmp_path / "demos.parquet", episodes=50)
    returns = {}
    for name, model in (("lstm", {**LSTM, "lstm_cell_size": 16, "max_seq_len": 10, "fcnet_hiddens": [16]}), ("ff", {})):
        config = (
            BCConfig()
            .environment(RepeatAfterMe, env_config={"episode_length": EPISODE})
            .training(model={"fcnet_hiddens": [16], **model}, lr=0.01, train_batch_size=500)
            .offline_data(input_=str(tmp_path / "demos.parquet"))
            .evaluation(evaluation_duration=10, evaluation_duration_unit="episodes")
            .debugging(seed=0)
        )
        algo = config.build()
        trained = [algo.train()["num_env_steps_trained"] for _ in range(30)]
        # steps are counted, not sequences: a sample call takes whole ones, so a batch overshoots by less than one a call
        assert all(500 <= now - before < 550 for before, now in zip([0, *trained], trained, strict=False))
        returns[name] = evaluated_return(algo)
        algo.stop()
    # the most is 19 (the first step has nothing to repeat); one step's bit says nothing of the last one's
    assert returns["lstm"] >= 15 and abs(returns["ff"]) <= 5, returns


def test_the_state_the_model_computes_for_a_file_without_one_is_the_state_it_acted_with(recorded: Path) -> None:
    algo = learner("PPO", str(recorded), postprocess_inputs=True).build()  # the recording policy's weights (seed 0)
    rows = rows_of(recorded)
    fragment, _ = as_fragment(rows)
    stateless = {k: v for k, v in rows.items() if not k.startswith(("state_", "prev_"))}
    computed = algo.get_policy().recurrent_states(with_previous_steps(as_fragment(stateless)[0]))
    valid = fragment["valid"][:, 0]
    for column in ("state_in_0", "state_in_1", "state_out_0", "state_out_1"):
        np.testing.assert_allclose(computed[column][valid], fragment[column][valid], atol=1e-5)
    derived = with_previous_steps(as_fragment(stateless)[0])["prev_actions"]
    np.testing.assert_array_equal(derived[:, 0][valid], fragment["prev_actions"][:, 0][valid])
    algo.stop()


def test_sequences_start_from_the_file_s_state_where_it_has_one_and_from_the_model_s_where_not(recorded: Path) -> None:
    algo = learner("PPO", str(recorded), postprocess_inputs=True).build()  # the recording policy's weights (seed 0)
    policy = algo.get_policy()
    rows = rows_of(recorded)
    tampered = {**rows, "state_in_0": np.full_like(rows["state_in_0"], 7.0)}
    from_file = training_rows(policy, tampered, postprocess=False)
    assert from_file[SampleBatch.SEQ_LENS].sum() == len(rows["obs"]) and (from_file["state_in_0"] == 7.0).all()
    without = {k: v for k, v in rows.items() if not k.startswith("state_")}
    computed = training_rows(policy, without, postprocess=False)
    np.testing.assert_allclose(computed["state_in_0"], training_rows(policy, rows, postprocess=False)["state_in_0"], atol=1e-5)
    algo.stop()


@pytest.mark.parametrize(
    ("algo", "offline_data"),
    [
        ("BC", {}),
        ("MARWIL", {"postprocess_inputs": True}),
        ("PPO", {"postprocess_inputs": True}),
        ("IMPALA", {"postprocess_inputs": True}),
        ("R2D2", {}),
    ],
)
def test_each_recurrent_algorithm_trains_on_recorded_data_counting_steps(
    recorded: Path, algo: str, offline_data: dict[str, Any]
) -> None:
    config = learner(algo, str(recorded), **offline_data)
    if algo == "PPO":
        config = config.training(minibatch_size=100)
    if algo == "IMPALA":  # a sample call's steps: 2 x 50; a long block of rows is cut into sequences of 50
        # without the learner thread, whose first iteration reads a batch ahead
        config = config.training(train_batch_size=100, learner_thread=False).env_runners(num_envs_per_env_runner=2)
    trainer = config.build()
    trainer.train()
    result = trainer.train()
    batch, longest = config.train_batch_size, 50 if algo == "IMPALA" else LSTM["max_seq_len"]
    # sequences are whole: a batch holds its steps and less than a sequence's more per sample call (two at most)
    assert 2 * batch <= result["num_env_steps_sampled"] < 2 * (batch + 2 * longest), result["num_env_steps_sampled"]
    trainer.stop()


def test_marwil_bootstraps_a_truncated_episode_from_the_state_after_its_last_step() -> None:
    # one column: steps 0-1 of an episode cut off by the data's end, then its reset row holding the final observation
    fragment = SampleBatch(
        {
            SampleBatch.OBS: np.zeros((3, 1, 1), np.float32),
            SampleBatch.ACTIONS: np.array([[1], [0], [0]]),
            SampleBatch.REWARDS: np.array([[0.5], [2.0], [0.0]], np.float32),
            SampleBatch.VALID: np.array([[True], [True], [False]]),
            "state_in_0": np.array([[[0.0]], [[1.0]], [[0.0]]], np.float32),
            "state_out_0": np.array([[[1.0]], [[2.0]], [[0.0]]], np.float32),
            SampleBatch.PREV_ACTIONS: np.array([[0], [1], [0]]),
            SampleBatch.PREV_REWARDS: np.array([[0.0], [0.5], [0.0]], np.float32),
        }
    )
    inputs = step_inputs(fragment, [np.full(1, 9.0, np.float32)])
    # valid rows read their own inputs; the reset row the step after row 1: its state_out, action and reward
    assert inputs["state"][0][:, 0].tolist() == [0.0, 1.0, 2.0]
    assert inputs["prev_actions"].tolist() == [0, 1, 0] and inputs["prev_rewards"].tolist() == [0.0, 0.5, 2.0]
    first_reset = SampleBatch({**fragment, SampleBatch.VALID: np.array([[False], [True], [True]])})
    assert step_inputs(first_reset, [np.full(1, 9.0, np.float32)])["state"][0][0, 0] == 9.0  # nothing before: a start


def test_a_file_without_episode_ids_or_with_another_model_s_state_is_refused_naming_the_column(
    recorded: Path, tmp_path: Path
) -> None:
    rows = rows_of(recorded)
    del rows["eps_id"]
    pq.write_table(pa.table({k: list(v) if v.ndim > 1 else v for k, v in rows.items()}), tmp_path / "no_ids.parquet")
    with pytest.raises(ConfigError, match=r"column 'eps_id': missing.*recurrent model"):
        learner("BC", str(tmp_path / "no_ids.parquet")).build()
    bigger = learner("BC", str(recorded)).training(model={**LSTM, "lstm_cell_size": 12, "lstm_use_prev_action": True})
    with pytest.raises(ConfigError, match=r"column 'state_in_0': rows of shape \(8,\).*shape \(12,\).*another model"):
        bigger.build()
