"""Off-policy estimation: IS, WIS, DM and DR on recorded episodes, against the value measured online."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import corral
from corral import ConfigError, make_multi_agent
from corral.integrations.estimation.direct_method import DoublyRobust
from corral.integrations.estimation.estimator import TARGET_LOGP, Episodes, OffPolicyEstimator
from corral.integrations.estimation.importance_sampling import ImportanceSampling, WeightedImportanceSampling
from tests.conftest import small_ppo_config
from tests.toy_envs import SignGuessEnv

METHODS = {
    "is": {"type": "ImportanceSampling"},
    "wis": {"type": "WeightedImportanceSampling"},
    "dm": {"type": "DirectMethod", "q_model_config": {"n_iters": 20}},
    "dr": {"type": "DoublyRobust", "q_model_config": {"n_iters": 20}},
}


def sign_guess() -> Any:
    return small_ppo_config().environment(SignGuessEnv).training(gamma=1.0)


@pytest.fixture(scope="module")
def behaviour_episodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """2,000 episodes (10,000 rows) of an untrained PPO policy on SignGuessEnv: about half its guesses right."""
    folder = tmp_path_factory.mktemp("behaviour")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CORRAL_RESULTS_DIR", str(folder / "results"))
        algo = sign_guess().offline_data(output=str(folder / "episodes")).build()
        while algo.counters["num_env_steps_sampled"] < 10_000:
            algo.sample()
        algo.stop()
    yield folder / "episodes"


def test_estimates_of_a_target_policy_s_value_fall_within_10_percent_of_its_online_value(
    behaviour_episodes: Path, make_algo: Callable[..., Any]
) -> None:
    target = make_algo(sign_guess().training(lr=3e-3))
    for _ in range(3):
        target.train()
    config = (
        sign_guess()  # PPO: reading files to train from, it needs them postprocessed
        .offline_data(input_=str(behaviour_episodes), postprocess_inputs=True)
        .evaluation(evaluation_duration=2000, evaluation_config={"explore": True}, off_policy_estimation_methods=METHODS)
    )
    algo = make_algo(config)
    algo.set_weights(target.get_weights())
    result = algo.evaluate()
    online = result["episode_reward_mean"]  # 2,000 episodes of the target policy, exploring as it would
    estimates = {name: e["v_target"] for name, e in result["off_policy_estimator"].items()}
    behavior = result["off_policy_estimator"]["is"]["v_behavior"]
    # measured: online 4.20 against the behaviour's 2.52; IS 4.37, WIS 4.23, DM 4.23, DR 4.22
    assert online > behavior + 1.0  # the target policy is a different one, and better
    for name in ("is", "dr"):
        assert abs(estimates[name] - online) <= 0.1 * online, (name, estimates, online)
    for name in ("wis", "dm"):
        assert abs(estimates[name] - online) <= 0.15 * online, (name, estimates, online)
    gain = result["off_policy_estimator"]["dr"]
    assert gain["v_gain"] == pytest.approx(gain["v_target"] / gain["v_behavior"])
    assert gain["v_delta"] == pytest.approx(gain["v_target"] - gain["v_behavior"])


def test_train_reports_the_estimates_under_evaluation(behaviour_episodes: Path, make_algo: Callable[..., Any]) -> None:
    config = (
        corral.get_config("BC")
        .environment(SignGuessEnv)
        .training(train_batch_size=200)
        .offline_data(input_=str(behaviour_episodes))
        .evaluation(evaluation_interval=1, evaluation_duration=20, off_policy_estimation_methods={"wis": METHODS["wis"]})
    )
    result = make_algo(config).train()
    assert set(result["evaluation"]["off_policy_estimator"]["wis"]) >= {"v_behavior", "v_target", "v_gain", "v_delta"}


def episodes(rewards: list[list[float]], ratios: list[list[float]]) -> Episodes:
    flat_rewards = np.concatenate([np.asarray(r, np.float32) for r in rewards])
    target_logp = np.log(np.concatenate([np.asarray(r) for r in ratios]))
    rows = {"rewards": flat_rewards, "action_logp": np.zeros(len(flat_rewards)), TARGET_LOGP: target_logp}
    return Episodes(rows, np.cumsum([0] + [len(r) for r in rewards[:-1]]))


def test_importance_sampling_weighs_each_reward_by_the_product_of_the_ratios_so_far() -> None:
    estimate = ImportanceSampling(None, 0.5).estimate(episodes([[1.0, 1.0, 1.0]], [[2.0, 0.5, 3.0]]))
    assert estimate["v_behavior"] == pytest.approx(1 + 0.5 + 0.25)
    assert estimate["v_target"] == pytest.approx(2 * 1 + 0.5 * (2 * 0.5) + 0.25 * (2 * 0.5 * 3))


def test_weighted_importance_sampling_divides_by_the_mean_weight_of_each_step() -> None:
    wis = WeightedImportanceSampling(None, 1.0)
    estimate = wis.estimate(episodes([[1.0, 1.0], [1.0]], [[2.0, 2.0], [4.0]]))
    # step 0: weights 2 and 4, mean 3; step 1: weight 4 (only the first episode is that long), mean 4
    assert estimate["v_target"] == pytest.approx(np.mean([2 / 3 + 4 / 4, 4 / 3]))
    # the means go on over later evaluations
    again = wis.estimate(episodes([[1.0]], [[1.0]]))
    assert again["v_target"] == pytest.approx(1.0 / ((2 + 4 + 1) / 3))


def test_doubly_robust_corrects_the_model_s_values_backwards_by_the_step_ratios() -> None:
    class GivenModel(DoublyRobust):
        def __init__(self) -> None:
            OffPolicyEstimator.__init__(self, None, 0.9)

    (episode,) = episodes([[1.0, 2.0]], [[2.0, 0.5]])
    episode |= {"q_model_q": np.array([0.5, 1.0]), "q_model_v": np.array([1.0, 3.0])}
    # step 1: 3 + 0.5 * (2 - 1) = 3.5; step 0: 1 + 2 * (1 + 0.9 * 3.5 - 0.5) = 8.3
    assert GivenModel().estimate_episode(episode) == pytest.approx((1 + 0.9 * 2, 8.3))
    # a model whose Q is its V everywhere, with the behaviour's own ratios: the discounted return
    episode |= {"q_model_q": np.array([0.5, 1.0]), "q_model_v": np.array([0.5, 1.0]), TARGET_LOGP: np.zeros(2)}
    assert GivenModel().estimate_episode(episode)[1] == pytest.approx(1 + 0.9 * 2)


def test_an_estimator_is_a_plugin_found_by_name(behaviour_episodes: Path, make_algo: Callable[..., Any]) -> None:
    class FirstReward(OffPolicyEstimator):
        """Estimates every episode's value as its first reward."""

        def estimate_episode(self, episode: dict[str, np.ndarray]) -> tuple[float, float]:
            return float(episode["rewards"].sum()), float(episode["rewards"][0])

    corral.register_estimator("FirstReward", FirstReward)
    assert "FirstReward" in {p.name for p in corral.list_estimators()}
    assert {"ImportanceSampling", "DoublyRobust"} <= {p.name for p in corral.list_estimators()}
    config = (
        sign_guess()  # PPO: reading files to train from, it needs them postprocessed
        .offline_data(input_=str(behaviour_episodes), postprocess_inputs=True)
        .evaluation(evaluation_duration=50, off_policy_estimation_methods={"first": {"type": "firstreward"}})
    )
    estimate = make_algo(config).evaluate()["off_policy_estimator"]["first"]
    assert 0 < estimate["v_target"] < 1


@pytest.mark.parametrize(
    ("methods", "message"),
    [
        ({"is": {"type": "ImportanceSampler"}}, "ImportanceSampling"),
        ({"is": "ImportanceSampling"}, "must be a dict with a 'type'"),
        ({"dr": {"type": "DoublyRobust", "q_model": {}}}, "DoublyRobust has no option 'q_model'"),
    ],
)
def test_bad_estimation_methods_are_refused(methods: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        sign_guess().evaluation(off_policy_estimation_methods=methods).validate()


def test_estimation_needs_recorded_episodes_with_the_behaviour_s_likelihoods(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="estimates on recorded episodes"):
        sign_guess().evaluation(off_policy_estimation_methods=METHODS).build()
    rows = {"obs": [[0.0, 1.0]] * 5, "actions": [1] * 5, "rewards": [1.0] * 5, "new_obs": [[0.2, 1.0]] * 5}
    rows |= {"terminateds": [False] * 4 + [True], "truncateds": [False] * 5}
    pq.write_table(pa.table(rows), tmp_path / "no_logp.parquet")
    with pytest.raises(ConfigError, match=r"no_logp\.parquet.*column 'action_logp': missing"):
        sign_guess().evaluation(
            evaluation_config={"input": str(tmp_path / "no_logp.parquet")}, off_policy_estimation_methods=METHODS
        ).build()


def test_model_based_estimators_need_discrete_actions_and_estimation_one_policy(behaviour_episodes: Path) -> None:
    pendulum = corral.get_config("SAC").environment("Pendulum-v1").debugging(seed=0)
    data = Path(corral.__file__).parent / "tuned_examples" / "data" / "pendulum_sac.parquet"
    with pytest.raises(ConfigError, match="DirectMethod fits a Q model over every action and needs a Discrete"):
        pendulum.offline_data(input_=str(data), actions_in_input_normalized=True).evaluation(
            off_policy_estimation_methods={"dm": METHODS["dm"]}
        ).build()
    two = sign_guess().environment(make_multi_agent(SignGuessEnv), env_config={"num_agents": 2})
    two = two.multi_agent(policies={"a", "b"}, policy_mapping_fn=lambda agent_id, *a, **k: "ab"[agent_id])
    with pytest.raises(ConfigError, match="needs a single-agent run"):
        two.evaluation(evaluation_config={"input": str(behaviour_episodes)}, off_policy_estimation_methods=METHODS).build()


def test_estimation_methods_without_the_estimation_integration_are_refused_before_any_env_is_made(
    behaviour_episodes: Path, disable_plugins: Callable[[str], None]
) -> None:
    made: list[int] = []

    class CountedSignGuess(SignGuessEnv):
        def __init__(self, config: Any = None) -> None:
            made.append(1)
            super().__init__(config)

    config = (
        small_ppo_config()
        .environment(CountedSignGuess)
        .evaluation(evaluation_config={"input": str(behaviour_episodes)}, off_policy_estimation_methods=METHODS)
    )
    disable_plugins("estimation")  # the user's kill switch: as if it were not installed
    with pytest.raises(ConfigError, match=r"needs corral's estimation integration.*did not load"):
        config.build()
    assert made == []
