"""The policy server's HTTP side: checked POSTs answered with JSON; refusals are 4xx with a reason; it keeps serving."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from corral.integrations.serving.http_server import PolicyHTTPServer
from corral.integrations.serving.protocol import GET_ACTION, ProtocolError, Request


def _answer(request: Request) -> dict[str, Any]:
    episode = request.fields.get("episode_id")
    if episode == "fails":
        raise RuntimeError("a bug in the handler")
    if episode == "unknown":
        raise ProtocolError(404, "no episode 'unknown' was started")
    return {"action": len(request.fields["observation"]), "command": request.command}


@pytest.fixture
def server() -> Iterator[PolicyHTTPServer]:
    running = PolicyHTTPServer(_answer, auth_token="s3cret", max_request_bytes=4096)
    yield running
    running.stop()


def _post(
    server: PolicyHTTPServer, body: bytes, token: str | None = "s3cret", connection: Any = None
) -> tuple[int, dict[str, Any]]:
    connection = connection or http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    connection.request("POST", "/", body=body, headers=headers)
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def _get_action(episode_id: str = "e1") -> bytes:
    return json.dumps({"command": GET_ACTION, "episode_id": episode_id, "observation": [0.0, 1.0, 2.0]}).encode()


def test_a_checked_request_is_answered_with_the_handler_s_json_on_a_connection_that_stays_open(server) -> None:
    assert server.address == f"http://127.0.0.1:{server.port}", "bound to 127.0.0.1 unless told otherwise"
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    for _ in range(3):  # keep-alive: one connection, several requests
        assert _post(server, _get_action(), connection=connection) == (200, {"action": 3, "command": GET_ACTION})


@pytest.mark.parametrize(
    ("token", "body", "status", "reason"),
    [
        (None, _get_action(), 401, "no valid 'Authorization: Bearer <token>'"),
        ("wrong", _get_action(), 401, "no valid 'Authorization: Bearer <token>'"),
        ("s3cret", b"x" * 5000, 413, "5,000 bytes; this server reads at most 4,096"),
        ("s3cret", b"\x80\x04K\x01.", 400, "not UTF-8 JSON"),
        ("s3cret", _get_action("unknown"), 404, "no episode 'unknown'"),
        ("s3cret", _get_action("fails"), 500, "failed to answer"),
    ],
    ids=["no token", "a wrong token", "too large", "pickle", "the handler's refusal", "the handler's bug"],
)
def test_a_refused_request_gets_its_status_and_reason_and_the_server_goes_on(server, token, body, status, reason) -> None:
    code, answer = _post(server, body, token=token)
    assert code == status and reason in answer["error"]
    assert _post(server, _get_action())[0] == 200, "the next request is answered"


def test_a_request_without_a_length_is_refused_and_a_get_is_not_allowed(server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        answer = b"".join(iter(lambda: raw.recv(4096), b""))  # until the server closes the connection
        assert answer.startswith(b"HTTP/1.1 411") and b"Connection: close" in answer and b"chunked bodies" in answer
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", "/")
    assert connection.getresponse().status == 405
