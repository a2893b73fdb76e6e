"""What evaluation needs of off-policy estimation (``off_policy_estimation_methods``), and asking the seam for it.

The estimators and the recorded episodes they read are an integration
(:mod:`corral.integrations.estimation`), asked through the
``off_policy_evaluation`` seam once the policies are built; the core only runs
it at each evaluation and reports what it returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from corral.core.contracts.integrations import implemented, required_answer
from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.core.contracts.config import AlgorithmConfig
    from corral.core.learning.policy import Policy


class OffPolicyEvaluation(Protocol):
    """The estimators of one run and the recorded episodes they estimate the trained policy's value on."""

    def run(self, duration: int, unit: str) -> dict[str, dict[str, float]]:
        """Estimate the trained policy's value on the next recorded episodes.

        Args:
            duration: how many episodes, or rows (whole episodes, at least this many).
            unit: ``"episodes"`` or ``"timesteps"``.

        Returns:
            Each estimator's estimate and training stats, by the name the config gives it.
        """
        ...


def check_estimation_integration(config: AlgorithmConfig | Any) -> None:
    """Refuse, before any work starts, ``off_policy_estimation_methods`` that no installed integration runs.

    Args:
        config: the algorithm's config.

    Raises:
        ConfigError: the config names estimation methods and no integration implements the seam.
    """
    if config.off_policy_estimation_methods and not implemented("off_policy_evaluation"):
        raise _missing()


def off_policy_evaluation_for(config: AlgorithmConfig | Any, policies: Mapping[str, Policy]) -> OffPolicyEvaluation | None:
    """The off-policy evaluation the config asks for, from the integration that runs it; None when it names none.

    Args:
        config: the algorithm's config.
        policies: the learner's policies by id.

    Returns:
        The evaluation, or None when ``off_policy_estimation_methods`` is empty.

    Raises:
        ConfigError: methods are named and no integration answers; or the integration's own
            (no recorded episodes, a multi-agent run, a file that does not fit the policy).
    """
    if not config.off_policy_estimation_methods:
        return None
    found: OffPolicyEvaluation = required_answer("off_policy_evaluation", _missing(), config=config, policies=policies)
    return found


def _missing() -> ConfigError:
    return ConfigError(
        "off_policy_estimation_methods needs corral's estimation integration (corral.integrations.estimation, "
        "seam 'off_policy_evaluation'), which is not installed or did not load (`corral list` shows why)"
    )
