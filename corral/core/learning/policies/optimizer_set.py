"""What a policy's ``optimizer`` may be, and :class:`OptimizerSet`: several optimizers that step as one.

A Learner class (``learner_class``) may register several optimizers for one
policy in ``configure_optimizers_for_module`` (RLlib's way to give the value
function its own learning rate, say). The policy's update zeroes, clips and
steps ``policy.optimizer`` as one thing; an :class:`OptimizerSet` is that
thing for several, each over its own parameters.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import torch

from corral.core.learning.fused_adam import FusedAdam

OneOptimizer: TypeAlias = torch.optim.Optimizer | FusedAdam
"""one torch optimizer, or corral's default Adam"""


class OptimizerSet:
    """Optimizers, each over its own parameters, zeroed, stepped and saved together.

    ``param_groups`` lists every member's groups (the same dicts, so a learning
    rate set there reaches the member), in the order the members were given;
    the policy clips each group's gradients on its own, as RLlib clips each
    optimizer's.

    Args:
        optimizers: the members by name (the names key their saved state).

    Raises:
        ValueError: no optimizer was given, or two hold the same parameter.
    """

    def __init__(self, optimizers: dict[str, OneOptimizer]) -> None:
        if not optimizers:
            raise ValueError("an OptimizerSet needs at least one optimizer")
        seen: set[int] = set()
        for name, optimizer in optimizers.items():
            ids = {id(p) for group in optimizer.param_groups for p in group["params"]}
            if ids & seen:
                raise ValueError(f"optimizer {name!r} holds parameters another registered optimizer holds too")
            seen |= ids
        self.optimizers = dict(optimizers)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """Every member's param groups, the members in order."""
        return [group for optimizer in self.optimizers.values() for group in optimizer.param_groups]

    @property
    def state(self) -> dict[Any, Any]:
        """Every member's per-parameter state by parameter, in a new dict (torch's are defaultdicts: a lookup of
        another member's parameter would add it to theirs)."""
        return {param: value for optimizer in self.optimizers.values() for param, value in optimizer.state.items()}

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every member's gradients.

        Args:
            set_to_none: drop the gradient tensors rather than fill them with zeros.
        """
        for optimizer in self.optimizers.values():
            optimizer.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        """Step every member, in order."""
        for optimizer in self.optimizers.values():
            optimizer.step()

    def state_dict(self) -> dict[str, Any]:
        """Each member's ``state_dict()`` by name."""
        return {"optimizers": {name: optimizer.state_dict() for name, optimizer in self.optimizers.items()}}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` returned into the members.

        Args:
            state_dict: the saved state.

        Raises:
            ValueError: it was saved from other optimizers (other names, or one optimizer's state).
        """
        saved = state_dict.get("optimizers")
        if not isinstance(saved, dict) or set(saved) != set(self.optimizers):
            got = sorted(saved) if isinstance(saved, dict) else "one optimizer's state"
            raise ValueError(
                f"the saved optimizer state holds {got}, but the policy's Learner registered {sorted(self.optimizers)}; "
                "restore with the learner_class that saved it"
            )
        for name, optimizer in self.optimizers.items():
            optimizer.load_state_dict(saved[name])

    def __repr__(self) -> str:
        return "OptimizerSet(" + ", ".join(f"{name}={optimizer!r}" for name, optimizer in self.optimizers.items()) + ")"


Optimizer: TypeAlias = OneOptimizer | OptimizerSet
"""what a policy's ``optimizer`` is: a ``torch.optim`` optimizer, corral's default Adam, or a Learner's set of them"""
