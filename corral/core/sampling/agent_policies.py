"""The policies of a multi-agent env runner: which acts for each agent, the spaces each is built with, their models.

``policy_mapping_fn(agent_id, episode, worker=runner)`` picks an agent's
policy (asked once per agent and episode); without one, every agent maps to
``default_policy``, or to the only policy if there is one. A policy's spaces
are those of the agents mapped to it, unless its ``PolicySpec`` gives them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping
from typing import Any

import gymnasium as gym

from corral.core.common.sample_batch import DEFAULT_POLICY_ID
from corral.core.common.spaces import space_to_json
from corral.core.learning.policy import Policy
from corral.errors import ConfigError


def map_agent(
    mapping: Callable[..., str] | None, agent_id: Hashable, episode: Any, policy_ids: Collection[str], worker: Any
) -> str:
    """The policy id ``mapping(agent_id, episode, worker=worker)`` gives, checked to be one of ``policy_ids``.

    Args:
        mapping: the config's ``policy_mapping_fn``, or None.
        agent_id: the agent.
        episode: its episode, which the mapping may read.
        policy_ids: the policies there are (the config's, before the policies are built);
            empty: any id is taken.
        worker: the env runner, passed on to the mapping.

    Returns:
        The policy id.

    Raises:
        ConfigError: the id is not one of ``policy_ids``, or no mapping is set and there are several policies.
    """
    if mapping is not None:
        policy_id = mapping(agent_id, episode, worker=worker)
    elif DEFAULT_POLICY_ID in policy_ids or not policy_ids:
        policy_id = DEFAULT_POLICY_ID
    elif len(policy_ids) == 1:
        policy_id = next(iter(policy_ids))
    else:
        raise ConfigError(
            f"agent {agent_id!r} needs a policy: there are several ({sorted(policy_ids)}) and no policy_mapping_fn; "
            "set config.multi_agent(policy_mapping_fn=lambda agent_id, episode, **kwargs: ...)"
        )
    if policy_ids and policy_id not in policy_ids:
        raise ConfigError(
            f"policy_mapping_fn mapped agent {agent_id!r} to {policy_id!r}, which is not a policy; "
            f"the policies are {sorted(policy_ids)}"
        )
    return policy_id


def infer_policy_spaces(
    env: Any, specs: Mapping[str, Any], policy_of: Callable[[Hashable], str]
) -> dict[str, tuple[gym.Space[Any], gym.Space[Any]]]:
    """The (observation, action) spaces of every policy in ``specs``, inferred where the spec leaves them out.

    A policy's spaces are those of the agents mapped to it (its spec's, where
    given); a policy no agent maps to gets the spaces every agent shares, if
    they all share one pair (a self-play pool).

    Args:
        env: a multi-agent env (its ``possible_agents`` and their spaces).
        specs: the policy specs by id (None, or without spaces, where they are to be inferred).
        policy_of: the id of the policy an agent maps to.

    Returns:
        By policy id, its observation and action spaces.

    Raises:
        ConfigError: agents with different spaces map to one policy, or a policy's
            spaces cannot be inferred (naming the policy and the agents).
    """
    inferred: dict[str, tuple[Hashable, gym.Space[Any], gym.Space[Any]]] = {}
    for agent in env.possible_agents:
        spaces = (env.get_observation_space(agent), env.get_action_space(agent))
        policy_id = policy_of(agent)
        first = inferred.setdefault(policy_id, (agent, *spaces))
        if [space_to_json(s) for s in first[1:]] != [space_to_json(s) for s in spaces]:
            raise ConfigError(
                f"agents {first[0]!r} and {agent!r} both map to policy {policy_id!r} but have different spaces "
                f"({first[1]}, {first[2]} and {spaces[0]}, {spaces[1]}); map them to different policies"
            )
    pairs = {json.dumps([space_to_json(s) for s in found[1:]], sort_keys=True): found[1:] for found in inferred.values()}
    shared = next(iter(pairs.values())) if len(pairs) == 1 else (None, None)
    result = {}
    for policy_id, spec in specs.items():
        found = inferred.get(policy_id, (None, *shared))
        observation_space = getattr(spec, "observation_space", None) or found[1]
        action_space = getattr(spec, "action_space", None) or found[2]
        if observation_space is None or action_space is None:
            raise ConfigError(
                f"policy {policy_id!r}: no agent of the env ({env.possible_agents}) maps to it and the agents do not "
                "share one pair of spaces, so its spaces cannot be inferred; give them: "
                "PolicySpec(observation_space=..., action_space=...)"
            )
        result[policy_id] = (observation_space, action_space)
    return result


class PolicyModels(Mapping[str, Any]):
    """Each policy's model by policy id, read when asked (a policy a policy map keeps on disk loads only then).

    Args:
        policies: the runner's policies by id.
    """

    def __init__(self, policies: Mapping[str, Policy]) -> None:
        self._policies = policies

    def __getitem__(self, policy_id: str) -> Any:
        return self._policies[policy_id].model

    def __iter__(self) -> Iterator[str]:
        return iter(self._policies)

    def __len__(self) -> int:
        return len(self._policies)
