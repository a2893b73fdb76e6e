"""Building the Learner a config's ``learner_class`` names for a policy, and checking it fits the policy's algorithm."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.core.learning.learners.learner import Learner
from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.core.learning.policy import Policy


def build_learner(policy: Policy, module_id: str) -> Learner | None:
    """The Learner ``policy.config.learner_class`` names for a policy copy, built; None when it names none.

    Args:
        policy: the new policy copy.
        module_id: its id.

    Returns:
        The Learner, or None.

    Raises:
        ConfigError: the class is no Learner, or replaces what the policy's algorithm cannot take from it.
    """
    learner_class = policy.config.learner_class
    if learner_class is None:
        return None
    if not (isinstance(learner_class, type) and issubclass(learner_class, Learner)):
        raise ConfigError(f"learner_class={learner_class!r} is not a subclass of corral.core.Learner (RLlib's TorchLearner)")
    if learner_class.policy_classes and not isinstance(policy, learner_class.policy_classes):
        owners = ", ".join(cls.__name__ for cls in learner_class.policy_classes)
        raise ConfigError(
            f"learner_class={learner_class.__qualname__} is the Learner of {owners}, not of {type(policy).__name__}; "
            "subclass the Learner of your algorithm, or corral.core.TorchLearner"
        )
    check_learner_fits(learner_class, type(policy))
    learner = learner_class(config=policy.config, policy=policy, module_id=module_id)
    learner.build()
    return learner


def check_learner_fits(learner_class: type[Learner], policy_class: type[Policy]) -> None:
    """Refuse a Learner class that replaces a part of the update the policy's algorithm does not take from a Learner.

    Args:
        learner_class: the ``learner_class``.
        policy_class: the class of the policy it would be built for.

    Raises:
        ConfigError: it overrides ``compute_loss_for_module`` for a policy without ``compute_loss``, or
            ``configure_optimizers_for_module`` for one that builds optimizers of its own.
    """
    from corral.core.learning.policies.updates import Updates
    from corral.core.learning.policy import Policy as BasePolicy

    own_loss = policy_class.compute_loss is not Updates.compute_loss
    one_optimizer = policy_class.make_optimizer is BasePolicy.make_optimizer
    name = f"{learner_class.__qualname__} (learner_class)"
    if learner_class.compute_loss_for_module is not Learner.compute_loss_for_module and not own_loss:
        raise ConfigError(
            f"{name} overrides compute_loss_for_module, but {policy_class.__name__} computes its loss in its own update "
            "(target networks, sequences or several losses); write the loss in a Policy subclass's learn_on_batch "
            "instead. PPO, A2C, MARWIL and BC take the loss from a Learner"
        )
    if learner_class.configure_optimizers_for_module is not Learner.configure_optimizers_for_module and not one_optimizer:
        raise ConfigError(
            f"{name} overrides configure_optimizers_for_module, but {policy_class.__name__} builds optimizers of its own "
            "(make_optimizer); override make_optimizer in a Policy subclass instead"
        )
