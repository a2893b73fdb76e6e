"""ExternalMultiAgentEnv: an application with several agents per episode, sampled by env runners like any env."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from corral import ConfigError, PolicySpec
from corral.core.common.sample_batch import SampleBatch
from corral.core.environments.external_env import ExternalEnv
from corral.core.environments.external_multi_agent_env import ExternalMultiAgentEnv
from corral.errors import EnvError
from corral.plugins.ppo import PPOConfig
from tests.conftest import best_return_within
from tests.core.test_external_env_runner import play_in_threads

SPACE = gym.spaces.Box(0.0, 10.0, (1,), np.float32)


class TurnTaking(ExternalMultiAgentEnv):
    """Agents "a" and "b" take turns for 4 steps: "a" acts on even steps, "b" on odd ones.

    Every step rewards both agents (``a`` by 1, ``b`` by 10), so each agent's row sums the rewards of its own step and
    the other's. ``env_config``: ``b_quits`` marks "b" done after its first action (``multiagent_done_dict``);
    ``logged`` logs "a"'s action 1 itself.
    """

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(gym.spaces.Discrete(2), SPACE)
        self.config = config

    def run(self) -> None:
        try:
            while True:
                self.play()
        except EnvError:  # the runner stopped
            pass

    def play(self) -> None:
        episode = self.start_episode()
        b_done = False
        for t in range(4):
            agent = "a" if t % 2 == 0 else "b"
            if agent == "b" and b_done:
                continue
            obs = {agent: np.array([t], np.float32)}
            if agent == "a" and self.config.get("logged"):
                self.log_action(episode, obs, {"a": 1})
            else:
                self.get_action(episode, obs)
            done = {"b": True} if agent == "b" and self.config.get("b_quits") else None
            b_done = b_done or done is not None
            self.log_returns(episode, {"a": 1.0, "b": 10.0} if not b_done or agent == "b" else {"a": 1.0}, None, done)
        self.end_episode(episode, {"a": np.array([4], np.float32)})


def turn_taking(**env_config: Any) -> PPOConfig:
    return (
        PPOConfig()
        .environment(TurnTaking, env_config=env_config)
        .multi_agent(
            policies={"pa": PolicySpec(), "pb": PolicySpec()},
            policy_mapping_fn=lambda agent_id, episode, **kwargs: f"p{agent_id}",
        )
        .env_runners(rollout_fragment_length=16)
        .training(train_batch_size=32, minibatch_size=16, num_epochs=1)
        .debugging(seed=0)
    )


def rows(batch: Any) -> set[tuple[float, float, bool]]:
    """Each kind of row of a batch: its observation, reward and whether it terminated."""
    columns = (batch[SampleBatch.OBS][:, 0], batch[SampleBatch.REWARDS], batch[SampleBatch.TERMINATEDS])
    return {(float(o), float(r), bool(d)) for o, r, d in zip(*columns, strict=True)}


def test_each_agent_s_rows_go_to_its_policy_with_the_rewards_it_got_until_it_next_acted(make_algo: Any) -> None:
    algo = make_algo(turn_taking())
    runner = algo.env_runner_group.local_env_runner
    samples = runner.sample()
    assert samples.env_steps == 16 and samples.agent_steps == 16  # one agent acts per step
    # "a" acts at t=0 and 2: its row at 0 gets the step's and b's reward (1 + 1), at 2 its own and the episode's end;
    # "b" acts at t=1 and 3: 10 for its step and 10 for a's next, then its last row ends with the episode
    assert rows(samples.policy_batches["pa"]) == {(0.0, 2.0, False), (2.0, 2.0, True)}
    assert rows(samples.policy_batches["pb"]) == {(1.0, 20.0, False), (3.0, 10.0, True)}
    episodes = runner.get_metrics()
    assert episodes and all((e.reward, e.length) == (44.0, 4) for e in episodes)
    assert all(e.policy_rewards == {"pa": [4.0], "pb": [40.0]} for e in episodes)
    result = algo.train()
    assert result["policy_reward_mean"] == {"pa": 4.0, "pb": 40.0}
    assert set(result["info"]["learner"]) == {"pa", "pb"}


def test_an_agent_marked_done_acts_no_more_and_its_last_row_is_terminated(make_algo: Any) -> None:
    runner = make_algo(turn_taking(b_quits=True)).env_runner_group.local_env_runner
    samples = runner.sample()
    assert rows(samples.policy_batches["pb"]) == {(1.0, 10.0, True)}  # b acts once per episode
    assert rows(samples.policy_batches["pa"]) == {(0.0, 2.0, False), (2.0, 1.0, True)}


def test_actions_the_application_logged_for_an_agent_are_recorded_with_the_policy_s_likelihood(make_algo: Any) -> None:
    algo = make_algo(turn_taking(logged=True))
    a = algo.env_runner_group.local_env_runner.sample().policy_batches["pa"]
    assert np.all(a[SampleBatch.ACTIONS] == 1)
    expected = algo.get_policy("pa").compute_log_likelihoods(a[SampleBatch.OBS], a[SampleBatch.ACTIONS])
    np.testing.assert_allclose(a[SampleBatch.ACTION_LOGP], expected, rtol=1e-5)


def test_what_the_agents_did_is_written_as_offline_data_with_each_row_s_episode_agent_and_step(tmp_path: Path) -> None:
    import pyarrow.parquet as pq  # a test extra

    algo = turn_taking().offline_data(output=str(tmp_path)).build()
    algo.train()
    algo.stop()
    for policy_id, agent_index, steps in (("pa", 0, {0, 2}), ("pb", 1, {1, 3})):
        (file,) = tmp_path.glob(f"output-*_worker-0_policy-{policy_id}_0.parquet")
        table = pq.read_table(file).to_pydict()
        assert set(table["agent_index"]) == {agent_index} and set(table["t"]) == steps
        assert table["t"] == [int(obs[0]) for obs in table["obs"]]  # the step an agent acted at is its observation here
        for eps_id in set(table["eps_id"]):  # an agent's rows of an episode: its two steps, the last one terminated
            mine = [i for i, e in enumerate(table["eps_id"]) if e == eps_id]
            assert [table["terminateds"][i] for i in mine] in ([False, True], [False], [True])


def test_what_an_application_gets_wrong_about_agents_is_refused_with_the_reason() -> None:
    env = TurnTaking({})
    episode = env.start_episode()
    with pytest.raises(EnvError, match=r"reward \{'a': 'x'\}: it is a dict of numbers by agent"):
        env.log_returns(episode, {"a": "x"})
    with pytest.raises(EnvError, match=r"the reward 1\.0: it is a dict of numbers by agent"):
        env.log_returns(episode, 1.0)  # type: ignore[arg-type]
    with pytest.raises(EnvError, match=r"observation_dict must be a non-empty dict by agent id"):
        env.log_action(episode, np.zeros(1, np.float32), {"a": 1})  # type: ignore[arg-type]
    with pytest.raises(EnvError, match=r"logged actions for agents \['b'\] and observations for \['a'\]"):
        env.log_action(episode, {"a": np.zeros(1, np.float32)}, {"b": 1})
    with pytest.raises(EnvError, match=r"agent 'a' logged the action 5, not in Discrete\(2\)"):
        env.log_action(episode, {"a": np.zeros(1, np.float32)}, {"a": 5})


class SingleAgentApp(ExternalEnv):
    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(gym.spaces.Discrete(2), SPACE)

    def run(self) -> None:
        raise AssertionError("never run: the config is refused at build")


def test_multi_agent_policies_with_a_single_agent_application_are_refused_at_build() -> None:
    config = turn_taking().environment(SingleAgentApp)
    with pytest.raises(ConfigError, match=r"SingleAgentApp plays single-agent episodes: subclass corral.ExternalMultiAgentEnv"):
        config.build()


class TwoCartPoles(ExternalMultiAgentEnv):
    """Two agents, each balancing its own pole, in threads of episodes; an agent whose pole fell is done."""

    def __init__(self, config: dict[str, Any]) -> None:
        env = gym.make("CartPole-v1")
        super().__init__(env.action_space, env.observation_space)

    def run(self) -> None:
        play_in_threads(self.play, [(seed,) for seed in range(4)])

    def play(self, seed: int) -> None:
        envs = {agent: gym.make("CartPole-v1") for agent in ("left", "right")}
        try:
            while True:
                obs = {agent: env.reset(seed=seed)[0] for agent, env in envs.items()}
                seed += 100
                episode = self.start_episode()
                while obs:
                    actions = self.get_action(episode, obs)
                    rewards, done, last = {}, {}, {}
                    for agent, action in actions.items():
                        o, rewards[agent], terminated, truncated, _ = envs[agent].step(action)
                        done[agent] = terminated or truncated
                        (last if done[agent] else obs)[agent] = o
                    obs = {agent: o for agent, o in obs.items() if not done[agent]}
                    self.log_returns(episode, rewards, None, {a: True for a, d in done.items() if d and obs})
                self.end_episode(episode, last)
        except EnvError:  # the runner stopped
            pass


@pytest.mark.slow
def test_ppo_learns_two_cartpoles_through_an_application_with_two_agents(make_algo: Any) -> None:
    algo = make_algo(
        PPOConfig()
        .environment(TwoCartPoles)
        .env_runners(rollout_fragment_length=1000)
        .training(train_batch_size=2000, minibatch_size=256, num_epochs=10, lr=3e-4)
        .debugging(seed=0)
    )
    best, steps = best_return_within(algo, 40_000, 300.0)  # both poles: the sum of the two agents' returns
    assert best >= 300.0, f"mean return {best:.1f} after {steps} steps"
