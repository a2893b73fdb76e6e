"""Checkpoints: ``save()``, ``restore()`` and ``from_checkpoint()``, and the policies a checkpoint reopens.

A checkpoint is a folder of data files (never pickled code); what it names
(env, callbacks, custom models) is given again by the user or imported only
with ``trust_code``. Saving is atomic: a crash leaves the last good checkpoint.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Collection, Container
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from corral._version import __version__
from corral.core.common.import_paths import object_path
from corral.core.common.space_codec import decode_space, encode_space
from corral.core.common.spaces import space_to_json
from corral.core.contracts.policy_spec import PolicySpec
from corral.core.learning.policy import Policy
from corral.core.persistence import checkpoints
from corral.core.persistence.checkpoint_classes import algorithm_class_of
from corral.core.persistence.policy_export import export_policy_model
from corral.core.persistence.safe_loading import check_config_references
from corral.core.results import corral_result_key, finite_number, result_value
from corral.core.sampling.multi_agent_env_runner import MultiAgentEnvRunner
from corral.core.training.checkpoint_loading import (
    blame,
    checkpoint_config,
    checkpoint_score,
    policy_of_checkpoint,
    policy_subset,
    stored_space_description,
)
from corral.core.training.policy_set import PolicySet
from corral.core.training.state import IN_MEMORY_STATE, AlgorithmState
from corral.errors import CheckpointError

if TYPE_CHECKING:  # the class these methods are part of
    from corral.core.training.algorithm import Algorithm


class SavedCheckpoint(str):
    """What ``save()`` returns: the checkpoint's path, which is also read as Ray 2.7+'s ``save()`` result.

    RLlib's ``save()`` returned the path up to Ray 2.6 and a training result
    since (``algo.save().checkpoint.path``); this string is the path and has
    ``.checkpoint.path`` and ``.metrics`` too, so scripts of either era work.

    Args:
        path: the checkpoint folder.
        metrics: the latest ``train()`` result (RLlib's ``.metrics``), or an empty dict.
    """

    metrics: dict[str, Any]

    def __new__(cls, path: str, metrics: dict[str, Any] | None = None) -> SavedCheckpoint:  # noqa: D102  (the class says)
        saved = super().__new__(cls, path)
        saved.metrics = metrics or {}
        return saved

    @property
    def checkpoint(self) -> SavedCheckpoint:
        """Itself, as Ray's ``Checkpoint`` of the result (its ``.path`` is the folder)."""
        return self

    @property
    def path(self) -> str:
        """The checkpoint folder, as a plain string."""
        return str(self)


class Checkpointing(AlgorithmState, PolicySet):
    """Part of :class:`~corral.core.training.algorithm.Algorithm` (see the module docstring); it saves and restores
    what the state and the policy set hold, so it builds on those two parts."""

    def save(self, checkpoint_dir: str | os.PathLike[str] | None = None) -> SavedCheckpoint:
        """Write a checkpoint; default ``<experiment folder>/checkpoint_<iteration>``. Returns its path (a
        :class:`SavedCheckpoint`, also read as Ray 2.7+'s result: ``algo.save().checkpoint.path``).

        Into the experiment folder, with ``keep_checkpoints_num``, the checkpoints beyond
        that many are then removed: the oldest, or the worst by ``checkpoint_score_attribute``
        (never the latest).
        """
        path = (
            Path(checkpoint_dir) if checkpoint_dir is not None else checkpoints.experiment_checkpoint(self.logdir, self.iteration)
        )
        saved = [
            pid for pid in self.policies if not self.config.checkpoint_trainable_policies_only or self.is_policy_to_train(pid)
        ]
        written = self._write_checkpoint(path, saved)
        if checkpoint_dir is None and self.config.keep_checkpoints_num:
            self._prune_checkpoints(self.config.keep_checkpoints_num)
        return SavedCheckpoint(written, self._last_result)

    def _write_checkpoint(self, path: Path, saved: list[str]) -> str:
        """Write a checkpoint of the algorithm with the policies ``saved`` (and their native model files if asked)."""
        dist, version = providing_distribution(type(self))
        meta: dict[str, Any] = {
            "algorithm": self.name,
            "algorithm_class": object_path(type(self)),
            "distribution": dist,
            "distribution_version": version,
            "corral_version": __version__,
            "policies": {
                pid: {
                    "observation_space": encode_space(self.policies[pid].observation_space),
                    "action_space": encode_space(self.policies[pid].action_space),
                }
                for pid in saved
            },
        }
        attribute = self.config.checkpoint_score_attribute
        if attribute is not None:  # what keep_checkpoints_num ranks the checkpoints by
            score = finite_number(result_value(self._last_result or {}, corral_result_key(attribute)))
            meta["score"] = {"attribute": attribute, "value": score}
        state = self.get_state()
        policy_states = {pid: state["policy_states"][pid] for pid in saved}
        native: dict[str, Callable[[Path], Any]] = {}
        if self.config.export_native_model_files:  # model.pt and model.json beside each policy's state
            native = {
                f"policies/{pid}": functools.partial(export_policy_model, self.policies[pid], policy_id=pid) for pid in saved
            }
        loop_state = {key: value for key, value in state.items() if key not in IN_MEMORY_STATE}  # algorithm_state.json
        written = checkpoints.write_checkpoint(
            path, meta, self.config.to_dict(), loop_state, policy_states, state["checkpoint_arrays"], native
        )
        return str(written)

    def _prune_checkpoints(self, keep: int) -> None:
        """Remove all but ``keep`` checkpoints of the experiment folder: the newest, or the best scored and the latest."""
        found = checkpoints.experiment_checkpoints(self.logdir)  # oldest first
        if len(found) <= keep:
            return
        kept = set(found[-keep:])
        if self.config.checkpoint_score_attribute is not None:
            sign = 1.0 if self.config.checkpoint_score_order == "max" else -1.0
            ranked = sorted(found, key=lambda path: sign * checkpoint_score(path), reverse=True)  # stable: older first on ties
            kept = {ranked[0], found[-1]}  # the best and the latest, even with keep_checkpoints_num=1
            for path in ranked:
                if len(kept) >= keep:
                    break
                kept.add(path)
        for old in found:
            if old not in kept:
                checkpoints.remove_checkpoint(old)

    def save_to_path(self, path: str | os.PathLike[str] | None = None, **options: Any) -> str:
        """RLlib's name for :meth:`save` since Ray 2.30 (its ``Checkpointable`` API); returns the path.

        Args:
            path: the checkpoint folder; None: the experiment folder's next one.
            **options: RLlib's ``state``, ``filesystem`` and ``use_msgpack``, which corral's data-only
                checkpoints do not take.

        Raises:
            TypeError: one of those options is given.
        """
        _refuse_checkpointable_options("save_to_path", options)
        return str(self.save(path))

    def restore_from_path(self, path: checkpoints.CheckpointPath, *, component: str | None = None, **options: Any) -> None:
        """RLlib's name for :meth:`restore` since Ray 2.30 (its ``Checkpointable`` API), or the models alone.

        Args:
            path: the checkpoint, or RLlib's path of its models (``<checkpoint>/learner_group/learner/rl_module``).
            component: None for the whole algorithm; RLlib's ``"rl_module"`` (``COMPONENT_RL_MODULE``) or
                ``"learner_group/learner/rl_module[/<policy id>]"`` for the policies' model weights only
                (optimizers, counters and the rest stay as they are; another algorithm's models fit too).
            **options: RLlib's ``filesystem`` and others, which corral does not take (its checkpoints are local).

        Raises:
            TypeError: one of those options is given.
            CheckpointError: another component, a damaged checkpoint, or models that do not fit this algorithm's.
        """
        _refuse_checkpointable_options("restore_from_path", options)
        if component is None:
            self.restore(path)
            return
        folder, policy_id = checkpoints.split_module_path(path, component)
        ckpt = checkpoints.read_checkpoint(folder)
        ids = [policy_id] if policy_id is not None else list(ckpt.meta["policies"])
        unknown = [pid for pid in ids if pid not in ckpt.meta["policies"] or pid not in self.policies]
        if unknown:
            raise CheckpointError(
                f"policy {unknown[0]!r} is not in both checkpoint {str(folder)!r} ({sorted(ckpt.meta['policies'])}) "
                f"and this algorithm ({sorted(self.policies)})"
            )
        backup = self.get_weights(ids)
        try:
            for pid in ids:
                with blame(folder / "policies" / pid / checkpoints.POLICY_FILE):
                    self.policies[pid].set_weights_from_state(ckpt.policy_states[pid])
        except BaseException:
            self.set_weights(backup)
            raise

    def restore(self, checkpoint_path: checkpoints.CheckpointPath) -> None:
        """Load a checkpoint of this algorithm into this instance (weights, optimizers, counters, RNG states).

        Policies the checkpoint holds and this algorithm lacks (added with
        :meth:`add_policy` before it was saved) are added, built from their
        specs in the checkpoint; policies this algorithm has and the checkpoint
        lacks keep their state. Nothing else in the checkpoint's config is used,
        and a policy class it names is imported only if it is corral's or registered.

        Raises:
            CheckpointError: the checkpoint is damaged, of another algorithm, or does not fit
                this one's policies; this algorithm is left as it was.
        """
        self._apply_checkpoint(_algorithm_checkpoint(checkpoint_path))

    def _apply_checkpoint(self, ckpt: checkpoints.Checkpoint, policy_ids: list[str] | None = None) -> None:
        meta, folder = ckpt.meta, ckpt.folder
        if meta["algorithm"] != self.name and meta.get("algorithm_class") != object_path(type(self)):
            raise CheckpointError(
                f"checkpoint {str(folder)!r} is of algorithm {meta['algorithm']!r}, not {self.name!r}; "
                "load it with corral.Algorithm.from_checkpoint(path)"
            )
        stored = {pid: s for pid, s in meta["policies"].items() if policy_ids is None or pid in policy_ids}
        missing = [pid for pid in stored if pid not in self.policies]
        if missing and not isinstance(self.env_runner_group.local_env_runner, MultiAgentEnvRunner):
            raise CheckpointError(f"checkpoint has policies {missing}, which this algorithm does not: {sorted(self.policies)}")
        added: list[str] = []
        try:
            for pid in missing:
                self._add_checkpoint_policy(ckpt, pid)
                added.append(pid)
            self._load_checkpoint_policies(ckpt, stored)
        except BaseException:
            for pid in added:
                self.remove_policy(pid)
            raise
        self.callbacks.checkpoint_loaded(self._as_algorithm)

    def _add_checkpoint_policy(self, ckpt: checkpoints.Checkpoint, policy_id: str) -> None:
        """Add a policy the checkpoint holds and this algorithm lacks, from its spec in the checkpoint's config."""
        saved_specs = ckpt.config.get("policies") or {}
        spec_value = saved_specs.get(policy_id) if isinstance(saved_specs, dict) else None
        if isinstance(spec_value, dict):
            check_config_references({"policies": {policy_id: spec_value}}, ckpt.folder, False, set())
        stored = ckpt.meta["policies"][policy_id]
        try:
            spec = PolicySpec.of(spec_value)
            observation_space = decode_space(stored.get("observation_space"), "observation_space")
            action_space = decode_space(stored.get("action_space"), "action_space")
        except (ValueError, ImportError) as exc:
            where = ckpt.folder / checkpoints.CONFIG_FILE
            raise CheckpointError(f"{where}: policy {policy_id!r} cannot be rebuilt: {exc}") from None
        self.add_policy(
            policy_id, spec.policy_class, observation_space=observation_space, action_space=action_space, config=spec.config
        )

    def _load_checkpoint_policies(self, ckpt: checkpoints.Checkpoint, stored: dict[str, Any]) -> None:
        """Check the stored policies' spaces against this algorithm's, then load them and the algorithm's state: all or none."""
        folder = ckpt.folder
        for pid, spaces in stored.items():
            policy = self.policies[pid]
            for kind, space in (("observation_space", policy.observation_space), ("action_space", policy.action_space)):
                trained = stored_space_description(spaces.get(kind))
                if trained != space_to_json(space):
                    raise CheckpointError(
                        f"checkpoint policy {pid!r} was trained with {kind} {trained}, "
                        f"but this environment has {space_to_json(space)}; evaluate it on the env it was trained on"
                    )
        backup = self.get_state()
        try:
            for pid in stored:
                with blame(folder / "policies" / pid / checkpoints.POLICY_FILE):
                    self.policies[pid].set_state(ckpt.policy_states[pid])
            with blame(folder / checkpoints.STATE_FILE):
                self.set_state(ckpt.algorithm_state)
            with blame(folder / checkpoints.ARRAYS_DIR):
                self.set_checkpoint_arrays(ckpt.arrays)
        except BaseException:
            self.set_state(backup)
            raise

    @classmethod
    def load_policy(cls, ckpt: checkpoints.Checkpoint, policy_id: str, trust_code: bool) -> Policy:
        """One policy of a checkpoint this algorithm wrote, built alone (what :meth:`Policy.from_checkpoint` calls).

        Args:
            ckpt: the checkpoint, read.
            policy_id: the policy to load.
            trust_code: as for :meth:`from_checkpoint`.

        Returns:
            The policy, with the checkpoint's weights, filter statistics and timestep.

        Raises:
            CheckpointError: the checkpoint has no such policy, stores its spaces only as
                descriptions (corral 0.1), or names code that is not registered.
        """
        return policy_of_checkpoint(cast("type[Algorithm]", cls), ckpt, policy_id, trust_code)

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint: checkpoints.CheckpointPath | None = None,
        env: Any = None,
        config_overrides: dict[str, Any] | None = None,
        *,
        path: checkpoints.CheckpointPath | None = None,
        callbacks: Any = None,
        trust_code: bool = False,
        policy_ids: Collection[str] | None = None,
        policy_mapping_fn: Callable[..., str] | str | None = None,
        policies_to_train: Container[str] | Callable[..., bool] | None = None,
    ) -> Algorithm:
        """Rebuild whatever algorithm a checkpoint holds, with its config, weights and counters.

        Called on the class the checkpoint records (``MyAlgo.from_checkpoint(path)``),
        that class is used as it is; called on another, the checkpoint's algorithm
        is found as below.

        Names in the checkpoint resolve only against what is registered or installed
        (algorithm plugins, ``register_env`` names, gymnasium ids, corral's own
        classes): a checkpoint never makes corral import other code unless you say
        you trust it. See :mod:`corral.core.persistence.safe_loading`.

        Args:
            checkpoint: the checkpoint folder, or an object with its ``path`` (Ray Tune's
                ``result.checkpoint``); RLlib's name, as is ``path`` (Ray 2.30's).
            env: the environment to use instead of the one the checkpoint names (same spaces).
            config_overrides: config fields to change (e.g. ``{"num_envs_per_env_runner": 1}``).
            path: the checkpoint, given by Ray 2.30's name instead of ``checkpoint``.
            callbacks: the callbacks class (or list) to use instead of the checkpoint's.
            trust_code: import what the checkpoint names even if it is not registered
                (an env class path, callbacks, a custom model, an algorithm class), and unpickle
                what the saving script defined itself (stored by value); only for checkpoints you
                trust. A module inside the checkpoint folder is never imported.
            policy_ids: restore only these of the checkpoint's policies (the others are not built).
            policy_mapping_fn: the mapping to use instead of the checkpoint's (one that maps only
                to ``policy_ids``).
            policies_to_train: the policies that learn, instead of the checkpoint's setting
                (whose ids outside ``policy_ids`` are dropped).

        Returns:
            The algorithm, restored.

        Raises:
            CheckpointError: the checkpoint is damaged, names code that is not registered
                (without ``trust_code``), or its algorithm is not installed.
            TypeError: the checkpoint is given by both names, or by neither.
        """
        if (checkpoint is None) == (path is None):
            raise TypeError("from_checkpoint() takes the checkpoint once: as `checkpoint` (RLlib's name) or as `path`")
        ckpt = _algorithm_checkpoint(checkpoint if checkpoint is not None else cast("checkpoints.CheckpointPath", path))
        # called on the very class the checkpoint records (MyAlgo.from_checkpoint(path)): the caller vouches for it
        recorded = ckpt.meta.get("algorithm_class")
        named = recorded == f"{cls.__module__}:{cls.__qualname__}"
        algo_class = cast("type[Algorithm]", cls) if named else algorithm_class_of(ckpt, trust_code)
        overrides = dict(config_overrides or {})
        if env is not None:
            overrides["env"] = env
        if callbacks is not None:
            overrides["callbacks_class"] = callbacks
        if policy_mapping_fn is not None:
            overrides["policy_mapping_fn"] = policy_mapping_fn
        if policies_to_train is not None:
            overrides["policies_to_train"] = policies_to_train
        wanted = None if policy_ids is None else list(policy_ids)
        if wanted is not None:
            overrides.update(policy_subset(ckpt, wanted, trust_code, keep_to_train=policies_to_train is None))
        algo = algo_class(config=checkpoint_config(ckpt, algo_class, overrides, trust_code))
        try:
            algo._apply_checkpoint(ckpt, wanted)
        except BaseException:
            algo.stop()
            raise
        return algo


def _algorithm_checkpoint(path: checkpoints.CheckpointPath) -> checkpoints.Checkpoint:
    """An algorithm's checkpoint, read; a policy's own (``policy.export_checkpoint``) is refused, saying what reads it."""
    ckpt = checkpoints.read_checkpoint(path)
    if ckpt.meta.get("policy_checkpoint"):
        raise CheckpointError(
            f"{str(ckpt.folder)!r} is one policy's checkpoint (policy.export_checkpoint), not an algorithm's; "
            "read it with Policy.from_checkpoint(path)"
        )
    return ckpt


def providing_distribution(cls: type) -> tuple[str | None, str | None]:
    """The distribution (name, version) that installs ``cls``'s module, as the checkpoint records it; Nones if none does."""
    import importlib_metadata

    top = cls.__module__.split(".")[0]
    dists = importlib_metadata.packages_distributions().get(top, [])
    if not dists:
        return None, None
    try:
        return dists[0], importlib_metadata.version(dists[0])
    except importlib_metadata.PackageNotFoundError:
        return dists[0], None


def _refuse_checkpointable_options(method: str, options: dict[str, Any]) -> None:
    """Refuse RLlib's ``Checkpointable`` options that corral's checkpoints do not have, naming them."""
    if options:
        raise TypeError(
            f"{method}() takes a path only; corral's checkpoints are one local folder of data files, so "
            f"{', '.join(sorted(options))} {'is' if len(options) == 1 else 'are'} not taken"
        )
