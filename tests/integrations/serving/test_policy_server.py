"""PolicyServerInput and PolicyClient as RLlib's server scripts use them: clients in processes of their own."""

from __future__ import annotations

import http.client
import json
import pickle
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from corral import ConfigError
from corral.core.sampling.external.io_context import IOContext
from corral.integrations.serving.policy_client import PolicyClient
from corral.integrations.serving.policy_server_input import PolicyServerInput
from corral.plugins.ppo import PPOConfig
from tests.conftest import best_return_within
from tests.recurrent_replay import replay_sequences

CLIENT = Path(__file__).with_name("cartpole_client.py")
CARTPOLE = gym.make("CartPole-v1")


def served(**server: Any) -> PPOConfig:
    """RLlib's cartpole_server.py config: no env, the spaces given, a PolicyServerInput on a free port."""
    return (
        PPOConfig()
        .environment(env=None, observation_space=CARTPOLE.observation_space, action_space=CARTPOLE.action_space)
        .offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "localhost", 0, **server))
        .env_runners(num_env_runners=0, rollout_fragment_length=500)
        .training(train_batch_size=500, minibatch_size=128, num_epochs=1)
        .debugging(seed=0)
    )


def port_of(algo: Any) -> int:
    return int(algo.env_runner_group.local_env_runner.env.port)


def clients(port: int, count: int, steps: int = 0, mode: str = "remote") -> list[subprocess.Popen[str]]:
    command = [sys.executable, str(CLIENT), str(port)]
    return [
        subprocess.Popen([*command, str(seed), str(steps), mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for seed in range(count)
    ]


def stop(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        process.kill()
        process.wait(timeout=30)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        process.stderr.close()


@pytest.fixture
def playing() -> Iterator[list[subprocess.Popen[str]]]:
    """The client processes a test starts, killed at teardown."""
    started: list[subprocess.Popen[str]] = []
    yield started
    stop(started)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["remote", "local"])
def test_rllib_s_cartpole_server_and_client_pattern_reaches_150(make_algo: Any, playing: list, mode: str) -> None:
    algo = make_algo(served().training(train_batch_size=1000, num_epochs=10, lr=3e-4).env_runners(rollout_fragment_length=1000))
    playing += clients(port_of(algo), 4, mode=mode)
    best, steps = best_return_within(algo, 40_000 if mode == "remote" else 60_000, 150.0)
    assert best >= 150.0, f"mean return {best:.1f} after {steps} steps"


@pytest.mark.slow
def test_eight_concurrent_clients_lose_no_step(make_algo: Any, playing: list) -> None:
    algo = make_algo(served().env_runners(rollout_fragment_length=1000).training(train_batch_size=1000))
    playing += clients(port_of(algo), 8, steps=2000)
    sampled = episodes = 0
    while sampled < 16_000:
        result = algo.train()
        sampled, episodes = result["timesteps_total"], episodes + result["episodes_this_iter"]
    reported = [process.communicate(timeout=60)[0].split() for process in playing]
    assert all(process.returncode == 0 for process in playing)
    assert sampled == 16_000 == sum(int(played) for played, _ in reported), "every step a client played was sampled"
    # a client's last END_EPISODE may come after the sample call that took its last step
    assert 0 <= sum(int(ended) for _, ended in reported) - episodes <= 8 and result["external"]["episodes_dropped"] == 0


def test_a_client_killed_mid_episode_has_its_episode_dropped_and_counted_and_training_goes_on(
    make_algo: Any, playing: list
) -> None:
    algo = make_algo(served(episode_timeout_s=0.5))
    port = port_of(algo)
    playing += clients(port, 2)
    algo.train()
    playing[0].kill()  # in the middle of an episode, most likely waiting for an action
    deadline = time.monotonic() + 60
    result = algo.train()
    while result["external"]["episodes_dropped"] == 0 and time.monotonic() < deadline:
        result = algo.train()
    assert result["external"]["episodes_dropped"] == 1
    assert algo.train()["timesteps_total"] > result["timesteps_total"], "the other client plays on"


@pytest.mark.parametrize("mode", ["remote", "local"])
def test_a_restarted_server_is_retried_and_its_client_plays_on_where_it_was(make_algo: Any, playing: list, mode: str) -> None:
    first = make_algo(served())
    port = port_of(first)
    playing += clients(port, 1, mode=mode)
    first.train()
    first.stop()  # the port is released; the client waits for it with backoff
    second = make_algo(served().offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "localhost", port)))
    assert second.train()["timesteps_total"] == 500 and playing[0].poll() is None


def play_cartpole(client: PolicyClient, steps: int) -> int:
    """RLlib's CartPole client loop for ``steps`` steps, its last episode ended too; returns the episodes played."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    episode, episodes = client.start_episode(), 1
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(client.get_action(episode, obs))
        client.log_returns(episode, float(reward))
        if terminated or truncated:
            client.end_episode(episode, obs)
            obs, _ = env.reset()
            episode, episodes = client.start_episode(), episodes + 1
    client.end_episode(episode, obs)
    return episodes


def test_a_local_client_acts_with_the_server_s_weights_and_its_likelihoods_are_what_is_trained_on(make_algo: Any) -> None:
    algo = make_algo(served())
    client = PolicyClient(f"http://localhost:{port_of(algo)}", inference_mode="local", update_interval=None)
    server_policy, copy = algo.get_policy(), client._local.policy  # type: ignore[union-attr]
    for name, weight in server_policy.get_weights().items():
        np.testing.assert_array_equal(copy.get_weights()[name], weight)
    play_cartpole(client, 500)  # its last end_episode sends the report
    server_policy.set_weights({k: v + 0.5 for k, v in server_policy.get_weights().items()})  # the server learned since
    batch = algo.env_runner_group.local_env_runner.sample().policy_batches["default_policy"]
    assert len(batch) == 499, "the 500th row closes with its episode's end, which comes after the fragment's 500th action"
    behaviour = copy.compute_log_likelihoods(batch["obs"], batch["actions"])
    np.testing.assert_allclose(batch["action_logp"], behaviour, rtol=1e-5, atol=1e-6)
    assert not np.allclose(server_policy.compute_log_likelihoods(batch["obs"], batch["actions"]), behaviour)
    client.update_policy_weights()
    for name, weight in server_policy.get_weights().items():
        np.testing.assert_array_equal(copy.get_weights()[name], weight)


def test_a_local_client_s_recurrent_copy_carries_each_episode_s_state_and_the_server_trains_on_its_actions(
    make_algo: Any,
) -> None:
    model = {"use_lstm": True, "lstm_cell_size": 8, "fcnet_hiddens": [16], "max_seq_len": 8, "lstm_use_prev_action": True,
             "lstm_use_prev_reward": True}  # fmt: skip
    algo = make_algo(served().training(model=model).env_runners(rollout_fragment_length=100))
    client = PolicyClient(f"http://localhost:{port_of(algo)}", inference_mode="local", update_interval=None)
    copy = client._local.policy  # type: ignore[union-attr]
    assert copy.is_recurrent
    assert play_cartpole(client, 101) >= 3
    batch = algo.env_runner_group.local_env_runner.sample().policy_batches["default_policy"]
    episodes_seen: list[int] = []

    def episode_of(seq: int) -> int:  # one client plays its episodes in turn: a first sequence has no previous reward
        if batch["prev_rewards"][seq, 0] == 0:
            episodes_seen.append(len(episodes_seen))
        return episodes_seen[-1]

    rows = replay_sequences(copy, batch, {}, episode_of)
    assert len(rows) == 99  # the 100th action's row closes with the client's next report


@pytest.fixture
def server() -> Iterator[PolicyServerInput]:
    config = served().environment(action_space=gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
    running = PolicyServerInput(IOContext(config=config), "localhost", 0, auth_token="s3cret", max_request_bytes=4096)
    yield running
    running.close()


def _post(port: int, body: bytes, token: str | None = "s3cret", method: str = "POST") -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    connection.request(method, "/", body=body, headers=headers)
    response = connection.getresponse()
    status, text = response.status, response.read().decode()
    connection.close()
    return status, text


def _json(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


OBS = [0.0, 0.1, 0.0, -0.1]
MALFORMED = {
    "pickle bytes": (pickle.dumps({"command": "GET_ACTION"}), 400),
    "truncated JSON": (b'{"command": "GET_ACTION", "episode_id": "e1", "observation": [0.0, ', 400),
    "a JSON list": (b"[1, 2, 3]", 400),
    "an unknown command": (_json(command="RUN_CODE", code="import os"), 400),
    "a missing field": (_json(command="GET_ACTION", episode_id="e1"), 400),
    "an extra field": (_json(command="GET_ACTION", episode_id="e1", observation=OBS, exec="x"), 400),
    "NaN in an observation": (b'{"command": "GET_ACTION", "episode_id": "e1", "observation": [NaN, 0, 0, 0]}', 400),
    "an infinite reward": (b'{"command": "LOG_RETURNS", "episode_id": "e1", "reward": 1e999}', 400),
    "a string reward": (_json(command="LOG_RETURNS", episode_id="e1", reward="1"), 400),
    "a reward by agent": (_json(command="LOG_RETURNS", episode_id="e1", reward={"a": 1.0}), 400),
    "the wrong observation shape": (_json(command="GET_ACTION", episode_id="e1", observation=[0.0, 0.1]), 400),
    "a nested observation": (_json(command="GET_ACTION", episode_id="e1", observation=[OBS]), 400),
    "an action outside its box": (_json(command="LOG_ACTION", episode_id="e1", observation=OBS, action=[3.0, 0.0]), 400),
    "an action probability above 1": (
        _json(command="LOG_ACTION", episode_id="e1", observation=OBS, action=[0.0, 0.0], action_prob=1.5),
        400,
    ),
    "an episode id with a path in it": (_json(command="START_EPISODE", episode_id="../../etc/passwd"), 400),
    "a non-boolean training flag": (_json(command="START_EPISODE", training_enabled="yes"), 400),
    "a report with a GET_ACTION before its end": (
        _json(
            command="REPORT_SAMPLES",
            samples=[
                {"command": "GET_ACTION", "episode_id": "e1", "observation": OBS},
                {"command": "LOG_RETURNS", "episode_id": "e1", "reward": 1.0},
            ],
        ),
        400,
    ),
    "an episode never started": (_json(command="GET_ACTION", episode_id="e2", observation=OBS), 404),
    "a body over the limit": (_json(command="GET_ACTION", episode_id="e1", observation=[0.0] * 5000), 413),
}


@pytest.mark.parametrize("body", [pytest.param(case, id=name) for name, case in MALFORMED.items()])
def test_a_malformed_request_gets_its_4xx_and_nothing_of_it_is_used(server: PolicyServerInput, body: Any) -> None:
    started = PolicyClient(server.address, "remote", auth_token="s3cret").start_episode("e1")
    status, reason = _post(server.port, body[0])
    assert status == body[1], reason
    assert "error" in json.loads(reason)
    assert server.poll(timeout=0.2) == [], "nothing of it reached the runner"
    client = PolicyClient(server.address, "remote", auth_token="s3cret")
    client.log_action(started, np.asarray(OBS, np.float32), np.zeros(2, np.float32))  # and the server serves on
    assert len(server.poll(timeout=5)) == 1


def test_the_returns_a_remote_client_logged_reach_the_step_they_lead_to(server: PolicyServerInput) -> None:
    client = PolicyClient(server.address, "remote", auth_token="s3cret")
    episode, obs, action = client.start_episode(), np.asarray(OBS, np.float32), np.zeros(2, np.float32)
    client.log_action(episode, obs, action)
    client.log_returns(episode, 1.5)
    client.log_returns(episode, 2.0)
    client.log_action(episode, obs, action)
    first, second = server.poll(timeout=5) + server.poll(timeout=5)
    assert (first.reward, second.reward) == (0.0, 3.5)


@pytest.mark.parametrize("token", [None, "guess"], ids=["no token", "a wrong token"])
def test_a_request_without_the_token_gets_401_and_nothing_happens(server: PolicyServerInput, token: str | None) -> None:
    assert _post(server.port, _json(command="START_EPISODE", episode_id="e9"), token=token)[0] == 401
    assert _post(server.port, _json(command="END_EPISODE", episode_id="e9", observation=OBS))[0] == 404, "never started"


def test_what_a_server_cannot_serve_is_refused_before_it_binds() -> None:
    with pytest.raises(ConfigError, match=r"give them in environment\(observation_space=..., action_space=...\)"):
        PolicyServerInput(IOContext(config=PPOConfig()), "localhost", 0)
    spaces = PPOConfig().environment(observation_space=gym.spaces.Text(8), action_space=gym.spaces.Discrete(2))
    with pytest.raises(ConfigError, match=r"the observation space is a Text"):
        PolicyServerInput(IOContext(config=spaces), "localhost", 0)
    with pytest.raises(ConfigError, match=r"it is 'local' \(a copy of the policy acts here\) or 'remote'"):
        PolicyClient("http://localhost:9900", inference_mode="nearby")
    with pytest.raises(ConfigError, match=r"evaluation_config: evaluation_interval=1 evaluates in an env"):
        served().evaluation(evaluation_interval=1).build()
