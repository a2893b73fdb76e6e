"""RLlib's RLModule for torch (its new API stack): ``TorchRLModule`` with ``setup()`` and ``_forward_*(batch) -> dict``.

An RLlib user's module subclasses it as in RLlib::

    class MyModule(TorchRLModule):
        def setup(self):
            hidden = self.model_config.get("hidden", 64)
            self.pi = nn.Sequential(nn.Linear(self.observation_space.shape[0], hidden), nn.ReLU(),
                                    nn.Linear(hidden, self.action_space.n))
            self.vf = nn.Linear(self.observation_space.shape[0], 1)

        def _forward(self, batch, **kwargs):
            return {Columns.ACTION_DIST_INPUTS: self.pi(batch[Columns.OBS])}

        def compute_values(self, batch, embeddings=None):
            return self.vf(batch[Columns.OBS]).squeeze(-1)

and ``config.rl_module(rl_module_spec=RLModuleSpec(module_class=MyModule,
model_config={"hidden": 32}))`` (or ``model={"custom_model": MyModule}``, or
a name given to ``ModelCatalog.register_custom_model``) makes it the policy's
model. It is corral's model contract, not an adapter around it: ``TorchRLModule``
is a :class:`~corral.core.networks.default_models.Model` whose
``forward_inference``, ``forward_exploration`` and ``forward_train`` take
RLlib's batch dict and return the module's dict, as RLlib's do, and take the
tensors corral's policies pass as well (see :meth:`TorchRLModule.forward_train`).

What the module is given, as RLlib's new stack gives it:

- ``observation_space``: the space of the observations as the policy
  preprocesses them (a flat ``Box`` for Dict, Tuple and Discrete observations,
  RLlib's ``FlattenObservations`` connector's; the ``Box`` itself otherwise),
  ``action_space``, ``model_config`` (the spec's dict; ``self.config`` holds the
  same for Ray 2.5-2.9's ``RLModuleConfig`` spelling), ``inference_only``;
- a batch with ``obs``; a stateful module (``get_initial_state()`` a non-empty
  dict) gets ``[B, T, ...]`` observations (``T`` 1 when acting), ``state_in``
  (a dict like its initial state, ``[B, ...]`` per part) and ``seq_lens``, and
  returns ``[B, T, ...]`` outputs and ``state_out``, as RLlib's stateful modules do.

What it returns: ``action_dist_inputs`` (for DQN, the Q-values; ``qf_preds`` is
read too), and, where the algorithm needs values, ``vf_preds`` from
``_forward_train`` (Ray 2.5-2.9) or a ``compute_values(batch, embeddings)``
method (RLlib's ``ValueFunctionAPI``), which gets the batch and the
``embeddings`` the forward pass returned, if any.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from corral.core.common.sample_batch import SampleBatch, state_out_key
from corral.core.networks.default_models import Model
from corral.errors import ConfigError

_DIST_CLASS_METHODS = ("get_inference_action_dist_cls", "get_exploration_action_dist_cls", "get_train_action_dist_cls")


@dataclasses.dataclass
class RLModuleConfig:
    """Ray 2.5-2.9's ``RLModuleConfig``: a module's spaces and model config, as ``self.config`` holds them.

    Attributes:
        observation_space: the observations' space.
        action_space: the actions' space.
        model_config_dict: the module's own options.
        catalog_class: RLlib's catalog class, which a module of corral's API does not take (it must stay None).
        inference_only: whether the module only acts.
    """

    observation_space: gym.Space[Any] | None = None
    action_space: gym.Space[Any] | None = None
    model_config_dict: dict[str, Any] = dataclasses.field(default_factory=dict)
    catalog_class: Any = None
    inference_only: bool = False


class TorchRLModule(Model):
    """RLlib's torch RLModule: build layers in ``setup()``, write ``_forward`` (or the three ``_forward_*``).

    Args:
        config: Ray 2.5-2.9's :class:`RLModuleConfig` (positional), instead of the keywords.
        observation_space: the observations' space, as the module reads them.
        action_space: the space the module acts in.
        inference_only: whether the module only acts (RLlib may then leave out its value layers).
        learner_only: RLlib's flag for modules that only learn; kept as an attribute.
        model_config: the module's own options (a dict, ``self.model_config``).
        catalog_class: RLlib's catalog class, which a module of your own does not take: it must be None.
        **kwargs: RLlib's constructor takes more keywords in later versions: corral refuses any it does not know.

    Raises:
        ConfigError: a ``catalog_class`` or an unknown keyword is given.
    """

    framework = "torch"
    value_outputs: bool = True
    """whether corral's forwards add ``vf_preds`` (set by the policy: False where it needs no values)"""
    nested_observations: gym.Space[Any] | None = None
    """the flat space whose ``original_space`` a Ray 2.5-2.9 module's observations are restored to (set when built)"""

    def __init__(
        self,
        config: RLModuleConfig | None = None,
        *,
        observation_space: gym.Space[Any] | None = None,
        action_space: gym.Space[Any] | None = None,
        inference_only: bool = False,
        learner_only: bool = False,
        model_config: Mapping[str, Any] | None = None,
        catalog_class: Any = None,
        **kwargs: Any,
    ) -> None:
        nn.Module.__init__(self)
        if kwargs:
            raise ConfigError(
                f"{type(self).__qualname__}({', '.join(sorted(kwargs))}=...): an RLModule takes observation_space, "
                "action_space, inference_only, learner_only, model_config and catalog_class (or Ray 2.5-2.9's config)"
            )
        if config is not None:
            observation_space = observation_space or config.observation_space
            action_space = action_space or config.action_space
            model_config = model_config if model_config is not None else config.model_config_dict
            catalog_class = catalog_class or config.catalog_class
            inference_only = inference_only or config.inference_only
        if catalog_class is not None:
            raise ConfigError(
                f"{type(self).__qualname__}: catalog_class={catalog_class!r}: a module of your own builds its layers in "
                "setup() from self.observation_space, self.action_space and self.model_config (a catalog may be built "
                "there by hand); corral builds its own model from a catalog class (RLModuleSpec(catalog_class=...))"
            )
        self.observation_space = observation_space
        self.action_space = action_space
        self.inference_only = inference_only
        self.learner_only = learner_only
        self.model_config: dict[str, Any] = dict(model_config or {})
        self.config = RLModuleConfig(observation_space, action_space, self.model_config, None, inference_only)
        self.setup()

    def setup(self) -> None:
        """Build the module's layers: override this (the constructor calls it once the spaces are set)."""

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]  # RLlib's batch
        """The outputs of all three passes, unless a ``_forward_*`` of its own is written: override this.

        Args:
            batch: ``obs`` (and ``state_in``, ``seq_lens`` for a stateful module).
            **kwargs: keywords RLlib passes on.

        Returns:
            ``action_dist_inputs`` and any other outputs (``vf_preds``, ``embeddings``, ``state_out``).
        """
        raise NotImplementedError(f"{type(self).__qualname__} must implement _forward(batch) or the three _forward_* methods")

    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Outputs for acting without exploration: :meth:`_forward`'s unless overridden."""
        return self._forward(batch, **kwargs)

    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Outputs for acting while collecting samples: :meth:`_forward`'s unless overridden."""
        return self._forward(batch, **kwargs)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Outputs for the loss: :meth:`_forward`'s unless overridden."""
        return self._forward(batch, **kwargs)

    def get_initial_state(self) -> dict[str, torch.Tensor]:
        """A stateful module's state at an episode's start, a dict of tensors without a batch axis; ``{}``: none."""
        return {}

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike[str], *, trust_code: bool = False) -> Any:
        """The policies' modules (models) of an algorithm checkpoint, without the algorithm: RLlib's ``from_checkpoint``.

        Args:
            path: the checkpoint folder, or RLlib's path of the modules inside one:
                ``<checkpoint>/learner_group/learner/rl_module`` (every policy's) or
                ``.../rl_module/<policy id>`` (that policy's).
            trust_code: import what the checkpoint names (a custom model by path) even if it is not registered.

        Returns:
            One policy's module for a policy's path; else every policy's, by policy id (RLlib's ``MultiRLModule``
            is read the same way: ``modules["default_policy"]``).

        Raises:
            CheckpointError: the checkpoint is damaged, names code that is not registered, or has no such policy.
        """
        from corral.core.persistence import checkpoints
        from corral.core.persistence.checkpoint_classes import algorithm_class_of

        folder, policy_id = checkpoints.split_module_path(path)
        ckpt = checkpoints.read_checkpoint(folder)
        algo_class = algorithm_class_of(ckpt, trust_code)
        ids = [policy_id] if policy_id is not None else list(ckpt.meta["policies"])
        modules = {pid: algo_class.load_policy(ckpt, pid, trust_code).model for pid in ids}
        return modules[policy_id] if policy_id is not None else modules

    def is_stateful(self) -> bool:
        """Whether the module has memory (a non-empty :meth:`get_initial_state`)."""
        return bool(self.get_initial_state())

    # RLlib's public passes, and corral's model contract (one observation tensor and the recurrent inputs)
    def forward_inference(  # type: ignore[override]  # RLlib's batch dict, or corral's tensors
        self, batch: Any, *recurrent: Any, **kwargs: Any
    ) -> dict[str, Any]:
        """Outputs for acting without exploration.

        Args:
            batch: RLlib's batch dict (the module's own outputs come back), or corral's observations tensor.
            *recurrent: with a tensor, a stateful module's ``state, seq_lens, prev_actions, prev_rewards``.
            **kwargs: passed on to the module with a batch dict.

        Returns:
            With a batch dict, the module's outputs; with a tensor, corral's (``action_dist_inputs``,
            ``vf_preds`` where values are needed, ``state_out_k``), a row per step.
        """
        return self._pass(self._forward_inference, batch, recurrent, kwargs, acting=True)

    def forward_exploration(  # type: ignore[override]  # RLlib's batch dict, or corral's tensors
        self, batch: Any, *recurrent: Any, **kwargs: Any
    ) -> dict[str, Any]:
        """Outputs for acting while collecting samples (arguments as :meth:`forward_inference`'s).

        Args:
            batch: RLlib's batch dict, or corral's observations tensor.
            *recurrent: with a tensor, a stateful module's state and the rest.
            **kwargs: passed on to the module with a batch dict.

        Returns:
            The outputs by key.
        """
        return self._pass(self._forward_exploration, batch, recurrent, kwargs, acting=True)

    def forward_train(  # type: ignore[override]  # RLlib's batch dict, or corral's tensors
        self, batch: Any, *recurrent: Any, **kwargs: Any
    ) -> dict[str, Any]:
        """Outputs for the loss (arguments as :meth:`forward_inference`'s).

        Args:
            batch: RLlib's batch dict, or corral's observations tensor (``[S, L, ...]`` sequences
                for a stateful module, with the state at each sequence's start).
            *recurrent: with a tensor, a stateful module's state and the rest.
            **kwargs: passed on to the module with a batch dict.

        Returns:
            The outputs by key.
        """
        return self._pass(self._forward_train, batch, recurrent, kwargs)

    def forward(self, batch: Any, *recurrent: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """:meth:`forward_train` (``nn.Module`` calls this).

        Args:
            batch: RLlib's batch dict, or corral's observations tensor.
            *recurrent: with a tensor, a stateful module's state and the rest.
            **kwargs: passed on to the module with a batch dict.

        Returns:
            The outputs by key.
        """
        return self.forward_train(batch, *recurrent, **kwargs)

    def _pass(
        self,
        forward: Callable[..., dict[str, Any]],
        batch: Any,
        recurrent: tuple[Any, ...],
        kwargs: dict[str, Any],
        acting: bool = False,
    ) -> dict[str, Any]:
        if isinstance(batch, Mapping):  # RLlib's call: its acting passes run without autograd, as its torch modules'
            with torch.no_grad() if acting else contextlib.nullcontext():
                return forward(dict(batch), **kwargs)
        return self._corral_outputs(forward, batch, *recurrent)

    def _corral_outputs(
        self,
        forward: Callable[..., dict[str, Any]],
        obs: torch.Tensor,
        state: list[torch.Tensor] | None = None,
        seq_lens: torch.Tensor | None = None,
        prev_actions: torch.Tensor | None = None,
        prev_rewards: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        if self.nested_observations is not None:
            from corral.core.networks.model_v2 import restore_original_dimensions  # it imports this module

            obs = restore_original_dimensions(obs, self.nested_observations)
        batch: dict[str, Any] = {SampleBatch.OBS: obs}
        keys = self._state_keys() if state is not None else []
        if state is not None:  # RLlib's stateful modules get a time axis, of one step when acting
            acting = seq_lens is None
            if acting:
                seq_lens = torch.ones(obs.shape[0], dtype=torch.int32, device=obs.device)
            batch[SampleBatch.OBS] = obs.unsqueeze(1) if acting else obs
            batch[SampleBatch.STATE_IN] = dict(zip(keys, state, strict=True))
            batch[SampleBatch.SEQ_LENS] = seq_lens
            for key, value in ((SampleBatch.PREV_ACTIONS, prev_actions), (SampleBatch.PREV_REWARDS, prev_rewards)):
                if value is not None:
                    batch[key] = value.unsqueeze(1) if acting else value
        out = forward(batch)
        if not isinstance(out, Mapping):
            raise TypeError(f"{type(self).__qualname__} returned a {type(out).__name__}; an RLModule's passes return dicts")
        dist_inputs = out.get(SampleBatch.ACTION_DIST_INPUTS, out.get(SampleBatch.QF_PREDS))
        if dist_inputs is None:
            raise KeyError(
                f"{type(self).__qualname__} returned {sorted(out)}, without {SampleBatch.ACTION_DIST_INPUTS!r} (the "
                "action-distribution inputs; a DQN module's Q-values) that corral's policies act and learn on"
            )
        result = {SampleBatch.ACTION_DIST_INPUTS: dist_inputs.reshape(-1, dist_inputs.shape[-1]) if keys else dist_inputs}
        if self.value_outputs:
            result[SampleBatch.VF_PREDS] = self._values(batch, out).reshape(-1)
        if keys:
            state_out = out.get(SampleBatch.STATE_OUT)
            if not isinstance(state_out, Mapping) or set(state_out) != set(keys):
                raise KeyError(
                    f"{type(self).__qualname__} is stateful (initial state {keys}) but returned state_out="
                    f"{sorted(state_out) if isinstance(state_out, Mapping) else state_out!r}; return a dict with the same keys"
                )
            result.update((state_out_key(index), state_out[key]) for index, key in enumerate(keys))
        return result

    def _state_keys(self) -> list[str]:
        """The names of the state's parts, in :meth:`get_initial_state`'s order (read once: this runs at every step)."""
        keys: list[str] | None = self.__dict__.get("_state_key_order")
        if keys is None:
            keys = self.__dict__["_state_key_order"] = list(self.get_initial_state())
        return keys

    def _values(self, batch: dict[str, Any], out: Mapping[str, Any]) -> torch.Tensor:
        """``vf_preds`` the pass returned, else ``compute_values`` (RLlib's ValueFunctionAPI)."""
        values = out.get(SampleBatch.VF_PREDS)
        if values is not None:
            return torch.as_tensor(values)
        compute_values = getattr(self, "compute_values", None)
        if not callable(compute_values):
            raise NotImplementedError(
                f"{type(self).__qualname__} gives no value estimates, which an actor-critic algorithm (PPO, A2C, "
                "IMPALA) needs: write compute_values(batch, embeddings=None), or return 'vf_preds' from _forward_train"
            )
        embeddings = out.get(SampleBatch.EMBEDDINGS)
        result = compute_values(batch) if embeddings is None else compute_values(batch, embeddings=embeddings)
        return torch.as_tensor(result)


RLModule = TorchRLModule
"""RLlib's framework-independent base; corral's modules are torch modules"""


def is_rl_module(cls: Any) -> bool:
    """Whether a custom model class is an RLModule (:class:`TorchRLModule`)."""
    return isinstance(cls, type) and issubclass(cls, TorchRLModule)


def build_rl_module(
    cls: type, obs_space: gym.Space[Any], action_space: gym.Space[Any], model_config: Mapping[str, Any], value_function: bool
) -> TorchRLModule:
    """Build a user's RLModule with RLlib's keywords, as corral's policy model.

    Args:
        cls: a :class:`TorchRLModule` subclass.
        obs_space: the observations' space as the policy preprocesses them.
        action_space: the space the policy acts in.
        model_config: the module's own options (``model_config`` of its spec, ``custom_model_config``).
        value_function: whether the policy needs value estimates (``vf_preds``).

    Returns:
        The module.

    Raises:
        ConfigError: the constructor or ``setup()`` raised, the module chooses its own action
            distributions, or its initial state is not a flat dict of tensors.
    """
    from corral.core.networks.model_v2 import model_v2_obs_space  # the preprocessed space, as RLlib's connectors give it

    space = model_v2_obs_space(obs_space)
    parameters = inspect.signature(cls).parameters
    # Ray 2.5-2.9's modules take one RLModuleConfig, with the env's own space (a Dict as a Dict) and nested observations
    takes_config = "observation_space" not in parameters and not any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    try:
        if takes_config:
            module: TorchRLModule = cls(RLModuleConfig(obs_space, action_space, dict(model_config)))
            module.nested_observations = space if isinstance(obs_space, (gym.spaces.Dict, gym.spaces.Tuple)) else None
        else:
            module = cls(
                observation_space=space, action_space=action_space, inference_only=False, model_config=dict(model_config)
            )
    except ConfigError:
        raise
    except Exception as exc:  # whatever a user's setup() raises
        raise ConfigError(
            f"model.custom_model {cls.__qualname__}, an RLModule built with (observation_space, action_space, "
            f"model_config={dict(model_config)!r}), raised {type(exc).__name__}: {exc}"
        ) from exc
    own = [name for name in _DIST_CLASS_METHODS if getattr(cls, name, None) is not None]
    if own:
        raise ConfigError(
            f"model.custom_model {cls.__qualname__} defines {own[0]}(): corral chooses the action distribution by the "
            "action space (Categorical, MultiCategorical, DiagGaussian); remove it and return those distributions' inputs"
        )
    initial = module.get_initial_state()
    if not isinstance(initial, Mapping) or not all(isinstance(part, torch.Tensor) for part in initial.values()):
        raise ConfigError(
            f"model.custom_model {cls.__qualname__}.get_initial_state() must return a flat dict of tensors (the state "
            f"parts without a batch axis), got {initial!r}"
        )
    module.value_outputs = value_function
    return module
