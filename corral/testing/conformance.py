"""The conformance checks: what every corral algorithm, built-in or third-party, must do.

Each check takes a :class:`Subject` (the algorithm's registered name, config
overrides that keep it quick, a scratch folder) and raises ``AssertionError``
with a message saying what the algorithm did and what was expected.
:func:`check_algorithm` runs them all and reports every failure at once.
"""

from __future__ import annotations

import json
import math
import pickle
import shutil
import tempfile
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import annotated_types
import numpy as np

from corral.core.common.sample_batch import DEFAULT_POLICY_ID
from corral.core.persistence import checkpoints
from corral.core.results import RESULT_KEY_TYPES
from corral.errors import CheckpointError, ConfigError
from corral.registry import get_algorithm, get_config
from corral.testing.envs import TOY_ENVS

if TYPE_CHECKING:  # for annotations; the checks import Algorithm where they run it
    from corral.core.training.algorithm import Algorithm


@dataclass
class Subject:
    """The algorithm under test and how to build it.

    Attributes:
        name: The registered name, as ``corral.get_config`` takes it.
        config: Overrides applied to every build, to keep each check to a second
            or so (e.g. a small ``train_batch_size``).
        env: The environment for the checks that need one; default: the toy
            environment of the first action-space type the algorithm supports.
        workdir: Where checkpoints and result folders go.
    """

    name: str
    config: dict[str, Any] = field(default_factory=dict)
    env: Any = None
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="corral-conformance-")))

    @property
    def algorithm_class(self) -> type[Algorithm]:
        """The class the registry resolves ``name`` to."""
        return get_algorithm(self.name)

    def default_env(self) -> Any:
        """``env``, else the toy environment of the first supported action-space type."""
        if self.env is not None:
            return self.env
        for space_type in self.algorithm_class.supported_action_spaces:
            for known, env in TOY_ENVS.items():
                if issubclass(space_type, known):
                    return env
        raise AssertionError(f"{self.name} supports none of {', '.join(t.__name__ for t in TOY_ENVS)}; pass env= to the checks")

    def make_config(self, env: Any = None, seed: int = 0) -> Any:
        """A fresh config with the overrides, the env, a seed and this subject's results folder.

        TensorBoard logging is off unless ``config`` turns it on; the seed wins over
        any ``seed`` in ``config``.

        Args:
            env: the environment; None means :meth:`default_env`.
            seed: the config's ``seed``.

        Returns:
            The algorithm's config, not yet built.
        """
        return (
            get_config(self.name)
            .environment(env if env is not None else self.default_env())
            .update_from_dict(
                {"log_to_tensorboard": False, "storage_path": str(self.workdir / "results"), **self.config, "seed": seed}
            )
        )

    def build(self, env: Any = None, seed: int = 0) -> Any:
        """Build the algorithm from :meth:`make_config`.

        Args:
            env: the environment; None means :meth:`default_env`.
            seed: the config's ``seed``.

        Returns:
            The built algorithm; the caller stops it.
        """
        return self.make_config(env, seed).build()


# ---------------------------------------------------------------------- #
# the checks
# ---------------------------------------------------------------------- #
def check_config_round_trip(subject: Subject) -> None:
    """The default config, and the subject's, survive ``to_dict`` -> JSON -> ``from_dict`` unchanged."""
    for label, config in (("default", get_config(subject.name)), ("configured", subject.make_config())):
        values = config.to_dict()
        try:
            text = json.dumps(values)
        except TypeError as exc:
            raise AssertionError(f"{subject.name}'s {label} config.to_dict() is not JSON-serialisable: {exc}") from exc
        rebuilt = type(config).from_dict(json.loads(text)).to_dict()
        changed = sorted(k for k in values if rebuilt.get(k) != values[k])
        assert not changed, f"{subject.name}'s {label} config changed in a to_dict/from_dict round trip: {changed}"
    first, second = get_config(subject.name), get_config(subject.name)
    assert first is not second, f"get_config({subject.name!r}) must return a fresh config on every call"


def check_invalid_config_is_refused(subject: Subject) -> None:
    """Out-of-range values of every bounded field, unknown keys and wrong types raise ``ConfigError``."""
    config_class = type(get_config(subject.name))
    cases: list[tuple[str, dict[str, Any]]] = [
        ("an unknown key", {"not_a_config_field": 1}),
        ("a string for an int field", {"num_envs_per_env_runner": "four"}),
    ]
    for name, info in config_class.model_fields.items():
        for bad in _out_of_range_values(info.metadata):
            cases.append((f"{name}={bad!r}", {name: bad}))
    accepted = []
    for label, values in cases:
        try:
            subject.make_config().update_from_dict(values).validate()
        except ConfigError:
            continue
        accepted.append(label)
    assert not accepted, f"{subject.name}'s config accepted invalid settings without a ConfigError: {', '.join(accepted)}"


def check_train_result(subject: Subject) -> None:
    """One ``train()`` returns every result key with a value of the right type, and counts its steps."""
    algo = subject.build()
    try:
        result = algo.train()
    finally:
        algo.stop()
    missing = [key for key in RESULT_KEY_TYPES if key not in result]
    assert not missing, f"{subject.name}.train() result lacks the keys {missing}"
    wrong = [
        f"{key}={result[key]!r} ({type(result[key]).__name__}, expected {' or '.join(t.__name__ for t in types)})"
        for key, types in RESULT_KEY_TYPES.items()
        if isinstance(result[key], bool) or not isinstance(result[key], types)
    ]
    assert not wrong, f"{subject.name}.train() result has values of the wrong type: {'; '.join(wrong)}"
    assert result["training_iteration"] == 1, f"the first train() reported training_iteration={result['training_iteration']}"
    assert result["timesteps_total"] > 0, f"{subject.name}'s first train() sampled no env steps"
    learner = result["info"].get("learner")
    assert isinstance(learner, dict), "result['info']['learner'] must hold the learner stats by policy id"
    for policy_id, info in learner.items():
        assert isinstance(info.get("learner_stats"), dict), (
            f"result['info']['learner'][{policy_id!r}] must hold the policy's stats under 'learner_stats', as RLlib's do"
        )


def check_checkpoint_round_trip(subject: Subject) -> None:
    """``save`` / ``from_checkpoint`` restore weights exactly; tampered or corrupt files are refused."""
    from corral.core import Algorithm

    algo = subject.build()
    try:
        algo.train()
        path = Path(algo.save(subject.workdir / f"checkpoint-{subject.name}"))
        # The env is passed explicitly: a checkpoint resolves only registered names by itself.
        restored = Algorithm.from_checkpoint(path, env=algo.config.env)
        try:
            assert type(restored) is type(algo), f"from_checkpoint built {type(restored).__name__}, not {type(algo).__name__}"
            _assert_same_weights(algo.get_weights(), restored.get_weights(), subject.name)
            assert restored.iteration == algo.iteration, "from_checkpoint did not restore the iteration"
            assert restored.counters == algo.counters, (
                f"from_checkpoint restored counters {restored.counters}, not {algo.counters}"
            )
            space = algo.policies[DEFAULT_POLICY_ID].observation_space
            space.seed(0)
            for obs in (space.sample() for _ in range(5)):
                a, b = algo.compute_single_action(obs, explore=False), restored.compute_single_action(obs, explore=False)
                assert np.array_equal(np.asarray(a), np.asarray(b)), f"greedy actions differ after restoring: {a!r} vs {b!r}"
        finally:
            restored.stop()
    finally:
        algo.stop()
    _assert_tampering_refused(path)


def check_action_spaces(subject: Subject) -> None:
    """Valid actions in every supported action-space type; a clear ``ConfigError`` for the others."""
    supported = subject.algorithm_class.supported_action_spaces
    for space_type, env in TOY_ENVS.items():
        if issubclass(space_type, supported):
            algo = subject.build(env=env)
            try:
                algo.train()
                runner = algo.env_runner_group.local_env_runner
                runner.observation_space.seed(0)
                for obs in (runner.observation_space.sample() for _ in range(5)):
                    for explore in (True, False):
                        action = algo.compute_single_action(obs, explore=explore)
                        dtype = runner.action_space.dtype  # None for a Tuple or Dict, whose actions are structures
                        as_env_takes = action if dtype is None else np.asarray(action, dtype=dtype)
                        assert runner.action_space.contains(as_env_takes), (
                            f"{subject.name}.compute_single_action(explore={explore}) returned {action!r}, "
                            f"outside {runner.action_space}"
                        )
            finally:
                algo.stop()
        else:
            try:
                subject.build(env=env).stop()
            except ConfigError as exc:
                assert space_type.__name__ in str(exc), (
                    f"{subject.name} refused a {space_type.__name__} action space, but its error does not name it: {exc}"
                )
            else:
                raise AssertionError(
                    f"{subject.name} does not list {space_type.__name__} in supported_action_spaces, "
                    f"yet built on an env with that action space instead of raising ConfigError"
                )


def check_seed_determinism(subject: Subject) -> None:
    """The same seed gives identical weights and results after one ``train()``; another seed does not."""
    runs = []
    for seed in (0, 0, 1):
        algo = subject.build(seed=seed)
        try:
            result = algo.train()
            runs.append((algo.get_weights(), result))
        finally:
            algo.stop()
    (w0, r0), (w1, r1), (w2, _) = runs
    _assert_same_weights(w0, w1, subject.name, "two runs with seed 0")
    for key in ("timesteps_total", "episodes_total", "episode_reward_mean"):
        same = r0[key] == r1[key] or (_is_nan(r0[key]) and _is_nan(r1[key]))
        assert same, f"two runs with seed 0 differ in {key}: {r0[key]!r} vs {r1[key]!r}"
    assert not _same_weights(w0, w2), f"{subject.name} gives identical weights for seeds 0 and 1: the seed is not used"


CHECKS: tuple[Callable[[Subject], None], ...] = (
    check_config_round_trip,
    check_invalid_config_is_refused,
    check_train_result,
    check_checkpoint_round_trip,
    check_action_spaces,
    check_seed_determinism,
)
"""Every check, in the order :func:`check_algorithm` runs them (parametrize over it for one test per check)."""


class ConformanceError(AssertionError):
    """One or more conformance checks failed; the message lists each with its reason."""


def check_algorithm(
    name: str,
    config: dict[str, Any] | None = None,
    *,
    env: Any = None,
    workdir: str | Path | None = None,
    checks: Iterable[Callable[[Subject], None]] = CHECKS,
) -> None:
    """Run the conformance checks on the algorithm registered as ``name``.

    A plugin author calls this from their own test suite (or uses the
    ``corral_conformance`` pytest fixture) to know their algorithm works
    everywhere corral's own do: configs, training results, checkpoints,
    action spaces and seeding.

    Args:
        name: The algorithm's registered name.
        config: Config overrides applied to every build; keep them small so
            one ``train()`` takes about a second.
        env: The environment for the checks that need one; default: a toy
            environment with an action space the algorithm supports.
        workdir: Scratch folder for checkpoints and results, kept afterwards; default: a new
            temporary folder, removed when the checks end.
        checks: Which checks to run; default :data:`CHECKS`.

    Raises:
        ConformanceError: Listing every failed check and why.
    """
    failures = []
    # a scratch folder of its own is removed afterwards, whatever the checks left in it; a given one is kept
    with tempfile.TemporaryDirectory(prefix="corral-conformance-") if workdir is None else nullcontext(workdir) as folder:
        subject = Subject(name, dict(config or {}), env, Path(folder))
        for check in checks:
            try:
                check(subject)
            except AssertionError as exc:
                failures.append(f"{check.__name__}: {exc}")
            except Exception as exc:  # a crash inside the plugin is a failed check too, reported with the others
                failures.append(f"{check.__name__}: raised {type(exc).__name__}: {exc}")
    if failures:
        raise ConformanceError(f"{name} failed {len(failures)} conformance check(s):\n- " + "\n- ".join(failures))


# ---------------------------------------------------------------------- #
# helpers
# ---------------------------------------------------------------------- #
def _out_of_range_values(metadata: Iterable[Any]) -> list[float]:
    """A value just outside each numeric bound of a pydantic field."""
    values: list[float] = []
    for bound in metadata:
        # the bounds of a config field are numbers
        if isinstance(bound, annotated_types.Gt):
            values.append(cast(float, bound.gt))
        elif isinstance(bound, annotated_types.Ge):
            values.append(cast(float, bound.ge) - 1)
        elif isinstance(bound, annotated_types.Lt):
            values.append(cast(float, bound.lt))
        elif isinstance(bound, annotated_types.Le):
            values.append(cast(float, bound.le) + 1)
    return values


def _same_weights(a: dict[str, dict[str, np.ndarray]], b: dict[str, dict[str, np.ndarray]]) -> bool:
    return a.keys() == b.keys() and all(
        a[pid].keys() == b[pid].keys() and all(np.array_equal(a[pid][k], b[pid][k]) for k in a[pid]) for pid in a
    )


def _assert_same_weights(a: dict, b: dict, name: str, what: str = "the original and the restored algorithm") -> None:
    assert _same_weights(a, b), f"{name}: the weights of {what} differ"


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


class _RunsCode:
    """A pickle payload that would create a file when unpickled, to prove no code runs on restore."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (Path.touch, (self.marker,))


def _assert_tampering_refused(path: Path) -> None:
    """A checkpoint whose policy file or config would run code, or whose metadata is corrupt, raises CheckpointError."""
    from corral.core import Algorithm

    tampered = path.with_name(path.name + "-tampered")
    shutil.copytree(path, tampered)
    marker = tampered.parent / "code-ran-on-restore"
    for policy_file in tampered.glob(f"policies/*/{checkpoints.POLICY_FILE}"):
        policy_file.write_bytes(pickle.dumps(_RunsCode(marker), protocol=2))
    _assert_refused(Algorithm, tampered, "a policy file replaced by a pickle that runs code")
    assert not marker.exists(), "restoring a tampered checkpoint ran code from it"

    shell = path.with_name(path.name + "-shell")
    shutil.copytree(path, shell)
    config = json.loads((shell / checkpoints.CONFIG_FILE).read_text())
    # An env "creator" that runs a command: subprocess.run(env_config) runs the dict's keys as argv.
    config.update(env="subprocess:run", env_config={"touch": 0, str(marker): 0})
    (shell / checkpoints.CONFIG_FILE).write_text(json.dumps(config))
    _assert_refused(Algorithm, shell, "an env creator that runs a shell command")
    assert not marker.exists(), "restoring a checkpoint that names subprocess:run as its env ran the command"

    corrupt = path.with_name(path.name + "-corrupt")
    shutil.copytree(path, corrupt)
    (corrupt / checkpoints.META_FILE).write_text("{not json")
    _assert_refused(Algorithm, corrupt, "corrupt metadata")


def _assert_refused(algorithm_class: type[Algorithm], path: Path, what: str) -> None:
    try:
        algorithm_class.from_checkpoint(path).stop()
    except CheckpointError:
        return
    raise AssertionError(f"a checkpoint with {what} was restored instead of raising CheckpointError")
