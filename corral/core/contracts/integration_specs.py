"""The seams where an integration plugs into the core, as pluggy hookspecs. Specs only; no logic.

The core calls these; it never imports an integration. An integration is a
module (or object) with functions marked :data:`integration`, named in the
entry-point group ``corral.integrations`` (corral's own Atari, old-gym,
rendering, offline and estimation support arrive that way, as a third
party's would) or registered in-process with
:func:`corral.registry.register_integration`. A spec marked ``firstresult``
asks for one answer: the first implementation to return something other
than None gives it, and None from all of them means "no integration does
this", which the caller turns into corral's plain behaviour or a clear error.

Every argument is a keyword, and an implementation may declare any subset
of them, so adding an argument here never breaks an integration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # the types the seams pass; at run time nothing is imported
    import gymnasium as gym

    from corral.core.contracts.config import AlgorithmConfig
    from corral.core.environments.displays import SubEnvironmentDisplay
    from corral.core.learning.policy import Policy
    from corral.core.sampling.offline_output import ExperienceOutput
    from corral.core.training.off_policy_evaluation import OffPolicyEvaluation
    from corral.core.training.offline_input import ExperienceInput

PROJECT = "corral.integrations"
integration_spec = pluggy.HookspecMarker(PROJECT)
integration = pluggy.HookimplMarker(PROJECT)
"""what an integration marks its implementations of the seams with"""


# ---------------------------------------------------------------- environments


@integration_spec(firstresult=True)
def known_env_id(env_id: str) -> bool | None:
    """Whether an integration knows the gymnasium id ``env_id``, registering it with gymnasium on demand (ale-py's games).

    Args:
        env_id: an env name gymnasium's registry does not hold yet.

    Returns:
        True where an integration knows it (and it is now in gymnasium's registry), else None.
    """


@integration_spec(firstresult=True)
def sub_environment_maker(env_id: str, config: AlgorithmConfig) -> Callable[[dict[str, Any]], gym.Env] | None:
    """How each sub-environment of the gymnasium id ``env_id`` is made, where an integration makes it itself.

    Asked once per vector env (Atari's preprocessing answers for ale-py's games).
    None from every integration: ``gym.make``, or gymnasium's native vector env
    where the id has one.

    Args:
        env_id: the gymnasium id the config's ``env`` names.
        config: the algorithm's config.

    Returns:
        A function making one sub-environment from ``gym.make``'s keyword arguments
        (``env_config``, and the render mode a display needs), or None.
    """


@integration_spec(firstresult=True)
def default_clip_rewards(config: AlgorithmConfig) -> bool | None:
    """Whether rewards are clipped to their sign where the config's ``clip_rewards`` is None (RLlib clips Atari's).

    Args:
        config: the algorithm's config.

    Returns:
        True or False where an integration decides for this env, else None (no clipping).
    """


@integration_spec(firstresult=True)
def adapted_sub_environment(env: Any, config: AlgorithmConfig) -> gym.Env | None:
    """A sub-environment a creator made, adapted to gymnasium's API where it follows another one (old gym's).

    Args:
        env: what the env's creator returned.
        config: the algorithm's config.

    Returns:
        The adapted env, or None: ``env`` is used as it was made.
    """


@integration_spec(firstresult=True)
def sub_environment_display(config: AlgorithmConfig, worker_index: int, stream: str) -> SubEnvironmentDisplay | None:
    """How an env runner shows or records its sub-environment 0 (``render_env``, ``record_env``).

    Args:
        config: the algorithm's config.
        worker_index: the env runner's index (0 local).
        stream: ``"sampling"`` or ``"evaluation"``: which runners this one samples for.

    Returns:
        The display, or None where this runner shows nothing.
    """


# ---------------------------------------------------------------- offline data


@integration_spec(firstresult=True)
def experience_input(config: AlgorithmConfig, policies: Mapping[str, Policy], input_reader: Any) -> ExperienceInput | None:
    """Where training takes its rows from when the config's ``input_`` names files (or mixes them with the sampler),
    or when its input creator made an ``InputReader``.

    Asked once, when the algorithm is built and its policies exist; never for
    ``input_="sampler"``. None from every integration is a ConfigError: the
    user asked for input that nothing reads.

    Args:
        config: the algorithm's config (``input_``, ``input_config``, ``shuffle_buffer_size``, ...).
        policies: the learner's policies by id, to check the files against and postprocess the rows.
        input_reader: what the config's input creator made for the local env runner where it is an
            ``InputReader`` (``next()`` gives a batch); None otherwise.

    Returns:
        The input the training loop draws sample calls from, or None.
    """


@integration_spec(firstresult=True)
def experience_output(config: AlgorithmConfig, worker_index: int) -> ExperienceOutput | None:
    """Where an env runner writes its sampled experiences when the config's ``output`` is set.

    Asked once per env runner; never where ``output`` is None. None from every
    integration is a ConfigError: the user asked for output that nothing writes.

    Args:
        config: the runner's config; its ``output="logdir"`` already names the experiment folder.
        worker_index: the env runner's index (0 local).

    Returns:
        The output the runner hands each sample call's fragments to, or None.
    """


# ---------------------------------------------------------------- off-policy estimation


@integration_spec(firstresult=True)
def off_policy_evaluation(config: AlgorithmConfig, policies: Mapping[str, Policy]) -> OffPolicyEvaluation | None:
    """The off-policy estimates ``evaluate()`` reports, when the config names ``off_policy_estimation_methods``.

    Asked once, when the algorithm is built and its policies exist; never when
    the config names no method. None from every integration is a ConfigError:
    the user asked for estimates that nothing computes.

    Args:
        config: the algorithm's config (``off_policy_estimation_methods``, the recorded episodes' ``input``).
        policies: the learner's policies by id; the estimates are of the default policy.

    Returns:
        What runs the estimators at each evaluation, or None.
    """
