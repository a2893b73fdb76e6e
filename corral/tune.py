"""Every corral algorithm as a Ray Tune trainable, under its registered name.

``import corral.tune`` registers every installed algorithm (and every one
registered in-process with ``corral.register_algorithm``, also later ones) with
Tune, so that::

    import corral.tune
    import ray
from ray import tune

    tuner = corral.tune.Tuner(                 # or ray.tune.Tuner: see check_stop
        "PPO",
        param_space={**corral.get_config("PPO").environment("CartPole-v1").to_dict(),
                     "lr": tune.grid_search([1e-3, 3e-4])},
        run_config=tune.RunConfig(stop={"episode_reward_mean": 475}),
    )
    results = tuner.fit()

Each trial builds the algorithm from its config, one ``train()`` per Tune
step; Tune checkpoints are corral checkpoints (``Algorithm.from_checkpoint``
opens them), and ``Tuner.restore`` resumes at the iteration they hold. A trial
reserves one CPU (plus ``num_gpus``) for the learner and a bundle per remote
env runner, so its actors are placed with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import ray
from ray import tune
from ray.tune.execution.placement_groups import PlacementGroupFactory
from ray.tune.result import AUTO_RESULT_KEYS

from corral import registry
from corral.core.contracts.algorithm import Algorithm
from corral.core.contracts.results import RESULT_KEYS
from corral.core.learning.devices import ray_gpus
from corral.errors import ConfigError, did_you_mean

__all__ = ["CorralTrainable", "Tuner", "check_stop", "register_trainables", "trainable"]

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
)
"""the options a trial's resource request reads"""


class CorralTrainable(tune.Trainable):
    """A Tune trainable that runs one corral algorithm; :func:`trainable` makes one per algorithm class."""

    # A function rather than the class itself: Ray disassembles a trainable class with everything
    # it holds, and an algorithm class holds its config class, which holds it back: endless recursion.
    algorithm_class: ClassVar[staticmethod[[], type[Algorithm]]]

    def setup(self, config: dict[str, Any]) -> None:
        """Build the algorithm from the trial's config; its result files go into the trial's folder.

        A ``storage_path`` the param space sets wins; None (what ``to_dict()`` carries) is the trial's folder.
        """
        values = {**config}
        if values.get("storage_path") is None:
            values["storage_path"] = str(Path(self._trial_folder()) / "corral")
        self.algorithm = self.algorithm_class().get_default_config().update_from_dict(values).build()

    def _trial_folder(self) -> str:
        """The trial's folder under the run's storage path, where Tune keeps its results and checkpoints.

        Tune's own ``logdir`` is a working folder in Ray's session directory, uploaded only with
        ``SyncConfig(sync_artifacts=True)``; a storage path on the local disk is written to directly.
        """
        storage = getattr(self, "_storage", None)  # Ray's StorageContext: the trial's paths (no public accessor)
        if storage is not None and getattr(storage.storage_filesystem, "type_name", "") == "local":
            return str(storage.trial_fs_path)
        return str(self.logdir)

    def step(self) -> dict[str, Any]:
        """One ``train()`` call."""
        return self.algorithm.train()

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        """Write a corral checkpoint into Tune's checkpoint folder."""
        self.algorithm.save(checkpoint_dir)

    def load_checkpoint(self, checkpoint: str | Mapping[str, Any] | None) -> None:
        """Restore weights, optimizers and counters from the corral checkpoint in Tune's folder."""
        self.algorithm.restore(str(checkpoint))

    def cleanup(self) -> None:
        """Stop the algorithm, releasing its env runner actors."""
        self.algorithm.stop()

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> PlacementGroupFactory:
        """One bundle for the learner, one per remote env runner (sampling and evaluation), placed by ``placement_strategy``.

        Only the resource options are read here, in the driver: the trial checks
        the rest of its config when it starts, so a bad sampled value fails that
        trial alone.
        """
        defaults = cls.algorithm_class().get_default_config()
        given = defaults._canonical_keys(dict(config))
        cfg = defaults.update_from_dict({key: given[key] for key in RESOURCE_OPTIONS if key in given})
        runner_gpus = ray_gpus(cfg.num_gpus_per_env_runner, cfg)
        runner = {"CPU": cfg.num_cpus_per_env_runner, "GPU": runner_gpus, **cfg.custom_resources_per_env_runner}
        runners = [dict(runner) for _ in range(cfg.num_env_runners + cfg.evaluation_num_env_runners)]
        learner = {"CPU": cfg.num_cpus_for_main_process, "GPU": ray_gpus(cfg.num_gpus, cfg)}
        return PlacementGroupFactory([learner, *runners], strategy=cfg.placement_strategy)


def trainable(algorithm: str | type[Algorithm]) -> type[CorralTrainable]:
    """The Tune trainable class of an algorithm (a registered name or an ``Algorithm`` subclass)."""
    cls = registry.get_algorithm(algorithm) if isinstance(algorithm, str) else algorithm
    attributes = {"algorithm_class": staticmethod(lambda: cls), "__module__": __name__}
    return type(f"{cls.__name__}Trainable", (CorralTrainable,), attributes)


def register_trainables() -> list[str]:
    """Register every usable corral algorithm with Tune under its name; returns the names registered.

    Called on import. A plugin that fails to load is skipped (``corral list
    --check`` says why), so one broken plugin does not keep the others out.
    """
    names = []
    for info in registry.list_algorithms(check=True):
        if info.status == "ok":
            _register(info.name, registry.get_algorithm(info.name, dist=info.dist))
            names.append(info.name)
    return names


def check_stop(stop: Mapping[str, Any] | None) -> None:
    """Refuse stop criteria that name a key no result has, listing the keys there are.

    ``Tuner`` in this module calls it before any trial starts; ``ray.tune.Tuner``
    itself only notices after the first iteration. Nested keys
    (``"evaluation/episode_reward_mean"``) are checked at their top level.
    """
    if not isinstance(stop, Mapping):
        return  # a Stopper object or a function decides for itself
    known = [*RESULT_KEYS, *AUTO_RESULT_KEYS]
    for key in stop:
        top = str(key).split("/")[0]
        if top not in known:
            raise ConfigError(
                f"stop key {key!r} is not in corral's results.{did_you_mean(top, known)} "
                f"Results have: {', '.join(sorted(set(known)))}"
            )


class Tuner(tune.Tuner):
    """``ray.tune.Tuner`` that checks the stop criteria against corral's result keys before anything starts."""

    def __init__(self, trainable: Any = None, **kwargs: Any) -> None:
        run_config = kwargs.get("run_config")
        check_stop(getattr(run_config, "stop", None))
        super().__init__(trainable, **kwargs)


_registered: dict[str, type[Algorithm]] = {}


def _register(name: str, cls: type[Algorithm]) -> None:
    _registered[name] = cls
    tune.register_trainable(name, trainable(cls))


def _register_again() -> None:
    """After a new ``ray.init`` in this process: Tune's registry lives in the cluster and went with the old one."""
    for name, cls in _registered.items():
        tune.register_trainable(name, trainable(cls))


register_trainables()
registry.on_algorithm_registered(_register)
# Tune re-registers its own trainables the same way (a private list, so only if it exists).
getattr(ray._private.worker, "_post_init_hooks", []).append(_register_again)
