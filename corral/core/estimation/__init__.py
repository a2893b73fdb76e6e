"""Off-policy estimation: what the policy being trained would return, estimated from episodes another policy played.

``evaluation(off_policy_estimation_methods={"is": {"type": "ImportanceSampling"}, ...})``
names estimators, which are plugins (entry point group ``corral.estimators``)
like explorations: importance sampling and its weighted form
(:mod:`.importance_sampling`), and the direct method and doubly robust
estimation on a fitted Q model (:mod:`.direct_method`, :mod:`.fitted_q`).
:mod:`.offline_evaluation` reads the episodes and runs them at each evaluation.
"""
