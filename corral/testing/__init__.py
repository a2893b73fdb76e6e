"""corral's conformance kit: check that an algorithm plugin behaves like corral's own.

From a plugin's test suite::

    from corral.testing import check_algorithm

    def test_my_algorithm_conforms(tmp_path):
        check_algorithm("REINFORCE", {"train_batch_size": 256}, workdir=tmp_path)

or with the pytest fixture this package registers (entry point ``pytest11``)::

    def test_my_algorithm_conforms(corral_conformance):
        corral_conformance("REINFORCE", {"train_batch_size": 256})
"""

from __future__ import annotations

from corral._lazy import lazy_exports

# Resolved on first use: pytest imports this package (through the pytest11 entry point)
# in every test session where corral is installed, so importing it must cost nothing.
_EXPORTS = {
    **dict.fromkeys(
        [
            "CHECKS",
            "ConformanceError",
            "Subject",
            "check_action_spaces",
            "check_algorithm",
            "check_checkpoint_round_trip",
            "check_config_round_trip",
            "check_invalid_config_is_refused",
            "check_seed_determinism",
            "check_train_result",
        ],
        "corral.testing.conformance",
    ),
    **dict.fromkeys(
        [
            "TOY_ENVS",
            "BoxActionEnv",
            "DictActionEnv",
            "DiscreteActionEnv",
            "MultiDiscreteActionEnv",
            "RepeatAfterMe",
            "StatelessCartPole",
            "TupleActionEnv",
        ],
        "corral.testing.envs",
    ),
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports("corral.testing", globals(), _EXPORTS)
