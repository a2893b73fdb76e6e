"""Target networks: slowly moving copies of a policy's networks that its loss measures against.

DQN, R2D2, SAC and CQL bootstrap their TD targets from them; APPO uses one as
PPO's "old policy". :class:`TargetNetworkPolicy` gives a policy a frozen copy of
its model, moves it towards the model with :meth:`~TargetNetworkPolicy.update_targets`
(a copy, or Polyak averaging), and keeps it in the policy's state, so
checkpoints and Learner actors carry it.
"""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

import torch
from torch import nn

from corral.core.learning.policies.state import load_finite_weights
from corral.core.learning.policy import Policy


def update_target(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Move ``target``'s parameters towards ``source``'s: ``tau=1`` copies, otherwise Polyak averaging.

    Buffers (running statistics, say) are always copied, whatever ``tau``.

    Args:
        target: the target network, changed in place.
        source: the online network, with the same parameters and buffers in the same order.
        tau: the step towards ``source``: 1 (or more) copies it, a value in ``(0, 1)`` sets
            ``target = (1 - tau) * target + tau * source``.

    Raises:
        ValueError: the two networks have different numbers of parameters or buffers.
    """
    _TargetTensors.of(target, source).move(tau)


class _TargetTensors(NamedTuple):
    """A target network's and its online network's parameters and buffers, listed once (listing them costs more
    than the update itself on small networks)."""

    target: nn.Module
    online: nn.Module
    target_params: list[torch.Tensor]
    online_params: list[torch.Tensor]
    target_buffers: list[torch.Tensor]
    online_buffers: list[torch.Tensor]

    @classmethod
    def of(cls, target: nn.Module, online: nn.Module) -> _TargetTensors:
        tensors = cls(
            target, online, *(list(t) for t in (target.parameters(), online.parameters(), target.buffers(), online.buffers()))
        )
        if len(tensors.target_params) != len(tensors.online_params) or len(tensors.target_buffers) != len(tensors.online_buffers):
            raise ValueError(
                f"a target network and its online network differ in their tensors: {len(tensors.target_params)} and "
                f"{len(tensors.online_params)} parameters, {len(tensors.target_buffers)} and "
                f"{len(tensors.online_buffers)} buffers"
            )
        return tensors

    def move(self, tau: float) -> None:
        """What :func:`update_target` does, in one foreach call per kind of tensor."""
        with torch.no_grad():
            if self.target_params and tau >= 1.0:
                torch._foreach_copy_(self.target_params, self.online_params)
            elif self.target_params:
                torch._foreach_lerp_(self.target_params, self.online_params, tau)
            if self.target_buffers:
                torch._foreach_copy_(self.target_buffers, self.online_buffers)


class TargetNetworkPolicy(Policy):
    """A policy with a target copy of its model (made after the model is built, never trained by the optimizer).

    Subclasses with several networks list those that have target copies in
    :meth:`target_pairs`. It may come first among a policy class's bases, before
    another ``Policy`` subclass (``class APPOPolicy(TargetNetworkPolicy, IMPALAPolicy)``).
    """

    target_model: nn.Module

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.target_model = copy.deepcopy(self.model).requires_grad_(False)

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """(target, online) network pairs; by default the whole model."""
        return [(self.target_model, self.model)]

    def update_targets(self, tau: float) -> None:
        """Update every target network (``tau=1`` copies)."""
        pairs = self.target_pairs()
        cached = self.__dict__.get("_target_tensors", [])
        # a subclass may swap a network (a policy map restoring one, say): list the tensors again when the pairs change
        if [(t.target, t.online) for t in cached] != pairs:
            cached = self.__dict__["_target_tensors"] = [_TargetTensors.of(target, online) for target, online in pairs]
        for tensors in cached:
            tensors.move(tau)

    def update_target(self, tau: float | None = None) -> None:
        """RLlib's call, which a custom ``training_step`` makes: :meth:`update_targets` by ``tau`` (default the config's).

        Args:
            tau: how far each target moves towards its online network (1 copies); None: ``config.tau``, else 1.
        """
        self.update_targets(float(getattr(self.config, "tau", 1.0)) if tau is None else tau)

    def get_state(self) -> dict[str, Any]:
        """The base state plus the target network's weights."""
        target = {k: v.detach().cpu().clone() for k, v in self.target_model.state_dict().items()}
        return {**super().get_state(), "target_weights": target}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore the base state and the target network."""
        super().set_state(state)
        if "target_weights" in state:
            load_finite_weights(self.target_model, state["target_weights"])
