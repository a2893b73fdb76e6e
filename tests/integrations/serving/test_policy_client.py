"""What a remote PolicyClient sends: one request per call, the returns an episode logged going with its next call."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from corral.integrations.serving import protocol
from corral.integrations.serving.http_server import PolicyHTTPServer
from corral.integrations.serving.policy_client import MAX_QUEUED_RETURNS, PolicyClient
from corral.integrations.serving.protocol import Request

OBS = [0.0, 0.1, 0.0, -0.1]


@pytest.fixture
def requests() -> Iterator[tuple[PolicyHTTPServer, list[list[tuple[str, Any]]]]]:
    """A server that answers every call and records each request as its messages' (command, reward)."""
    seen: list[list[tuple[str, Any]]] = []

    def answer(request: Request) -> dict[str, Any]:
        messages = request.fields["samples"] if request.command == protocol.REPORT_SAMPLES else [request]
        seen.append([(message.command, message.fields.get("reward")) for message in messages])
        return {"episode_id": "e1"} if messages[-1].command == protocol.START_EPISODE else {"action": 1}

    server = PolicyHTTPServer(answer)
    yield server, seen
    server.stop()


def test_an_episode_s_logged_returns_go_with_its_next_call_in_one_request(requests: Any) -> None:
    server, seen = requests
    client = PolicyClient(server.address, "remote")
    episode = client.start_episode()
    assert client.get_action(episode, OBS) == 1
    client.log_returns(episode, 1.0)
    client.log_returns(episode, 0.5)
    assert seen == [[("START_EPISODE", None)], [("GET_ACTION", None)]], "the returns wait for the episode's next call"
    assert client.get_action(episode, OBS) == 1, "the report's answer is its GET_ACTION's"
    client.log_returns(episode, 2.0)
    client.end_episode(episode, OBS)
    assert seen[2:] == [
        [("LOG_RETURNS", 1.0), ("LOG_RETURNS", 0.5), ("GET_ACTION", None)],
        [("LOG_RETURNS", 2.0), ("END_EPISODE", None)],
    ]


def test_returns_are_sent_alone_when_many_wait_and_when_the_client_closes(requests: Any) -> None:
    server, seen = requests
    client = PolicyClient(server.address, "remote")
    episode = client.start_episode()
    for _ in range(MAX_QUEUED_RETURNS + 1):
        client.log_returns(episode, 1.0)
    assert seen[1:] == [[("LOG_RETURNS", 1.0)] * MAX_QUEUED_RETURNS], "a full queue is sent without waiting"
    client.close()
    assert seen[2:] == [[("LOG_RETURNS", 1.0)]], "and what is left when the client closes"
