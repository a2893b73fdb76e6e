"""Off-policy estimation: what the policy being trained would return, estimated from episodes another policy played.

``evaluation(off_policy_estimation_methods={"is": {"type": "ImportanceSampling"}, ...})``
names estimators, which are plugins (entry point group ``corral.estimators``)
like explorations: importance sampling and its weighted form
(:mod:`.importance_sampling`), and the direct method and doubly robust
estimation on a fitted Q model (:mod:`.direct_method`, :mod:`.fitted_q`).
:mod:`.offline_evaluation` reads the episodes (through the offline
integration's readers) and runs the estimators at each evaluation.

The core asks for it through the ``off_policy_evaluation`` seam
(:mod:`corral.core.contracts.integration_specs`). Importing this package
imports none of its modules; they load when a run names estimation methods.
The seam's implementation is named apart from the seam (``specname``), as the
offline integration's are: a function named like a submodule would be replaced
by it once the submodule loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from corral.core.contracts.integration_specs import integration

if TYPE_CHECKING:  # what the core calls on it: mypy checks that the evaluation has it
    from corral.core.training.off_policy_evaluation import OffPolicyEvaluation


@integration(specname="off_policy_evaluation")
def build_evaluation(config: Any, policies: Mapping[str, Any]) -> OffPolicyEvaluation | None:
    """The estimators ``off_policy_estimation_methods`` names, on the recorded episodes the config names.

    Args:
        config: the algorithm's config.
        policies: the learner's policies by id.

    Returns:
        The evaluation (see :func:`~corral.integrations.estimation.offline_evaluation.build_off_policy_evaluation`),
        or None when the config names no method.

    Raises:
        ConfigError: a multi-agent run, no recorded episodes named, a file that does not fit the
            policy (or lacks ``action_logp``), an estimator that does not fit.
    """
    from corral.integrations.estimation.offline_evaluation import build_off_policy_evaluation

    return build_off_policy_evaluation(config, policies)
