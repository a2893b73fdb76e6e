"""A ``PolicyClient``'s own copy of the server's policy (RLlib's ``inference_mode="local"``): it acts without a round trip.

The server answers ``GET_WORKER_ARGS`` with data only: the algorithm's
registered name, the policy's spaces and the config (without the server
script's own objects). The copy is built from them as a checkpoint's policy
is (:func:`~corral.core.training.checkpoint_loading.policy_of_checkpoint`):
nothing the server names is imported unless registered with corral, and
nothing is unpickled. Weights and observation-filter statistics come with
``GET_WEIGHTS`` as arrays.

What the application does is queued as the protocol's messages (each action
with its log-likelihood under the copy) and sent as one ``REPORT_SAMPLES``
request at every episode's end and whenever ``report_steps`` actions or
:data:`MAX_REPORT_BYTES` are queued; the server trains on them as logged
actions.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np

from corral.core.common import state_codec
from corral.core.common.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from corral.core.common.space_codec import decode_space
from corral.core.common.spaces import stack_observations
from corral.core.learning.policies.policy_build import build_policy
from corral.core.learning.policy import Policy
from corral.core.learning.recurrent.carry import AgentCarry
from corral.core.persistence.checkpoints import Checkpoint
from corral.core.sampling.base_env_runner import learned_rewards
from corral.core.training.checkpoint_loading import checkpoint_config, class_and_config
from corral.errors import ConfigError
from corral.integrations.serving import protocol
from corral.registry import get_algorithm

MAX_REPORT_BYTES = 256 * 1024
"""a report is sent once its messages reach this size, well under a server's default request limit (1 MiB)"""

_NOT_NEEDED: dict[str, Any] = {
    "env": None,
    "callbacks_class": [],
    "policy_mapping_fn": None,
    "policies_to_train": None,
    "observation_fn": None,
}
"""what a policy copy never uses of the config: left unresolved, as a checkpoint's single policy leaves it"""


def build_local_policy(worker_args: dict[str, Any], address: str) -> Policy:
    """The policy ``GET_WORKER_ARGS`` describes, built in this process (its weights come separately).

    Args:
        worker_args: the server's answer.
        address: the server's URL, for errors.

    Returns:
        The policy, with freshly initialised weights.

    Raises:
        ConfigError: the algorithm is not installed here, or the config names code not registered here.
    """
    try:
        algo_class = get_algorithm(str(worker_args["algorithm"]))
        observation_space = decode_space(worker_args["observation_space"], "observation_space")
        action_space = decode_space(worker_args["action_space"], "action_space")
        served = Checkpoint(Path(f"the policy server at {address}"), {}, dict(worker_args["config"]), {}, {}, {})
        config = checkpoint_config(served, algo_class, dict(_NOT_NEEDED), trust_code=False).freeze()
    except (KeyError, TypeError, ValueError) as exc:  # CheckpointError is a ValueError
        raise ConfigError(f"the policy server at {address} described a policy this process cannot build: {exc}") from None
    policy_id = str(worker_args.get("policy_id"))
    policy_class, own_config = class_and_config(config, policy_id, algo_class)
    return build_policy(policy_class, observation_space, action_space, own_config, "policy", policy_id, "sampling", 0)


class LocalInference:
    """The copy of the policy and the queue of what the application did, for one ``PolicyClient``.

    Args:
        policy: the copy (:func:`build_local_policy`).
        report_steps: how many actions are queued at most before they are sent.
    """

    def __init__(self, policy: Policy, report_steps: int) -> None:
        self.policy = policy
        self.report_steps = max(1, int(report_steps))
        self._carry = AgentCarry()
        """a recurrent copy's state, previous action and reward in each episode, as the server's runner keeps them"""
        self._learned = learned_rewards(policy.config)
        self._messages: list[bytes] = []
        self._size = self._actions = 0
        self._started: set[str] = set()
        self._continued: set[str] = set()

    def set_state(self, answer: dict[str, Any]) -> None:
        """Take a ``GET_WEIGHTS`` answer: weights, timestep and observation-filter statistics.

        Args:
            answer: the server's answer.

        Raises:
            ValueError: the weights do not fit the copy, or are not finite.
        """
        self.policy.set_sampling_state(state_codec.decode(answer["state"]))

    def start_episode(self, episode_id: str | None, training_enabled: bool) -> str:
        """Queue an episode's start.

        Args:
            episode_id: its id; None: a new unique one.
            training_enabled: whether the server trains on it.

        Returns:
            The episode's id.
        """
        episode_id = uuid.uuid4().hex if episode_id is None else episode_id
        self.queue({"command": protocol.START_EPISODE, "episode_id": episode_id, "training_enabled": training_enabled})
        return episode_id

    def act(self, episode_id: str, observation: Any) -> Any:
        """The copy's action (exploring), queued with its log-likelihood as a logged action.

        Args:
            episode_id: the episode.
            observation: what the application observes.

        Returns:
            The action as the env takes it.
        """
        policy = self.policy
        obs = policy.preprocess(stack_observations([observation], policy.observation_space), update_filter=False)
        key = [(0, episode_id)]
        inputs = self._carry.inputs(DEFAULT_POLICY_ID, policy, key) if policy.is_recurrent else {}
        actions, extras = policy.compute_actions(obs, explore=True, **inputs)
        if inputs:
            self._carry.advance(DEFAULT_POLICY_ID, key, extras, actions)
        action = policy.action_adapter.rows(policy.action_adapter(actions))[0]
        message = {"command": protocol.LOG_ACTION, "episode_id": episode_id, "observation": observation, "action": action}
        if SampleBatch.ACTION_LOGP in extras:
            message[protocol.ACTION_LOGP] = float(np.asarray(extras[SampleBatch.ACTION_LOGP])[0])
        self.queue(message)
        return action

    def queue(self, message: dict[str, Any]) -> None:
        """Queue one message (a logged action counts towards ``report_steps``); a recurrent copy's state follows it."""
        command, key = message["command"], (0, message["episode_id"])
        if command == protocol.LOG_RETURNS:
            reward = float(message["reward"])
            self._carry.add_reward(key, reward if self._learned is None else float(self._learned(reward)))
        elif command in (protocol.START_EPISODE, protocol.END_EPISODE):
            self._carry.forget(key)
        encoded = protocol.encode(message)
        (self._started if message["command"] == protocol.START_EPISODE else self._continued).add(message["episode_id"])
        self._messages.append(encoded)
        self._size += len(encoded) + 1
        self._actions += message["command"] == protocol.LOG_ACTION

    @property
    def full(self) -> bool:
        """Whether the queue should be sent now."""
        return self._actions >= self.report_steps or self._size >= MAX_REPORT_BYTES

    def take_report(self) -> tuple[list[bytes], set[str]]:
        """The queued messages, and the episodes they continue without starting them; the queue is emptied."""
        messages, continued = self._messages, self._continued - self._started
        self._messages, self._size, self._actions, self._started, self._continued = [], 0, 0, set(), set()
        return messages, continued
