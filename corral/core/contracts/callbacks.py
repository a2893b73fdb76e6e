"""User callbacks, and the one facade through which the core calls hooks.

A user subclasses :class:`Callbacks` and overrides any hook method from
:mod:`corral.core.contracts.hookspecs`; ``config.callbacks([A, B])`` registers an
instance of each in the algorithm's pluggy PluginManager, so several compose
without a wrapper. Only methods a subclass overrides are registered, so a hook
nobody implements costs nothing on the sampling hot path. Hook plugins that a
distribution ships in entry-point group ``corral.hooks`` join every run.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pluggy

from corral.core.contracts import hookspecs
from corral.errors import ConfigError

if TYPE_CHECKING:  # the types the hooks receive; at run time nothing is imported
    from gymnasium.vector import VectorEnv

    from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch
    from corral.core.environments.envs import EnvContext
    from corral.core.environments.multi_agent_env import MultiAgentEnv
    from corral.core.learning.policy import Policy
    from corral.core.sampling.env_runner import Episode
    from corral.core.sampling.env_runner_group import EnvRunnerGroup
    from corral.core.sampling.multi_agent_env_runner import AnyEnvRunner, MultiAgentEpisode
    from corral.core.training.algorithm import Algorithm

logger = logging.getLogger(__name__)


class Callbacks:
    """Base class of user callbacks: override the hooks you need, with keyword arguments.

    Each method receives only the keywords it declares (plus ``**kwargs`` is
    allowed), so callbacks keep working when hooks gain arguments. Available
    hooks and their arguments are in :mod:`corral.core.contracts.hookspecs`.
    """

    def on_algorithm_init(self, *, algorithm: Algorithm, **kwargs: Any) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_algorithm_init`."""

    def on_environment_created(
        self,
        *,
        env_runner: AnyEnvRunner,
        env: VectorEnv | MultiAgentEnv,
        env_context: EnvContext,
        **kwargs: Any,
    ) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_environment_created`."""

    def on_sub_environment_created(
        self,
        *,
        env_runner: AnyEnvRunner,
        sub_environment: Any,
        env_context: EnvContext,
        env_index: int,
        **kwargs: Any,
    ) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_sub_environment_created`."""

    def on_create_policy(self, *, policy_id: str, policy: Policy, **kwargs: Any) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_create_policy`."""

    def on_episode_start(
        self, *, episode: Episode | MultiAgentEpisode, env_runner: AnyEnvRunner, env_index: int, **kwargs: Any
    ) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_episode_start`."""

    def on_episode_step(
        self, *, episode: Episode | MultiAgentEpisode, env_runner: AnyEnvRunner, env_index: int, **kwargs: Any
    ) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_episode_step`."""

    def on_episode_end(
        self, *, episode: Episode | MultiAgentEpisode, env_runner: AnyEnvRunner, env_index: int, **kwargs: Any
    ) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_episode_end`."""

    def on_sample_end(self, *, env_runner: AnyEnvRunner, samples: MultiAgentBatch, **kwargs: Any) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_sample_end`."""

    def on_postprocess_trajectory(
        self,
        *,
        episode: Episode | MultiAgentEpisode,
        agent_id: Any,
        policy_id: str,
        policies: Mapping[str, Policy],
        postprocessed_batch: SampleBatch,
        original_batches: dict[Any, tuple[Any, ...]],
        **kwargs: Any,
    ) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_postprocess_trajectory`."""

    def on_learn_on_batch(self, *, policy: Policy, train_batch: SampleBatch, result: dict[str, Any], **kwargs: Any) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_learn_on_batch`."""

    def on_train_result(self, *, algorithm: Algorithm, result: dict[str, Any], **kwargs: Any) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_train_result`."""

    def on_evaluate_start(self, *, algorithm: Algorithm, **kwargs: Any) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_evaluate_start`."""

    def on_evaluate_end(self, *, algorithm: Algorithm, evaluation_metrics: dict[str, Any], **kwargs: Any) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_evaluate_end`."""

    def on_env_runners_recreated(
        self,
        *,
        algorithm: Algorithm,
        env_runner_group: EnvRunnerGroup,
        env_runner_indices: list[int],
        is_evaluation: bool,
        **kwargs: Any,
    ) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_env_runners_recreated`."""

    def on_workers_recreated(
        self, *, algorithm: Algorithm, worker_set: EnvRunnerGroup, worker_ids: list[int], is_evaluation: bool, **kwargs: Any
    ) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_workers_recreated`."""

    def on_checkpoint_loaded(self, *, algorithm: Algorithm, **kwargs: Any) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_checkpoint_loaded`."""

    def on_algorithm_stop(self, *, algorithm: Algorithm, **kwargs: Any) -> None:
        """See :func:`corral.core.contracts.hookspecs.on_algorithm_stop`."""


DefaultCallbacks = Callbacks
"""RLlib's name for :class:`Callbacks`."""


class MultiCallbacks:
    """Compatibility with RLlib's wrapper: ``MultiCallbacks([A, B])`` is just ``[A, B]``.

    ``config.callbacks([A, B])`` already composes several classes; this exists
    so RLlib code keeps working.
    """

    def __new__(cls, callback_classes: Iterable[type[Callbacks]]) -> list[type[Callbacks]]:  # type: ignore[misc]
        """The classes themselves, as a list: the config composes them."""
        return list(callback_classes)


def _hook_adapters(callbacks: Callbacks) -> SimpleNamespace:
    """Hook implementations for the methods a Callbacks subclass overrides.

    pluggy passes an implementation only the positional-or-keyword parameters
    it declares, but RLlib-style callbacks take keyword-only arguments and
    ``**kwargs``. Each adapter declares the hookspec's argument names and calls
    the method with those it accepts (all of them if it takes ``**kwargs``).

    Raises:
        ConfigError: the class defines an RLlib hook corral never calls, or a method
            requires an argument its hook does not pass (both say what to use instead).
    """
    owner = type(callbacks).__qualname__
    for name, instead in hookspecs.NOT_CALLED.items():
        if callable(getattr(callbacks, name, None)):
            raise ConfigError(f"{owner}.{name} is RLlib's hook, which corral never calls; use {instead}")
    adapters = SimpleNamespace()
    for name in hookspecs.HOOK_NAMES:
        method = getattr(callbacks, name)
        if getattr(type(callbacks), name) is getattr(Callbacks, name):
            continue
        spec_args = list(inspect.signature(getattr(hookspecs, name)).parameters)
        params = inspect.signature(method).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        unknown = [
            p.name
            for p in params.values()
            if p.name not in spec_args
            and p.default is inspect.Parameter.empty
            and p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
        ]
        if unknown:
            advice = "".join(f"; {hookspecs.NOT_PASSED[a]}" for a in unknown if a in hookspecs.NOT_PASSED)
            raise ConfigError(
                f"{owner}.{name} requires {', '.join(map(repr, unknown))}, "
                f"which the hook does not pass; it passes {', '.join(spec_args)}{advice}"
            )
        wanted = spec_args if takes_any else [a for a in spec_args if a in params]
        namespace: dict[str, Any] = {"method": method, "wanted": wanted}
        exec(  # a function whose parameter names are the hookspec's, for pluggy to read
            f"def {name}({', '.join(spec_args)}):\n    given = locals()\n    return method(**{{k: given[k] for k in wanted}})\n",
            namespace,
        )
        setattr(adapters, name, hookspecs.hookimpl(namespace[name]))
    return adapters


class CallbackRunner:
    """The typed facade the core calls hooks through; one per algorithm (or env runner).

    The ``has_*`` flags let the sampling loop skip per-step Python work when no
    plugin implements the episode hooks.
    """

    def __init__(self, callback_classes: Iterable[type[Callbacks]], hook_plugins: Mapping[str, object] | None = None) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self.callbacks: list[Callbacks] = [cls() for cls in callback_classes]
        # pluggy calls the last registered first. Hook plugins go in first so they run last and
        # observe what the user's callbacks did; callbacks in reverse so they run in the user's order.
        for name, plugin in (hook_plugins or {}).items():
            try:
                self._pm.register(plugin, name=name)
            except (pluggy.PluginValidationError, ValueError) as exc:
                logger.warning("hook plugin %s was not registered: %s", name, exc)
        for index, instance in reversed(list(enumerate(self.callbacks))):
            self._pm.register(_hook_adapters(instance), name=f"{type(instance).__qualname__}#{index}")
        if _trace_enabled():
            self._pm.add_hookcall_monitoring(_trace_call, _trace_result)
        hook = self._pm.hook
        self.has_episode_start = bool(hook.on_episode_start.get_hookimpls())
        self.has_episode_step = bool(hook.on_episode_step.get_hookimpls())
        self.has_episode_end = bool(hook.on_episode_end.get_hookimpls())
        self.needs_episodes = self.has_episode_start or self.has_episode_step or self.has_episode_end
        self.has_postprocess_trajectory = bool(hook.on_postprocess_trajectory.get_hookimpls())
        self.needs_episodes |= self.has_postprocess_trajectory  # the hook gets each trajectory's episode

    @property
    def hook(self) -> Any:
        """pluggy's hook relay, for callers that need a hook not wrapped below."""
        return self._pm.hook

    def algorithm_init(self, algorithm: Any) -> None:
        """Call every ``on_algorithm_init`` implementation, with the arguments its hookspec names."""
        self._pm.hook.on_algorithm_init(algorithm=algorithm)

    def environment_created(self, env_runner: AnyEnvRunner, env: VectorEnv | MultiAgentEnv, env_context: EnvContext) -> None:
        """Call every ``on_environment_created`` implementation, with the arguments its hookspec names."""
        self._pm.hook.on_environment_created(env_runner=env_runner, worker=env_runner, env=env, env_context=env_context)

    def sub_environment_created(self, env_runner: AnyEnvRunner, sub_environment: Any, env_context: EnvContext) -> None:
        """Call every ``on_sub_environment_created`` implementation, with the arguments its hookspec names."""
        self._pm.hook.on_sub_environment_created(
            env_runner=env_runner, worker=env_runner, sub_environment=sub_environment, env_context=env_context,
            env_index=env_context.vector_index,
        )  # fmt: skip

    def create_policy(self, policy_id: str, policy: Policy) -> None:
        """Call every ``on_create_policy`` implementation, with the arguments its hookspec names."""
        self._pm.hook.on_create_policy(policy_id=policy_id, policy=policy)

    def episode_start(self, episode: Episode | MultiAgentEpisode, env_runner: AnyEnvRunner, env_index: int) -> None:
        """Call every ``on_episode_start`` implementation, with the arguments its hookspec names."""
        self._pm.hook.on_episode_start(**_episode_arguments(episode, env_runner, env_index))

    def episode_step(self, episode: Episode | MultiAgentEpisode, env_runner: AnyEnvRunner, env_index: int) -> None:
        """Call every ``on_episode_step`` implementation, with the arguments its hookspec names."""
        self._pm.hook.on_episode_step(**_episode_arguments(episode, env_runner, env_index))

    def episode_end(self, episode: Episode | MultiAgentEpisode, env_runner: AnyEnvRunner, env_index: int) -> None:
        """Call every ``on_episode_end`` implementation, with the arguments its hookspec names."""
        self._pm.hook.on_episode_end(**_episode_arguments(episode, env_runner, env_index))

    def sample_end(self, env_runner: AnyEnvRunner, samples: MultiAgentBatch) -> None:
        """Call every ``on_sample_end`` implementation, with the arguments its hookspec names."""
        self._pm.hook.on_sample_end(env_runner=env_runner, worker=env_runner, samples=samples)

    def postprocess_trajectory(
        self,
        env_runner: AnyEnvRunner,
        policy_id: str,
        policy: Policy,
        batch: SampleBatch,
        *,
        agent_id: Any,
        episode: Episode | MultiAgentEpisode,
        original_batches: dict[Any, tuple[Any, ...]],
    ) -> None:
        """Call every ``on_postprocess_trajectory`` implementation, with the arguments its hookspec names.

        Args:
            env_runner: the runner that sampled the trajectory.
            policy_id: the id of the policy that postprocessed it.
            policy: that policy.
            batch: the postprocessed trajectory.
            agent_id: the agent whose trajectory it is (None in a single-agent run).
            episode: the episode its last row belongs to.
            original_batches: every agent's trajectory of the sub-environment, before postprocessing.
        """
        self._pm.hook.on_postprocess_trajectory(
            env_runner=env_runner, worker=env_runner, episode=episode, agent_id=agent_id, policy_id=policy_id,
            policy=policy, policies=env_runner.policies, postprocessed_batch=batch, original_batches=original_batches,
        )  # fmt: skip

    def learn_on_batch(self, policy: Policy, train_batch: SampleBatch, result: dict[str, Any]) -> None:
        """Call every ``on_learn_on_batch`` implementation, with the arguments its hookspec names."""
        self._pm.hook.on_learn_on_batch(policy=policy, train_batch=train_batch, result=result)

    def train_result(self, algorithm: Algorithm, result: dict[str, Any]) -> None:
        """Call every ``on_train_result`` implementation, with the arguments its hookspec names."""
        self._pm.hook.on_train_result(algorithm=algorithm, result=result)

    def evaluate_start(self, algorithm: Algorithm) -> None:
        """Call every ``on_evaluate_start`` implementation, with the arguments its hookspec names."""
        self._pm.hook.on_evaluate_start(algorithm=algorithm)

    def evaluate_end(self, algorithm: Algorithm, evaluation_metrics: dict[str, Any]) -> None:
        """Call every ``on_evaluate_end`` implementation, with the arguments its hookspec names."""
        self._pm.hook.on_evaluate_end(algorithm=algorithm, evaluation_metrics=evaluation_metrics)

    def env_runners_recreated(
        self, algorithm: Algorithm, group: EnvRunnerGroup, indices: list[int], *, is_evaluation: bool
    ) -> None:
        """Call every ``on_env_runners_recreated`` and ``on_workers_recreated`` (RLlib's older name) implementation."""
        self._pm.hook.on_env_runners_recreated(
            algorithm=algorithm, env_runner_group=group, env_runner_indices=indices, is_evaluation=is_evaluation
        )
        self._pm.hook.on_workers_recreated(algorithm=algorithm, worker_set=group, worker_ids=indices, is_evaluation=is_evaluation)

    def checkpoint_loaded(self, algorithm: Algorithm) -> None:
        """Call every ``on_checkpoint_loaded`` implementation, with the arguments its hookspec names."""
        self._pm.hook.on_checkpoint_loaded(algorithm=algorithm)

    def algorithm_stop(self, algorithm: Algorithm) -> None:
        """Call every ``on_algorithm_stop`` implementation, with the arguments its hookspec names."""
        self._pm.hook.on_algorithm_stop(algorithm=algorithm)


def _episode_arguments(episode: Episode | MultiAgentEpisode, env_runner: AnyEnvRunner, env_index: int) -> dict[str, Any]:
    """What the episode hooks are given: the runner twice (``worker`` is RLlib's older name), its env, policies and model."""
    base_env = env_runner.base_env
    return {
        "episode": episode,
        "env_runner": env_runner,
        "worker": env_runner,
        "base_env": base_env,
        "env": base_env[env_index] if isinstance(base_env, list) else base_env,  # a multi-agent runner's: the episode's
        "env_index": env_index,
        "policies": env_runner.policies,
        "rl_module": env_runner.module,
    }


def installed_hook_plugins() -> dict[str, object]:
    """The installed hook plugins (group ``corral.hooks``) by a name that says where each comes from."""
    import corral.registry as registry

    return {f"{info.name} ({info.dist})": plugin for info, plugin in registry.get_hook_plugins()}


def _trace_enabled() -> bool:
    return os.environ.get("CORRAL_TRACE_PLUGINS", "") not in ("", "0")


def _trace_call(hook_name: str, hook_impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """``CORRAL_TRACE_PLUGINS=1``: every hook call and the implementations it reaches, in call order."""
    answering = ", ".join(impl.plugin_name for impl in reversed(hook_impls)) or "no implementations"
    print(f"[corral trace] {hook_name}({', '.join(kwargs)}) -> {answering}", file=sys.stderr)


def _trace_result(outcome: Any, hook_name: str, hook_impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """``CORRAL_TRACE_PLUGINS=1``: a hook call that raised, and what it raised."""
    if outcome.exception is not None:
        print(f"[corral trace] {hook_name} raised {type(outcome.exception).__name__}: {outcome.exception}", file=sys.stderr)
