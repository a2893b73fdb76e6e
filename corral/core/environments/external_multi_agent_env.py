"""RLlib's ``ExternalMultiAgentEnv``: an application that runs its own loop, with several agents in each episode.

As :class:`~corral.core.environments.external_env.ExternalEnv`, with dicts by
agent id: :meth:`~ExternalMultiAgentEnv.get_action` takes the observations of
the agents that act now and returns their actions;
:meth:`~ExternalMultiAgentEnv.log_returns` takes rewards by agent (summed for
each agent until it next observes) and RLlib's ``multiagent_done_dict`` for
agents that are done before the episode ends. ``policy_mapping_fn`` picks
each agent's policy, once per episode, as for a
:class:`~corral.core.environments.multi_agent_env.MultiAgentEnv`.
"""

from __future__ import annotations

from typing import Any

from corral.core.environments.external_env import ExternalEnv
from corral.core.environments.multi_agent_env import ALL_AGENTS
from corral.errors import EnvError


class ExternalMultiAgentEnv(ExternalEnv):
    """An :class:`ExternalEnv` whose episodes have several agents: observations, actions and rewards by agent id.

    Args:
        action_space: every agent's action space, or a ``gym.spaces.Dict`` of them by agent id (policies whose
            ``PolicySpec`` gives no spaces take the shared ones).
        observation_space: likewise, for observations.
        max_concurrent: how many episodes may run at once.
    """

    _BY_AGENT = True

    def get_action(self, episode_id: str, observation_dict: dict[Any, Any]) -> dict[Any, Any]:
        """Record the observations of the agents that act now, and wait for their actions.

        Args:
            episode_id: the episode.
            observation_dict: an observation by agent id, for each agent that acts.

        Returns:
            An action by agent id, for the same agents.

        Raises:
            EnvError: no such episode, it already waits, the observations are not a non-empty dict, or the env closed.
        """
        return dict(super().get_action(episode_id, _agent_dict(episode_id, observation_dict, "observation_dict")))

    def log_action(self, episode_id: str, observation_dict: dict[Any, Any], action_dict: dict[Any, Any]) -> None:  # type: ignore[override]  # RLlib's: no probability
        """Record the observations and the actions the application took itself (off-policy), by agent.

        Each action is weighed by the policy's likelihood of it (RLlib's multi-agent ``log_action`` takes no
        probability).

        Args:
            episode_id: the episode.
            observation_dict: an observation by agent id.
            action_dict: the action each of those agents took.

        Raises:
            EnvError: the agents of the two dicts differ, an action is outside its agent's space, or as
                :meth:`get_action`.
        """
        observations = _agent_dict(episode_id, observation_dict, "observation_dict")
        actions = _agent_dict(episode_id, action_dict, "action_dict")
        if set(actions) != set(observations):
            raise EnvError(
                f"episode {episode_id!r} logged actions for agents {sorted(map(str, actions))} and observations for "
                f"{sorted(map(str, observations))}: give an action for each agent observed"
            )
        super().log_action(episode_id, observations, actions)

    def log_returns(  # type: ignore[override]  # RLlib's signature: rewards and infos by agent, and done flags
        self,
        episode_id: str,
        reward_dict: dict[Any, float],
        info_dict: dict[Any, Any] | None = None,
        multiagent_done_dict: dict[Any, bool] | None = None,
    ) -> None:
        """Record rewards by agent (each summed until that agent next observes), infos, and agents that are done.

        Args:
            episode_id: the episode.
            reward_dict: a reward by agent id.
            info_dict: an info by agent id; the last logged goes with the next observation.
            multiagent_done_dict: ``{agent_id: True}`` for agents done before the episode ends (they act no more in
                it); ``"__all__"`` is ignored, :meth:`end_episode` ends the episode.

        Raises:
            EnvError: no such episode, or a reward is not a number.
        """
        dones = {a: bool(d) for a, d in (multiagent_done_dict or {}).items() if a != ALL_AGENTS}
        self._log_returns(episode_id, reward_dict, info_dict, dones)

    def end_episode(self, episode_id: str, observation_dict: dict[Any, Any]) -> None:
        """Record the agents' last observations and close the episode.

        Args:
            episode_id: the episode.
            observation_dict: the last observation by agent id (empty where none is left to say).

        Raises:
            EnvError: no such episode, or it waits for an action.
        """
        if not isinstance(observation_dict, dict):
            raise EnvError(f"episode {episode_id!r} ended with {type(observation_dict).__name__}: give a dict by agent id")
        super().end_episode(episode_id, dict(observation_dict))


def _agent_dict(episode_id: str, value: Any, name: str) -> dict[Any, Any]:
    if not isinstance(value, dict) or not value:
        raise EnvError(f"episode {episode_id!r}: {name} must be a non-empty dict by agent id, not {value!r:.60}")
    return dict(value)
