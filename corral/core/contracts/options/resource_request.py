"""What one run of an algorithm reserves on a Ray cluster: a bundle per process, as RLlib's ``default_resource_request``.

Tune reserves it for each trial (:mod:`corral.tune`), and a script that runs an
algorithm inside its own Tune function reserves it with
``tune.with_resources(fn, PPO.default_resource_request(config))``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from corral.core.common import by_value
from corral.core.contracts.rllib_names import LEGACY_KEYS
from corral.core.devices import ray_gpus

if TYPE_CHECKING:  # the config module imports this folder's modules
    from corral.core.contracts.config import AlgorithmConfig

RESOURCE_OPTIONS = (
    "num_env_runners",
    "evaluation_num_env_runners",
    "num_cpus_per_env_runner",
    "num_gpus_per_env_runner",
    "custom_resources_per_env_runner",
    "num_gpus",
    "fake_gpus",
    "num_cpus_for_main_process",
    "placement_strategy",
    "num_learners",
    "num_cpus_per_learner",
    "num_gpus_per_learner",
)
"""the options a resource request reads"""


def resource_bundles(
    defaults: AlgorithmConfig, config: AlgorithmConfig | Mapping[str, Any]
) -> tuple[list[dict[str, float]], str]:
    """One bundle for the main process, one per remote env runner (sampling and evaluation) and one per Learner actor.

    Only the resource options are read: a run checks the rest of its config
    when it starts, so a bad value elsewhere (or a key of the script's own,
    such as a Tune function's iteration count) fails that run alone.

    Args:
        defaults: a fresh config of the algorithm (``Algorithm.get_default_config()``).
        config: the run's config, or its dict (RLlib's or corral's option names).

    Returns:
        The bundles, the main process's first, and the ``placement_strategy`` to place them by.
    """
    values = dict(config) if isinstance(config, Mapping) else config.to_dict()
    wanted = {key: value for key, value in values.items() if LEGACY_KEYS.get(key, key) in RESOURCE_OPTIONS}
    with by_value.trusted():  # the run's own values (or those of the run Tuner.restore resumes)
        cfg = defaults.update_from_dict(defaults._canonical_keys(wanted))
    runner = {
        "CPU": cfg.num_cpus_per_env_runner,
        "GPU": ray_gpus(cfg.num_gpus_per_env_runner, cfg),
        **cfg.custom_resources_per_env_runner,
    }
    runners = [dict(runner) for _ in range(cfg.num_env_runners + cfg.evaluation_num_env_runners)]
    main = {"CPU": cfg.num_cpus_for_main_process, "GPU": ray_gpus(cfg.num_gpus, cfg)}
    learner = {"CPU": cfg.num_cpus_per_learner, "GPU": ray_gpus(cfg.num_gpus_per_learner, cfg)}
    learners = [dict(learner) for _ in range(cfg.num_learners)]
    return [main, *runners, *learners], cfg.placement_strategy
