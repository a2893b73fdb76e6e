"""The policy set: the policies an algorithm holds, their weights, and those added or removed while training.

Multi-agent runs map agents to these policies; ``add_policy`` and
``remove_policy`` change the set (and the mapping) on every env runner, and
``export_policy_model`` writes one out for serving.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Container
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from corral.core.common.sample_batch import DEFAULT_POLICY_ID
from corral.core.contracts.config import AlgorithmConfig
from corral.core.contracts.policy_spec import PolicySpec
from corral.core.environments.envs import env_name
from corral.core.learning.policy import Policy, PolicyBuild
from corral.core.persistence.policy_export import export_policy_model
from corral.core.sampling.multi_agent_env_runner import MultiAgentEnvRunner
from corral.core.training.part import AlgorithmPart
from corral.errors import ConfigError


class PolicySet(AlgorithmPart):
    """Part of :class:`~corral.core.training.algorithm.Algorithm` (see the module docstring)."""

    @classmethod
    def get_default_policy_class(cls, config: AlgorithmConfig) -> type[Policy] | None:
        """The policy class of policies whose spec names none (RLlib's classmethod): ``policy_class``.

        A subclass overrides it to pick the class from the config, as RLlib's
        custom algorithms do; checkpoints and policy servers ask it too.

        Args:
            config: the run's config.

        Returns:
            The class; None means the algorithm's ``policy_class``.
        """
        return cls.policy_class

    def export_policy_model(
        self, export_dir: str | os.PathLike[str], policy_id: str = DEFAULT_POLICY_ID, onnx: int | bool | None = None
    ) -> Path:
        """Write a policy's deterministic acting as files that run with torch alone (and as ONNX).

        ``model.pt2`` (torch.export) and ``model.pt`` (TorchScript) map a batch of raw observations to
        ``(actions, action_dist_inputs)``: the same actions as
        ``compute_single_action(obs, explore=False)``, with the preprocessing and the
        observation filter inside (see :mod:`corral.core.persistence.policy_export`);
        ``model.json`` describes them.

        Args:
            export_dir: the folder to write into (created if missing).
            policy_id: the policy to export.
            onnx: an ONNX opset (e.g. 17; True: 17) to also write ``model.onnx``; needs the ``onnx`` extra.

        Returns:
            The path of ``model.pt``.

        Raises:
            ConfigError: there is no policy ``policy_id``, its observations are not one
                array (Dict and Tuple spaces, action masks), or the ONNX opset or package is wrong.
        """
        return export_policy_model(self._policy(policy_id), export_dir, policy_id, onnx)

    def export_policy_checkpoint(self, export_dir: str | os.PathLike[str], policy_id: str = DEFAULT_POLICY_ID) -> str:
        """Write a checkpoint that holds one policy, for ``Policy.from_checkpoint(export_dir, policy_id)``.

        It is an algorithm checkpoint in every other way (config, counters), with only
        this policy in it: an opponent pool or a deployment takes it without the others.

        Args:
            export_dir: the checkpoint folder (an existing checkpoint there is replaced).
            policy_id: the policy to keep.

        Returns:
            The checkpoint's path.

        Raises:
            ConfigError: there is no policy ``policy_id``.
        """
        self._policy(policy_id)  # an unknown id is a ConfigError naming the ones that exist
        return self._write_checkpoint(Path(export_dir), [policy_id])

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy | None:
        """The policy with this id, or None where there is none, as RLlib's (once a learner thread's queued updates
        are done: it holds still)."""
        self.settle_learning()
        return self.policies.get(policy_id)

    def _policy(self, policy_id: str) -> Policy:
        """The policy with this id, as :meth:`get_policy`; an unknown id is an error that names those there are.

        Raises:
            ConfigError: there is no policy ``policy_id``.
        """
        policy = self.get_policy(policy_id)
        if policy is None:
            raise ConfigError(f"no policy {policy_id!r}; this algorithm has {sorted(self.policies)}")
        return policy

    def get_module(self, module_id: str = DEFAULT_POLICY_ID) -> Any:
        """The model a policy computes with: RLlib's ``get_module`` (an RLModule's module id is its policy id).

        Args:
            module_id: the policy id.

        Returns:
            The policy's model: the user's RLModule or ModelV2, or corral's own model.

        Raises:
            ConfigError: there is no policy ``module_id``.
        """
        return self._policy(module_id).model

    @property
    def env_runner(self) -> Any:
        """The algorithm's own env runner (RLlib 2.10's name): its ``module``, ``get_weights()``, ``sample()``."""
        return self.env_runner_group.local_env_runner

    def get_weights(self, policies: list[str] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """Model weights by policy id (all policies unless ``policies`` names some)."""
        return {pid: self._policy(pid).get_weights() for pid in (policies or self.policies)}

    def set_weights(self, weights: dict[str, dict[str, Any]]) -> None:
        """Load weights by policy id, as :meth:`get_weights` returns them."""
        for pid, w in weights.items():
            self._policy(pid).set_weights(w)

    def add_policy(
        self,
        policy_id: str,
        policy_cls: type[Policy] | str | None = None,
        *,
        observation_space: gym.Space[Any] | None = None,
        action_space: gym.Space[Any] | None = None,
        config: dict[str, Any] | None = None,
        policy_state: dict[str, Any] | None = None,
        policy_mapping_fn: Callable[..., str] | str | None = None,
        policies_to_train: Container[str] | Callable[..., bool] | None = None,
    ) -> Policy:
        """Add a policy while training: to this process, every remote env runner and the evaluation runners.

        The policy joins ``config.policies`` (as a :class:`PolicySpec`), so a
        checkpoint saved afterwards holds it and restoring builds it again. Its
        weights reach the remote runners with the next broadcast. Episodes in
        progress keep their agents' policies; the new mapping applies to agents
        first seen from now on.

        Args:
            policy_id: the new policy's id.
            policy_cls: its class (or ``"module:qualname"``); None: the algorithm's own.
            observation_space: None: inferred from the agents mapped to it, else the
                spaces all agents share.
            action_space: as ``observation_space``.
            config: options that differ for this policy (``{"lr": 1e-4}``).
            policy_state: a :meth:`Policy.get_state` to start from (a snapshot of another
                policy, for a frozen opponent).
            policy_mapping_fn: the mapping from now on; None keeps the current one.
            policies_to_train: the policies that learn from now on; None keeps the current
                setting (with the default of all policies, the new one learns too).

        Returns:
            The new policy (the learner's copy).

        Raises:
            ConfigError: the id exists, the env is single-agent, an argument is invalid,
                or the spaces cannot be inferred; the algorithm is left as it was.
        """
        self.settle_learning()
        if policy_id in self.policies:
            raise ConfigError(f"policy {policy_id!r} exists already; remove_policy({policy_id!r}) first or choose another id")
        try:
            spec = PolicySpec(policy_cls, observation_space, action_space, config)
        except (ValueError, ImportError) as exc:
            raise ConfigError(f"add_policy({policy_id!r}): {exc}") from None
        runner = self._multi_agent_runner("add_policy")
        new_config = self._with_policy_set({**self._policy_specs(), policy_id: spec}, policy_mapping_fn, policies_to_train)
        previous = self.config
        self.config = runner.config = new_config
        try:
            build = self._policy_build(policy_id, *runner.policy_spaces()[policy_id])
            policy = build.build(policy_id)
            if policy_state is not None:
                policy.set_state(policy_state)
        except BaseException:
            self.config = runner.config = previous
            raise
        self.policy_builds[policy_id] = build
        self.policies[policy_id] = policy
        self.callbacks.create_policy(policy_id, policy)
        self._update_runners({policy_id: build}, [])
        self.policy_added(policy_id)
        return policy

    def remove_policy(
        self,
        policy_id: str,
        *,
        policy_mapping_fn: Callable[..., str] | str | None = None,
        policies_to_train: Container[str] | Callable[..., bool] | None = None,
    ) -> None:
        """Remove a policy everywhere it lives: this process, every remote env runner, the evaluation runners.

        Agents of episodes in progress that it acted for are mapped again at
        their next step (with the new mapping), and its rows not yet sampled are
        dropped. It leaves ``config.policies`` and, if named there, ``policies_to_train``.

        Args:
            policy_id: the policy to remove.
            policy_mapping_fn: the mapping from now on; it must no longer name ``policy_id``.
                None keeps the current one.
            policies_to_train: the policies that learn from now on; None keeps the current setting.

        Raises:
            ConfigError: no such policy, it is the last one, the env is single-agent, or an
                argument is invalid; the algorithm is left as it was.
        """
        self.settle_learning()
        self._policy(policy_id)
        if len(self.policies) == 1:
            raise ConfigError(f"policy {policy_id!r} is the only one; an algorithm needs at least one policy")
        runner = self._multi_agent_runner("remove_policy")
        if policies_to_train is None and isinstance(self.config.policies_to_train, list):
            policies_to_train = [pid for pid in self.config.policies_to_train if pid != policy_id]
        specs = {pid: spec for pid, spec in self._policy_specs().items() if pid != policy_id}
        self.config = runner.config = self._with_policy_set(specs, policy_mapping_fn, policies_to_train)
        del self.policies[policy_id], self.policy_builds[policy_id]
        if self.learner_actors is not None:
            self.learner_actors.forget(policy_id)
        self._update_runners({}, [policy_id])
        self.policy_removed(policy_id)

    def policy_added(self, policy_id: str) -> None:
        """Called once :meth:`add_policy` built a policy: a plugin that keeps state per policy (a replay buffer) makes it.

        Args:
            policy_id: the new policy, in :attr:`policies` already.
        """

    def policy_removed(self, policy_id: str) -> None:
        """Called once :meth:`remove_policy` removed a policy: a plugin lets go of what it kept for it.

        Args:
            policy_id: the removed policy, gone from :attr:`policies` already.
        """

    def _multi_agent_runner(self, method: str) -> MultiAgentEnvRunner:
        runner = self.env_runner_group.local_env_runner
        if not isinstance(runner, MultiAgentEnvRunner):
            raise ConfigError(
                f"{method} needs a multi-agent environment (a corral.MultiAgentEnv); {env_name(self.config.env)} "
                "is single-agent and has one policy, default_policy"
            )
        return runner

    def _policy_specs(self) -> dict[str, PolicySpec]:
        """The config's policies; a config that names none has the default policy."""
        return dict(self.config.policies) or {DEFAULT_POLICY_ID: PolicySpec()}

    def _with_policy_set(
        self, policies: dict[str, PolicySpec], policy_mapping_fn: Any, policies_to_train: Any
    ) -> AlgorithmConfig:
        """A frozen copy of the config with another policy set (and mapping, and policies to train, where given)."""
        options: dict[str, Any] = {"policies": policies}
        if policy_mapping_fn is not None:
            options["policy_mapping_fn"] = policy_mapping_fn
        if policies_to_train is not None:
            options["policies_to_train"] = policies_to_train
        new = self.config.copy().multi_agent(**options)
        new.validate()
        return new.freeze()

    def _update_runners(self, added: dict[str, PolicyBuild], removed: list[str]) -> None:
        """Tell every env runner group the policy set changed (the local runners share ``self.policies``)."""
        self.env_runner_group.update_policies(self._runner_config(self.config), added, removed)
        if self._eval_group is not None:
            self._eval_group.update_policies(self.config.get_evaluation_config(), added, removed)
