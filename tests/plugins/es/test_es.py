"""ES's and ARS's own behaviour: RLlib's names and defaults, their rules, the rank transform, both updates, the
perturbed episodes and what a run reports. Their runs on remote env runners are in test_es_remote.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import corral
from corral.core.sampling.metrics import EpisodeSummary
from corral.errors import ConfigError
from corral.plugins.es import ARS, ES, ARSConfig, ESConfig
from corral.plugins.es.algorithm import IterationHistory
from corral.plugins.es.noise import centered_ranks, make_noise
from corral.plugins.es.rollouts import RolloutRequest, play_perturbations
from corral.plugins.es.slot_model import SlotModel

TINY = {"num_env_runners": 0, "noise_size": 100_000, "model": {"fcnet_hiddens": [8]}, "seed": 0}


def es(**overrides) -> ESConfig:
    sizes = {"episodes_per_batch": 4, "train_batch_size": 50}
    return ESConfig().environment("CartPole-v1").update_from_dict({**TINY, **sizes, **overrides})


def ars(**overrides) -> ARSConfig:
    return ARSConfig().environment("CartPole-v1").update_from_dict({**TINY, "num_rollouts": 4, "rollouts_used": 2, **overrides})


def test_es_and_ars_are_found_by_rllib_s_names_with_rllib_s_defaults() -> None:
    assert corral.get_algorithm("es") is ES and corral.get_algorithm("ars") is ARS
    config = corral.get_config("ES")
    assert isinstance(config, ESConfig)
    assert (config.noise_stdev, config.l2_coeff, config.episodes_per_batch, config.stepsize) == (0.02, 0.005, 1000, 0.01)
    assert (config.noise_size, config.eval_prob, config.report_length, config.action_noise_std) == (250_000_000, 0.03, 10, 0.01)
    assert (config.train_batch_size, config.num_env_runners, config.observation_filter) == (10_000, 10, "MeanStdFilter")
    assert config.num_envs_per_env_runner == 8  # corral's: episodes side by side (RLlib's ES plays one at a time)
    config = corral.get_config("ARS")
    assert isinstance(config, ARSConfig)
    assert (config.num_rollouts, config.rollouts_used, config.sgd_stepsize, config.offset) == (32, 32, 0.01, 0.0)
    assert (config.noise_stdev, config.eval_prob, config.action_noise_std, config.num_env_runners) == (0.02, 0.03, 0.0, 2)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"num_learners": 1}, r"^num_learners > 0: ES and ARS update the weights from episode returns"),
        ({"policies": ["a", "b"]}, r"^ES and ARS perturb one policy"),
        ({"noise_size": 10}, r"^noise_size=10 is shorter than the policy's \d+ weights"),
    ],
)
def test_what_perturbing_whole_weights_rules_out_is_refused_before_any_work(overrides, message) -> None:
    with pytest.raises(ConfigError, match=message):
        es(**overrides).build()


def test_centered_ranks_spread_the_returns_evenly_over_minus_a_half_to_a_half() -> None:
    returns = np.array([[10.0, -3.0], [0.5, 7.0]])
    np.testing.assert_allclose(centered_ranks(returns), [[0.5, -0.5], [-1 / 6, 1 / 6]], rtol=1e-6)


def test_the_noise_table_is_seeded_once_and_for_all() -> None:
    np.testing.assert_array_equal(make_noise(1000), make_noise(1000))
    assert make_noise(10).dtype == np.float32


def test_es_steps_along_the_centered_rank_estimate_with_weight_decay(make_algo) -> None:
    algo = make_algo(es(l2_coeff=0.1))
    theta = algo.get_policy().get_flat_weights()
    dim = theta.size
    indices = np.array([0, 7, 100])
    returns = np.array([[3.0, 1.0], [0.0, 5.0], [2.0, 2.5]], np.float32)
    ranks = centered_ranks(returns)
    expected = -sum((ranks[i, 0] - ranks[i, 1]) * algo.noise[s : s + dim] for i, s in enumerate(indices)) / 6 + 0.1 * theta
    np.testing.assert_allclose(algo.gradient(indices, returns, theta), expected, rtol=1e-5, atol=1e-6)


def test_ars_steps_along_its_best_directions_scaled_by_their_spread(make_algo) -> None:
    algo = make_algo(ars(num_rollouts=8, rollouts_used=4))  # four directions: the best two by their better return
    theta = algo.get_policy().get_flat_weights()
    dim = theta.size
    indices = np.array([0, 7, 100, 300])
    returns = np.array([[3.0, 1.0], [0.0, 5.0], [2.0, 2.5], [1.0, 0.5]], np.float32)
    kept = returns[[0, 1]]
    ascent = sum((kept[k, 0] - kept[k, 1]) * algo.noise[s : s + dim] for k, s in enumerate([0, 7])) / 2 / np.std(kept)
    np.testing.assert_allclose(algo.gradient(indices, returns, theta), -ascent, rtol=1e-5, atol=1e-6)


def test_a_round_plays_mirrored_pairs_and_leaves_the_learners_weights_as_they_were(make_algo) -> None:
    algo = make_algo(es(eval_prob=0.5))
    policy = algo.get_policy()
    theta = policy.get_flat_weights()
    runner = algo.env_runner_group.local_env_runner
    played = play_perturbations(RolloutRequest(theta, algo.noise, None, 6, 0.02, 0.5, 0.0), runner)
    assert len(played.noise_indices) == len(played.returns) == len(played.lengths) == 6
    assert played.eval_returns and len(played.eval_returns) == len(played.eval_lengths)  # 0.5 of the slots, about
    assert all(r == length for r, length in zip(played.eval_returns, played.eval_lengths, strict=True))  # CartPole: 1 a step
    np.testing.assert_array_equal(policy.get_flat_weights(), theta)
    assert played.filter_delta is None and policy.observation_filter.count > 0  # the learner's own filter learned


def test_episodes_side_by_side_count_each_step_of_each_episode_once_until_it_ends(make_algo) -> None:
    algo = make_algo(es(eval_prob=0.3, num_envs_per_env_runner=3))  # 3 sub-environments for 5+ episodes: two rounds
    policy = algo.get_policy()
    runner = algo.env_runner_group.local_env_runner
    assert runner.base_env.num_envs == 3
    played = play_perturbations(RolloutRequest(policy.get_flat_weights(), algo.noise, None, 4, 0.02, 0.3, 0.0), runner)
    lengths = [n for pair in played.lengths for n in pair] + played.eval_lengths
    assert len(played.returns) == 4 and all(r == n for r, n in zip(played.eval_returns, played.eval_lengths, strict=True))
    assert [r for pair in played.returns for r in pair] == [float(n) for pair in played.lengths for n in pair]
    # the filter saw every step of every episode, and no step of a sub-environment whose episode had ended
    assert policy.observation_filter.count == sum(lengths)


def _leaning(policy, rows: list[int]) -> np.ndarray:
    """Weights, a row each, whose policy picks action ``rows[i]`` with certainty (its head's bias says so)."""
    weights = np.repeat(policy.get_flat_weights()[None], len(rows), axis=0)
    start = 0
    for name, param in policy.model.named_parameters():
        if name == "pi_head.bias":
            for row, action in enumerate(rows):
                weights[row, start : start + 2] = [50.0, -50.0] if action == 0 else [-50.0, 50.0]
        start += param.numel()
    return weights


@pytest.mark.parametrize("at_once", [True, False], ids=["linear layers at once", "any model row by row"])
def test_each_side_by_side_episode_acts_with_its_own_weights(make_algo, monkeypatch, at_once) -> None:
    algo = make_algo(es())
    policy = algo.get_policy()
    if not at_once:
        monkeypatch.setattr(SlotModel, "of", classmethod(lambda cls, model, slots: None))
    rows = [0, 1, 1, 0, 1]
    act = policy.side_by_side(_leaning(policy, rows))
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    assert act(obs).tolist() == rows


def test_a_slot_model_gives_row_i_the_model_s_outputs_with_weights_i(make_algo) -> None:
    policy = make_algo(es()).get_policy()
    weights = np.random.default_rng(1).normal(size=(3, policy.num_params)).astype(np.float32)
    slot_model = SlotModel.of(policy.model, 3)
    assert slot_model is not None
    slot_model.load(weights)
    obs = torch.randn(3, 4)
    together = slot_model.module(obs)["action_dist_inputs"]
    for row in range(3):
        policy.set_flat_weights(weights[row])
        alone = policy.model(obs[row : row + 1])["action_dist_inputs"]
        torch.testing.assert_close(together[row : row + 1], alone, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"weights of shape \(2, \d+\) for 3 slots"):
        slot_model.load(weights[:2])


def test_a_model_with_weights_outside_linear_layers_has_no_slot_model(make_algo) -> None:
    pendulum = (
        ESConfig().environment("Pendulum-v1").update_from_dict({**TINY, "model": {"fcnet_hiddens": [8], "free_log_std": True}})
    )
    policy = make_algo(pendulum).get_policy()  # the log-std is a vector of its own
    assert SlotModel.of(policy.model, 2) is None
    assert SlotModel.of(make_algo(es()).get_policy().model, 2) is not None


def test_gaussian_action_noise_goes_on_the_perturbed_episodes_actions_only(make_algo, monkeypatch) -> None:
    pendulum = ESConfig().environment("Pendulum-v1").update_from_dict({**TINY, "action_noise_std": 0.5})
    algo = make_algo(pendulum)
    policy = algo.get_policy()
    runner = algo.env_runner_group.local_env_runner
    monkeypatch.setattr(policy, "side_by_side", lambda weights: lambda obs: np.zeros((len(obs), 1), np.float32))
    sent = []
    step = runner.base_env.step
    monkeypatch.setattr(runner.base_env, "step", lambda actions: (sent.append(np.array(actions)), step(actions))[1])
    played = play_perturbations(RolloutRequest(policy.get_flat_weights(), algo.noise, None, 1, 0.02, 0.5, 0.5), runner)
    assert 1 <= len(played.eval_returns) <= runner.base_env.num_envs - 2  # one round: a pair, unperturbed ones, idle ones
    moved = [row for row in range(runner.base_env.num_envs) if np.any(sent[0][row] != 0.0)]
    assert len(moved) == 2 and all(len(actions) == runner.base_env.num_envs for actions in sent)


def test_ars_subtracts_the_offset_from_every_reward(make_algo) -> None:
    algo = make_algo(ars(offset=1.0))
    runner = algo.env_runner_group.local_env_runner
    theta = algo.get_policy().get_flat_weights()
    played = play_perturbations(RolloutRequest(theta, algo.noise, None, 3, 0.02, 0.0, 0.0, offset=1.0), runner)
    assert all(pair == (0.0, 0.0) for pair in played.returns)  # CartPole's reward of 1 a step, less 1


def test_an_iteration_counts_the_perturbed_episodes_and_reports_the_unperturbed_ones(make_algo) -> None:
    algo = make_algo(es(eval_prob=0.3))
    before = algo.get_policy().get_flat_weights()
    result = algo.train()
    info = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert info["episodes_this_iter"] >= 4 and info["episodes_this_iter"] % 2 == 0
    assert result["num_env_steps_sampled"] == result["num_env_steps_trained"] >= 50
    assert result["episodes_this_iter"] == len(algo.history.episodes)  # the unperturbed ones: the first iteration's
    assert info["update_ratio"] > 0 and not np.array_equal(algo.get_policy().get_flat_weights(), before)
    assert algo.get_state()["episodes_so_far"] == info["episodes_so_far"] == info["episodes_this_iter"]


def test_the_reported_return_is_the_last_report_length_iterations_unperturbed_episodes() -> None:
    history = IterationHistory(2)
    for rewards in ([1.0, 2.0], [], [3.0], [4.0, 5.0]):
        history.add([EpisodeSummary(r, 1) for r in rewards])
    assert [e.reward for e in history.episodes] == [3.0, 4.0, 5.0] and history.total == 5
    restored = IterationHistory(2)
    restored.set_state(history.get_state())
    restored.add([EpisodeSummary(6.0, 1)])
    assert [e.reward for e in restored.episodes] == [3.0, 4.0, 5.0, 6.0]


def test_a_seed_gives_the_same_run_and_a_checkpoint_resumes_it(make_algo, tmp_path) -> None:
    first = make_algo(ars())
    for _ in range(2):
        first.train()
    path = first.save(str(tmp_path / "ckpt"))
    third = first.train()
    resumed = make_algo(ars())
    resumed.restore(path)
    assert (
        resumed.episodes_so_far
        == first.get_state()["episodes_so_far"]
        - third["info"]["learner"]["default_policy"]["learner_stats"]["episodes_this_iter"]
    )
    again = resumed.train()
    np.testing.assert_array_equal(resumed.get_policy().get_flat_weights(), first.get_policy().get_flat_weights())
    assert again["num_env_steps_sampled"] == third["num_env_steps_sampled"]


def test_a_restored_run_reports_over_the_same_window_of_iterations(make_algo) -> None:
    first = make_algo(ars(report_length=3))
    first.train()
    resumed = make_algo(ars(report_length=3))
    resumed.set_state(first.get_state())
    assert isinstance(resumed.history, IterationHistory) and resumed.history._iterations == 3
