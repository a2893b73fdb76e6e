"""RLlib's catalogs (``Catalog``, ``PPOCatalog``): the parts of a default model, built from the spaces and model config.

A catalog builds what corral's own actor-critic model is made of, from the
same ``model`` options: the encoder (:func:`~corral.core.networks.default_models.build_encoder`),
the policy and value heads (``head_fcnet_hiddens``) and the action
distribution class. Scripts build the parts by hand (RLlib's catalog guide),
or name a subclass in ``RLModuleSpec(catalog_class=...)``: corral's
actor-critic algorithms then build their model from it (:class:`CatalogModel`).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from corral.core.common.sample_batch import SampleBatch
from corral.core.contracts.options.model_config import ModelConfig
from corral.core.networks.default_models import Model, build_encoder, head, head_layers
from corral.core.networks.distributions import ActionDistribution, distribution_for
from corral.errors import ConfigError

ENCODER_OUT = "encoder_out"
"""the key of an encoder's output (RLlib's ``ray.rllib.core.models.base``)"""
ACTOR = "actor"
CRITIC = "critic"
"""the keys of an actor-critic encoder's two outputs"""


def _torch_only(framework: str) -> None:
    if framework != "torch":
        raise ConfigError(f"corral's catalogs build torch parts; framework={framework!r} is not torch")


class _Encoder(nn.Module):
    """An encoder that reads RLlib's batch dict and answers ``{ENCODER_OUT: features}``."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {ENCODER_OUT: self.body(torch.as_tensor(batch[SampleBatch.OBS], dtype=torch.float32))}


class _ActorCriticEncoder(nn.Module):
    """The actor's and the critic's encoders (one shared, with ``vf_share_layers``): ``{ENCODER_OUT: {ACTOR, CRITIC}}``."""

    def __init__(self, actor: nn.Module, critic: nn.Module | None) -> None:
        super().__init__()
        self.actor = actor
        self.critic = critic

    def forward(self, batch: dict[str, Any]) -> dict[str, Any]:
        obs = torch.as_tensor(batch[SampleBatch.OBS], dtype=torch.float32)
        features = self.actor(obs)
        return {ENCODER_OUT: {ACTOR: features, CRITIC: features if self.critic is None else self.critic(obs)}}


class Catalog:
    """RLlib's catalog: an encoder and the action distribution for the spaces, from the model config.

    Args:
        observation_space: the observations' space.
        action_space: the actions' space.
        model_config_dict: corral's (RLlib's) ``model`` options.
        view_requirements: RLlib's argument, not used.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        model_config_dict: dict[str, Any],
        view_requirements: Any = None,
    ) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.model_config = ModelConfig.model_validate(dict(model_config_dict or {}))

    @functools.cached_property
    def latent_dims(self) -> tuple[int]:
        """The encoder's output width, as a shape (found once, when first asked)."""
        return (build_encoder(self.observation_space, self.model_config)[1],)

    def build_encoder(self, framework: str = "torch") -> nn.Module:
        """The encoder: ``encoder({"obs": obs})[ENCODER_OUT]`` are the features.

        Raises:
            ConfigError: a framework other than torch.
        """
        _torch_only(framework)
        return _Encoder(build_encoder(self.observation_space, self.model_config)[0])

    def get_action_dist_cls(self, framework: str = "torch") -> type[ActionDistribution]:
        """The action distribution class for the action space, with RLlib's ``from_logits``.

        Raises:
            ConfigError: a framework other than torch.
        """
        _torch_only(framework)
        dist_class, _ = distribution_for(self.action_space)

        class FromLogits(dist_class):  # type: ignore[valid-type,misc]  # a class chosen by the space
            @classmethod
            def from_logits(cls, logits: torch.Tensor, **kwargs: Any) -> ActionDistribution:
                """The distributions over these network outputs (RLlib's constructor)."""
                return cls(logits)

        FromLogits.__name__ = FromLogits.__qualname__ = dist_class.__name__
        return FromLogits

    @property
    def action_dist_inputs(self) -> int:
        """The network outputs the action distribution needs."""
        return distribution_for(self.action_space)[1]


class PPOCatalog(Catalog):
    """RLlib's PPO catalog: an actor-critic encoder, a policy head and a value head."""

    def build_actor_critic_encoder(self, framework: str = "torch") -> nn.Module:
        """``encoder({"obs": obs})[ENCODER_OUT][ACTOR]`` (and ``[CRITIC]``): one encoder with ``vf_share_layers``.

        Raises:
            ConfigError: a framework other than torch.
        """
        _torch_only(framework)
        actor = build_encoder(self.observation_space, self.model_config)[0]
        critic = None if self.model_config.vf_share_layers else build_encoder(self.observation_space, self.model_config)[0]
        return _ActorCriticEncoder(actor, critic)

    def build_pi_head(self, framework: str = "torch") -> nn.Module:
        """The policy head: the action distribution's inputs from the actor's features.

        Raises:
            ConfigError: a framework other than torch.
        """
        _torch_only(framework)
        return head(self.latent_dims[0], self.action_dist_inputs, 0.01, *head_layers(self.model_config))

    def build_vf_head(self, framework: str = "torch") -> nn.Module:
        """The value head: one value from the critic's features.

        Raises:
            ConfigError: a framework other than torch.
        """
        _torch_only(framework)
        return head(self.latent_dims[0], 1, 1.0, *head_layers(self.model_config))


class CatalogModel(Model):
    """corral's actor-critic model built from a catalog's parts (``RLModuleSpec(catalog_class=...)``).

    Args:
        obs_space: the observations' space.
        action_space: the actions' space.
        num_outputs: the action distribution's inputs, which the catalog's policy head must give.
        model_config: the model options, for the catalog.
        name: RLlib's name of the model (unused).
        catalog_class: a ``PPOCatalog`` (sub)class (or its path, if its module is imported).

    Raises:
        ConfigError: the catalog builds no actor-critic parts, or its policy head gives another width.
    """

    actor_critic_only = True
    """the model has a policy head and a value head: a Q-network (DQN's) cannot be built from it"""

    def __init__(
        self,
        obs_space: gym.Space[Any],
        action_space: gym.Space[Any],
        num_outputs: int,
        model_config: dict[str, Any],
        name: str = "catalog_model",
        *,
        catalog_class: type[PPOCatalog] | str = PPOCatalog,
    ) -> None:
        super().__init__()
        catalog_class = _imported(catalog_class)
        if not (isinstance(catalog_class, type) and issubclass(catalog_class, PPOCatalog)):
            raise ConfigError(f"catalog_class={catalog_class!r}: corral builds actor-critic models from a PPOCatalog (subclass)")
        options = {key: value for key, value in model_config.items() if key not in ("custom_model", "custom_model_config")}
        catalog = catalog_class(obs_space, action_space, model_config_dict=options)
        if catalog.action_dist_inputs != num_outputs:
            raise ConfigError(
                f"{catalog_class.__name__}'s policy head gives {catalog.action_dist_inputs} outputs; the policy needs "
                f"{num_outputs}"
            )
        self.encoder = catalog.build_actor_critic_encoder(framework="torch")
        self.pi = catalog.build_pi_head(framework="torch")
        self.vf = catalog.build_vf_head(framework="torch")

    def _forward(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        features = self.encoder({SampleBatch.OBS: obs})[ENCODER_OUT]
        return {
            SampleBatch.ACTION_DIST_INPUTS: self.pi(features[ACTOR]),
            SampleBatch.VF_PREDS: self.vf(features[CRITIC]).squeeze(-1),
        }


def _imported(catalog_class: Any) -> Any:
    """A catalog class a config names by its import path (in a checkpoint's or a Tune trial's config), if its module is
    imported already: a config never makes corral import code of its own accord."""
    if not isinstance(catalog_class, str):
        return catalog_class
    module, _, name = catalog_class.partition(":")
    if module not in sys.modules or not hasattr(sys.modules[module], name):
        raise ConfigError(
            f"catalog_class {catalog_class!r} is named by its path and its module is not imported here; import it first, "
            "or pass the class (config_overrides={'model': {...}} when loading a checkpoint)"
        )
    return getattr(sys.modules[module], name)
