"""Property-based: whatever a user puts in a config, corral answers with a ConfigError or accepts it.

Fuzzed dicts go through ``update_from_dict`` or a builder method,
``validate()`` and ``to_dict()``; any exception other than a ConfigError is a
crash and fails the test. Their keys are options, RLlib's older names, RLlib's
keys that set no option (``framework``, experimental flags, ...), any text and
keys that are no strings at all. What is accepted is built; building may refuse
with any CorralError (an unknown env is an EnvError), nothing else. The fast
run tries 150 dicts per algorithm; the slow run (``-m slow``, part of CI)
tries 2,000 per algorithm. Both are derandomized, so every run (CI's too) tries
the same dicts; to explore new ones, set ``derandomize=False`` locally.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from corral import ConfigError, CorralError, get_config
from corral.core.contracts.config import ABSENT_KEYS, BEHAVIOUR_KEYS, GROUPS, LEGACY_KEYS, TF_ONLY_KEYS
from corral.core.contracts.rllib_compat import EXPERIMENTAL_FLAGS

ALGORITHMS = ["PPO", "DQN", "SAC"]

NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**31, 2**32, 2**63, 2**64, 10**6]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-308, 1e308, math.inf, -math.inf, math.nan, 0.5, 1.0]),
)
ODD_OBJECTS = st.sampled_from([np.array([1, 2]), np.float64(0.5), np.int64(3), np.array(2.0), object(), b"bytes", {1, 2}, 1j])
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=12), ODD_OBJECTS)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)
NEAR_VALUES = {
    # values of the right kind with the wrong contents, where plain fuzzing rarely goes
    "env": st.sampled_from(["CartPole-v1", "Pendulum-v1", "NoSuchEnv-v0", ".relative:Env", "nosuch.module:Env", ":", "a:b:c"]),
    "replay_buffer_config": st.fixed_dictionaries(
        {"type": st.sampled_from(["ReplayBuffer", "PrioritizedReplayBuffer", 3, None, "x"]), "capacity": NUMBERS},
        optional={"alpha": NUMBERS, "epsilon": NUMBERS, "beta": NUMBERS},
    ),
    "exploration_config": st.fixed_dictionaries(
        {"type": st.sampled_from(["EpsilonGreedy", "StochasticSampling", "GaussianNoise", 7, None])},
        optional={"initial_epsilon": NUMBERS, "final_epsilon": NUMBERS, "epsilon_timesteps": NUMBERS, "stddev": NUMBERS},
    ),
    "model": st.fixed_dictionaries(
        {},
        optional={
            # wrong sizes, not big valid ones: a 5000-wide layer is valid and only slow to initialise
            "fcnet_hiddens": st.lists(
                st.one_of(st.integers(-3, 300), st.sampled_from([2**31, 2**64, 1.5, "x", None])), max_size=3
            ),
            "custom_model": st.sampled_from(
                ["torch.nn:Linear", "nosuch:Model", ".x:Y", "corral.core.networks.default_models:QModel"]
            ),
            "conv_filters": VALUES,
        },
    ),
    "lr_schedule": st.lists(st.tuples(NUMBERS, NUMBERS), max_size=3),
    "evaluation_config": st.dictionaries(
        st.sampled_from(["explore", "env", "env_config", "lr", "evaluation_config", "nope"]), VALUES, max_size=3
    ),
    "callbacks_class": st.sampled_from(
        ["corral.core.contracts.callbacks:Callbacks", "nosuch:Cb", ".rel:Cb", "corral.core.contracts.config:option", 5]
    ),
    "rollout_fragment_length": st.one_of(st.just("auto"), NUMBERS, st.text(max_size=5)),
}


RLLIB_KEYS = [
    "framework",
    "optimization",
    "prioritized_replay",
    *TF_ONLY_KEYS,
    *BEHAVIOUR_KEYS,
    *ABSENT_KEYS,
    *EXPERIMENTAL_FLAGS,
]
"""RLlib's keys that set no corral option of their own name"""
ODD_KEYS = st.one_of(st.integers(), st.tuples(st.integers()), st.none(), st.booleans(), st.floats(allow_nan=False))
"""keys a Python dict takes and a config does not"""


# Small, plausible values: most are valid, so what is accepted gets built, too.
PLAUSIBLE = st.one_of(st.integers(-2, 64), st.floats(-1.0, 2.0), st.booleans(), st.none(), st.just("auto"))


@st.composite
def config_dicts(draw: Any, algorithm: str) -> dict[str, Any]:
    fields = list(type(get_config(algorithm)).model_fields)
    if draw(st.booleans()):  # a few fields, plausible values
        keys = draw(st.lists(st.sampled_from(fields), min_size=1, max_size=3))
        return {key: draw(NEAR_VALUES.get(key, PLAUSIBLE)) for key in keys}
    names = st.one_of(st.sampled_from([*fields, *LEGACY_KEYS, *RLLIB_KEYS]), st.text(max_size=10))
    keys = draw(st.lists(names | ODD_KEYS if draw(st.integers(0, 9)) == 0 else names, max_size=6))
    result: dict[Any, Any] = {}
    for key in keys:
        strategy = NEAR_VALUES.get(LEGACY_KEYS.get(key, key)) if isinstance(key, str) else None
        result[key] = draw(strategy if strategy is not None and draw(st.booleans()) else VALUES)
    if draw(st.integers(0, 9)) == 0:  # a dict that contains itself
        loop: dict[str, Any] = {}
        loop["self"] = loop
        result[
            draw(st.sampled_from(["env_config", "evaluation_config", "custom_resources_per_env_runner", "exploration_config"]))
        ] = loop
    return result


def accept_or_config_error(algorithm: str, values: dict[str, Any], builder: str | None) -> Any:
    """Apply ``values``; return the config, or None if a ConfigError refused them. Anything else propagates."""
    config = get_config(algorithm).environment("CartPole-v1")
    try:
        if builder is None:
            config.update_from_dict(values)
        else:
            # Keyword arguments as Python can pass them: identifiers, and not the method's own ``self``.
            kwargs = {k: v for k, v in values.items() if isinstance(k, str) and k.isidentifier() and k != "self"}
            getattr(config, builder)(**kwargs)
        config.validate()
        config.to_dict()
        config.copy()
    except ConfigError:
        return None
    return config


def check_fuzzed(algorithm: str, data: st.DataObject) -> None:
    """A fuzzed dict through a builder or update_from_dict and validate(); if accepted, build() too."""
    values = data.draw(config_dicts(algorithm))
    builder = data.draw(st.sampled_from([None, *[g for g in GROUPS if g != "callbacks"]]))
    config = accept_or_config_error(algorithm, values, builder)
    if config is None:
        return
    # Remote runners, Learner actors and sub-environment actors are tested on their own (they start Ray and wait for
    # a cluster's resources).
    config.update_from_dict(
        {
            "num_env_runners": 0,
            "evaluation_num_env_runners": 0,
            "evaluation_parallel_to_training": False,
            "num_learners": 0,
            "remote_worker_envs": False,
        }
    )
    try:
        algo = config.build()
    except CorralError:
        return
    algo.stop()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@settings(max_examples=150, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzzed_configs_are_accepted_or_refused_with_a_config_error(algorithm, data) -> None:
    check_fuzzed(algorithm, data)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@settings(max_examples=2000, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_two_thousand_fuzzed_configs_per_algorithm(algorithm, data) -> None:
    check_fuzzed(algorithm, data)
