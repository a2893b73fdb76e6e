"""RLlib's ``PolicyClient``: an application's side of a policy server, over HTTP.

The application keeps its loop and calls the same methods as an
:class:`~corral.core.environments.external_env.ExternalEnv`'s: ``start_episode``,
``get_action``, ``log_action`` (the application acted itself),
``log_returns``, ``end_episode``. In remote inference mode each is a JSON
POST (:mod:`~corral.integrations.serving.protocol`) over one kept-alive
connection, and the server's policy acts; the returns an episode logs wait
for its next call and go in the same request (the server needs them only
with the next observation), so a step is one round trip. In local mode
(RLlib's default) a copy of the policy acts in this process and the calls
are reported in batches (:mod:`~corral.integrations.serving.local_inference`);
only the local mode imports torch.

A server that cannot be reached, or says it is stopping (503), is tried
again with exponential backoff for ``max_retry_s``. A server that answers that it does
not know an episode (it restarted, or dropped the episode after silence)
gets the episode started again under the same id, and the call is repeated:
the application's loop goes on, and the server trains on the episode from
that point.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.parse
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.errors import ConfigError
from corral.integrations.serving import protocol
from corral.integrations.serving.protocol import ProtocolError

if TYPE_CHECKING:
    from corral.integrations.serving.local_inference import LocalInference

logger = logging.getLogger("corral")

MAX_QUEUED_RETURNS = 64
"""in remote mode, the returns an episode may log before they are sent without waiting for its next call"""

_RETRYABLE = (ConnectionError, http.client.HTTPException, TimeoutError, OSError)
"""what a connection that failed or was refused raises (a restarting server)"""


class PolicyClient:
    """Plays episodes against a policy server (``PolicyServerInput``) from the application's own loop.

    Args:
        address: the server's URL (``"http://localhost:9900"``; ``"localhost:9900"`` is read the same).
        inference_mode: ``"local"`` (RLlib's default): a copy of the server's policy in this process acts, and what
            the application did is reported in batches (:mod:`~corral.integrations.serving.local_inference`);
            ``"remote"``: the server's policy computes each action, one request per call (returns go with the next).
        update_interval: in local mode, the seconds between pulls of the server's weights (checked when a report is
            sent); None: only :meth:`update_policy_weights` pulls them.
        auth_token: the server's token, sent as ``Authorization: Bearer <token>``.
        timeout_s: how long one request may take, waiting for the action included (the server's runner acts between
            its training steps).
        max_retry_s: how long to keep trying a server that cannot be reached before giving up.

    Raises:
        ConfigError: the address is not an http URL, ``inference_mode`` is neither, or (local mode) the server's
            policy cannot be built here.
    """

    def __init__(
        self,
        address: str,
        inference_mode: str = "local",
        update_interval: float | None = 10.0,
        *,
        auth_token: str | None = None,
        timeout_s: float = 300.0,
        max_retry_s: float = 60.0,
    ) -> None:
        if inference_mode not in ("local", "remote"):
            raise ConfigError(f"inference_mode={inference_mode!r}: it is 'local' (a copy of the policy acts here) or 'remote'")
        url = urllib.parse.urlsplit(address if "://" in address else f"http://{address}")
        if url.scheme != "http" or not url.hostname or url.port is None:
            raise ConfigError(f"address {address!r} must be a server's URL with its port, e.g. 'http://localhost:9900'")
        self.address = f"http://{url.hostname}:{url.port}"
        self.inference_mode = inference_mode
        self.update_interval = update_interval
        self._host, self._port = url.hostname, url.port
        self._headers = {"Content-Type": "application/json"}
        if auth_token is not None:
            self._headers["Authorization"] = f"Bearer {auth_token}"
        self._timeout_s, self._max_retry_s = timeout_s, max_retry_s
        self._connection: http.client.HTTPConnection | None = None
        self._training: dict[str, bool] = {}
        """each episode this client started, and whether it is trained on (to start it again on a restarted server)"""
        self._returns: dict[str, list[bytes]] = {}
        """in remote mode, the returns each episode logged since its last call, sent with its next one"""
        self._local: LocalInference | None = None
        self._updated = 0.0
        if inference_mode == "local":
            from corral.integrations.serving.local_inference import LocalInference, build_local_policy  # imports torch

            args = self._send(protocol.GET_WORKER_ARGS, {})
            self._local = LocalInference(build_local_policy(args, self.address), int(args.get("report_steps", 200)))
            self.update_policy_weights()

    # ---------------------------------------------------------------- RLlib's methods
    def start_episode(self, episode_id: str | None = None, training_enabled: bool = True) -> str:
        """Open an episode on the server.

        Args:
            episode_id: its id (letters, digits and ``_.:-``); None: the server picks one.
            training_enabled: whether the server trains on it.

        Returns:
            The episode's id.

        Raises:
            ProtocolError: the server refused (the id is in use, too many episodes run).
        """
        if self._local is not None:
            started = self._local.start_episode(episode_id, training_enabled)
            self._training[started] = training_enabled
            return started
        fields: dict[str, Any] = {"training_enabled": training_enabled}
        if episode_id is not None:
            fields["episode_id"] = episode_id
        started = str(self._send(protocol.START_EPISODE, fields)["episode_id"])
        self._training[started] = training_enabled
        return started

    def get_action(self, episode_id: str, observation: Any) -> Any:
        """The server policy's action on ``observation``.

        Args:
            episode_id: the episode.
            observation: what the application observes (a value of the policy's observation space).

        Returns:
            The action: an int for a Discrete space, an array for a Box, a dict or list of them for a Dict or Tuple.
        """
        if self._local is not None:
            action = self._local.act(episode_id, observation)
            self._report_if_full()
            return action
        answer = self._episode_call(protocol.GET_ACTION, episode_id, {"observation": observation})
        action = _as_numpy(answer["action"])
        if isinstance(observation, dict) and isinstance(action, dict):  # several agents: their ids as the application has them
            agents = {str(agent): agent for agent in observation}
            action = {agents.get(key, key): value for key, value in action.items()}
        return action

    def log_action(self, episode_id: str, observation: Any, action: Any, action_prob: float | None = None) -> None:
        """Tell the server the action the application took itself on ``observation``.

        Args:
            episode_id: the episode.
            observation: what it observed.
            action: what it did.
            action_prob: the probability its own policy gave the action, if known.
        """
        fields = {"observation": observation, "action": action}
        if action_prob is not None:
            fields["action_prob"] = action_prob
        self._episode_call(protocol.LOG_ACTION, episode_id, fields)
        self._report_if_full()

    def log_returns(
        self, episode_id: str, reward: Any, info: dict[str, Any] | None = None, multiagent_done_dict: Any = None
    ) -> None:
        """Tell the server the reward since the last action (summed with others until the next one).

        Args:
            episode_id: the episode.
            reward: the reward; a multi-agent server's episodes take a dict of rewards by agent id.
            info: the env's info dict (by agent id, for several agents), if any (JSON values).
            multiagent_done_dict: RLlib's done flags by agent id, for agents done before the episode ends
                (a multi-agent server's episodes).
        """
        fields: dict[str, Any] = {
            "reward": {str(a): float(r) for a, r in reward.items()} if isinstance(reward, dict) else float(reward)
        }
        if info is not None:
            fields["info"] = info
        if multiagent_done_dict is not None:
            fields["dones"] = {str(agent): bool(done) for agent, done in multiagent_done_dict.items()}
        if self._local is not None:
            self._episode_call(protocol.LOG_RETURNS, episode_id, fields)
            return
        queued = self._returns.setdefault(episode_id, [])
        queued.append(protocol.encode({"command": protocol.LOG_RETURNS, "episode_id": episode_id, **fields}))
        if len(queued) >= MAX_QUEUED_RETURNS:  # an application that logs many returns between its calls
            self._send_returns(episode_id)

    def end_episode(self, episode_id: str, observation: Any) -> None:
        """Close the episode with its last observation.

        Args:
            episode_id: the episode.
            observation: the last observation.
        """
        self._episode_call(protocol.END_EPISODE, episode_id, {"observation": observation})
        if self._local is not None:
            self.report()
        self._training.pop(episode_id, None)

    def update_policy_weights(self) -> None:
        """Pull the server's current weights (and observation-filter statistics) into the local copy of the policy.

        Raises:
            ConfigError: in remote mode, where there is no local copy (the server's policy is always current).
        """
        if self._local is None:
            raise ConfigError("update_policy_weights() updates a local policy copy; this client's actions come from the server")
        self._local.set_state(self._send(protocol.GET_WEIGHTS, {}))
        self._updated = time.monotonic()

    def report(self) -> None:
        """Send what the application did that is still queued (local mode; a call ending an episode sends it too).

        A server that does not know an episode the report continues (it restarted, or dropped it) gets the
        episode started again in the same report.
        """
        if self._local is None:
            return
        messages, continued = self._local.take_report()
        if not messages:
            return
        try:
            self._send_body(protocol.REPORT_SAMPLES, protocol.report_body(messages))
        except ProtocolError as refused:
            if refused.status != 404:
                raise
            logger.warning("the server at %s no longer knows episodes of this client: they go on as new episodes", self.address)
            starts = [
                protocol.encode(
                    {"command": protocol.START_EPISODE, "episode_id": e, "training_enabled": self._training.get(e, True)}
                )
                for e in sorted(continued)
            ]
            self._send_body(protocol.REPORT_SAMPLES, protocol.report_body(starts + messages))
        if self.update_interval is not None and time.monotonic() - self._updated >= self.update_interval:
            self.update_policy_weights()

    def close(self) -> None:
        """Send what is still queued, and close the connection (the next call opens a new one)."""
        self.report()
        for episode_id in list(self._returns):
            self._send_returns(episode_id)
        self._close_connection()

    # ---------------------------------------------------------------- inside
    def _episode_call(self, command: str, episode_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        """A command about an episode (queued in local mode); one the server does not know is started again first."""
        if self._local is not None:
            self._local.queue({"command": command, "episode_id": episode_id, **fields})
            return {}
        messages = [*self._returns.pop(episode_id, []), protocol.encode({"command": command, "episode_id": episode_id, **fields})]
        body = messages[0] if len(messages) == 1 else protocol.report_body(messages)
        try:
            return self._send_body(command, body)
        except ProtocolError as refused:
            if refused.status != 404 or episode_id not in self._training:
                raise
        if command == protocol.END_EPISODE:
            logger.warning("the server at %s no longer knew episode %s when it ended", self.address, episode_id)
            return {}
        logger.warning("the server at %s no longer knows episode %s: it goes on there as a new episode", self.address, episode_id)
        self._send(protocol.START_EPISODE, {"episode_id": episode_id, "training_enabled": self._training[episode_id]})
        return self._send_body(command, body)

    def _send_returns(self, episode_id: str) -> None:
        """Send the returns an episode logged (remote mode) now, not with its next call."""
        messages = self._returns.pop(episode_id, [])
        if not messages:
            return
        try:
            self._send_body(protocol.LOG_RETURNS, protocol.report_body(messages))
        except ProtocolError as refused:
            if refused.status != 404:
                raise
            logger.warning("the server at %s no longer knew episode %s: its last returns are not used", self.address, episode_id)

    def _report_if_full(self) -> None:
        if self._local is not None and self._local.full:
            self.report()

    def _send(self, command: str, fields: dict[str, Any]) -> dict[str, Any]:
        """POST one command; try a server that cannot be reached again with backoff; raise its refusals."""
        return self._send_body(command, protocol.encode({"command": command, **fields}))

    def _send_body(self, command: str, body: bytes) -> dict[str, Any]:
        """POST an encoded command (see :meth:`_send`)."""
        deadline, wait = time.monotonic() + self._max_retry_s, 0.05
        while True:
            try:
                status, answer = self._post(body)
                if status != HTTPStatus.SERVICE_UNAVAILABLE:
                    break
                self._close_connection()  # a stopping server's connection: the next try connects to whoever listens then
                problem: object = answer.get("error", answer)
            except _RETRYABLE as exc:
                self._close_connection()
                problem = exc
            if time.monotonic() + wait > deadline:
                raise ConnectionError(
                    f"the policy server at {self.address} could not be reached for {self._max_retry_s:g} s: {problem}"
                )
            time.sleep(wait)
            wait = min(2 * wait, 2.0)
        if status != 200:
            raise ProtocolError(status, f"the server refused {command} ({status}): {answer.get('error', answer)}")
        return answer

    def _close_connection(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _post(self, body: bytes) -> tuple[int, dict[str, Any]]:
        if self._connection is None:
            self._connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout_s)
        self._connection.request("POST", "/", body, self._headers)
        response = self._connection.getresponse()
        data = response.read()
        if response.getheader("Connection", "").lower() == "close":
            self._close_connection()
        try:
            answer = json.loads(data)
        except ValueError:
            answer = {"error": data[:200].decode("utf-8", "replace")}
        return response.status, answer if isinstance(answer, dict) else {"error": answer}


def _as_numpy(value: Any) -> Any:
    """An action as JSON gave it: a list of numbers (nested evenly) as an array, any other list as a tuple of parts."""
    if isinstance(value, dict):
        return {key: _as_numpy(item) for key, item in value.items()}
    if isinstance(value, list):
        try:
            array = np.asarray(value)
        except ValueError:  # ragged: a Tuple space's parts
            array = None
        if array is not None and array.dtype.kind in "biuf":
            return array
        return tuple(_as_numpy(item) for item in value)
    return value
