"""A multi-agent config's PolicyServerInput: clients play ExternalMultiAgentEnv episodes, with values by agent id."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from corral import PolicySpec
from corral.core.sampling.external.io_context import IOContext
from corral.integrations.serving.policy_client import PolicyClient
from corral.integrations.serving.policy_server_input import PolicyServerInput
from corral.integrations.serving.protocol import ProtocolError
from corral.plugins.ppo import PPOConfig
from tests.core.test_external_multi_agent_env import rows
from tests.integrations.serving.test_policy_server import _json, _post

ONE = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
TWO = gym.spaces.Box(0.0, 10.0, (2,), np.float32)
CHOICE = gym.spaces.Discrete(2)


def served(port: int = 0) -> PPOConfig:
    """Two policies with their own spaces (only theirs), agent "a" -> "pa" and "b" -> "pb", served on ``port``."""
    return (
        PPOConfig()
        .environment(env=None)
        .multi_agent(
            policies={"pa": PolicySpec(None, ONE, CHOICE), "pb": PolicySpec(None, TWO, CHOICE)},
            policy_mapping_fn=lambda agent_id, episode, **kwargs: f"p{agent_id}",
        )
        .offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "localhost", port))
        .env_runners(num_env_runners=0, rollout_fragment_length=16)
        .training(train_batch_size=32, minibatch_size=16, num_epochs=1)
        .debugging(seed=0)
    )


def play_turns(address: str, b_quits: bool) -> None:
    """The turn-taking game of test_external_multi_agent_env, through a remote PolicyClient, until the server stops."""
    client = PolicyClient(address, inference_mode="remote", max_retry_s=1.0)
    try:
        while True:
            episode, b_done = client.start_episode(), False
            for t in range(4):
                agent = "a" if t % 2 == 0 else "b"
                if agent == "b" and b_done:
                    continue
                observation = {agent: np.full(1 if agent == "a" else 2, t, np.float32)}
                action = client.get_action(episode, observation)
                assert set(action) == {agent} and action[agent] in (0, 1)
                done = {"b": True} if agent == "b" and b_quits else None
                b_done = b_done or done is not None
                rewards = {"a": 1.0, "b": 10.0} if not b_done or agent == "b" else {"a": 1.0}
                client.log_returns(episode, rewards, None, done)
            client.end_episode(episode, {"a": np.full(1, 4, np.float32)})
    except (ConnectionError, ProtocolError):  # the runner stopped
        pass


@pytest.mark.parametrize("b_quits", [False, True], ids=["both play on", "b quits"])
def test_clients_play_multi_agent_episodes_each_agent_s_rows_go_to_its_policy(make_algo: Any, b_quits: bool) -> None:
    algo = make_algo(served())
    runner = algo.env_runner_group.local_env_runner
    client = threading.Thread(target=play_turns, args=(runner.env.address, b_quits), daemon=True)
    client.start()
    samples = runner.sample()
    a, b = rows(samples.policy_batches["pa"]), rows(samples.policy_batches["pb"])
    if b_quits:
        assert a == {(0.0, 2.0, False), (2.0, 1.0, True)} and b == {(1.0, 10.0, True)}
    else:
        assert a == {(0.0, 2.0, False), (2.0, 2.0, True)} and b == {(1.0, 20.0, False), (3.0, 10.0, True)}
    result = algo.train()
    assert set(result["info"]["learner"]) == {"pa", "pb"} and result["policy_reward_mean"]["pa"] > 0


@pytest.fixture
def server() -> Iterator[PolicyServerInput]:
    """A multi-agent server with no runner: what reaches it is read with ``poll``."""
    running = PolicyServerInput(IOContext(config=served()), "localhost", 0)
    yield running
    running.close()


A_OBS = {"a": [1.0]}
MALFORMED = {
    "a bare observation": (_json(command="LOG_ACTION", episode_id="e1", observation=[1.0], action=0), 400),
    "no agent at all": (_json(command="GET_ACTION", episode_id="e1", observation={}), 400),
    "an agent's observation of another policy's shape": (
        _json(command="GET_ACTION", episode_id="e1", observation={"b": [1.0]}),
        400,
    ),
    "an agent no policy takes": (_json(command="GET_ACTION", episode_id="e1", observation={"c": [1.0]}), 400),
    "an action for another agent": (_json(command="LOG_ACTION", episode_id="e1", observation=A_OBS, action={"b": 0}), 400),
    "a probability for several agents": (
        _json(command="LOG_ACTION", episode_id="e1", observation=A_OBS, action={"a": 0}, action_prob=0.5),
        400,
    ),
    "a bare reward": (_json(command="LOG_RETURNS", episode_id="e1", reward=1.0), 400),
    "a done flag that is no flag": (_json(command="LOG_RETURNS", episode_id="e1", reward={"a": 1.0}, dones={"a": 1}), 400),
    "a copy of the policy asked for": (_json(command="GET_WORKER_ARGS"), 400),
}


@pytest.mark.parametrize("body", [pytest.param(case, id=name) for name, case in MALFORMED.items()])
def test_a_malformed_multi_agent_request_gets_its_4xx_and_nothing_of_it_is_used(server: PolicyServerInput, body: Any) -> None:
    client = PolicyClient(server.address, "remote")
    started = client.start_episode("e1")
    status, reason = _post(server.port, body[0], token=None)
    assert status == body[1], reason
    assert server.poll(timeout=0.2) == [], "nothing of it reached the runner"
    client.log_action(started, {"a": np.ones(1, np.float32)}, {"a": 1})  # and the server serves on
    (step,) = server.poll(timeout=5)
    assert set(step.observation) == {"a"} and step.action == {"a": 1}


def test_a_multi_agent_server_s_clients_act_remotely_and_are_told_why() -> None:
    config = served()
    running = PolicyServerInput(IOContext(config=config), "localhost", 0)
    try:
        with pytest.raises(ProtocolError, match=r"policy_mapping_fn picks \(code, never sent\): .* inference_mode='remote'"):
            PolicyClient(running.address, inference_mode="local")
    finally:
        running.close()
