"""A corpus of tampered checkpoints: each is refused with a CheckpointError, and none runs code.

Every attack leaves a marker file if its code runs (a pickle payload, a shell
command through an env "creator", a module shipped inside the checkpoint
folder). Every damaged file must end in a CheckpointError that names it, never
in a raw exception. With ``trust_code=True`` the legitimate checkpoints load,
and code inside the checkpoint folder is still never imported.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import shutil
import subprocess
import sys
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from corral import Algorithm, CheckpointError
from corral.core.persistence import checkpoints
from corral.plugins.dqn import DQNConfig
from corral.plugins.ppo import PPO

from ..conftest import small_ppo_config

POLICY = Path("policies") / "default_policy" / checkpoints.POLICY_FILE
REPLAY = Path("arrays") / "replay_buffer_default_policy.npz"


class Payload:
    """Unpickling this creates the marker file: what a malicious pickle would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (Path.touch, (self.marker,))


# ---------------------------------------------------------------------- #
# checkpoints to tamper with (made once per module, copied per case)
# ---------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A PPO checkpoint on CartPole, a PPO checkpoint on an env given by import path, a DQN one with its replay buffer."""
    root = tmp_path_factory.mktemp("originals")
    made = {}
    builds = {
        "ppo": small_ppo_config().reporting(storage_path=str(root / "results")),
        "ppo_path_env": small_ppo_config(env="tests.toy_envs:DictObsEnv").reporting(storage_path=str(root / "results")),
        "dqn": DQNConfig()
        .environment("CartPole-v1")
        .update_from_dict({"learning_starts": 0, "min_sample_timesteps_per_iteration": 64, "train_batch_size": 32,
                           "save_replay_buffer": True, "seed": 0, "storage_path": str(root / "results")}),
    }  # fmt: skip
    for name, config in builds.items():
        algo = config.build()
        algo.train()
        made[name] = Path(algo.save(root / name))
        algo.stop()
    return made


@pytest.fixture
def copy_of(originals: dict[str, Path], tmp_path: Path) -> Callable[[str], Path]:
    """A fresh copy of an original checkpoint, inside this test's tmp folder."""

    def copy(name: str) -> Path:
        return Path(shutil.copytree(originals[name], tmp_path / "ckpt"))

    return copy


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "code-ran"


def edit_json(path: Path, change: Callable[[Any], Any]) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps(change(data)))


def updated(**values: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda data: {**data, **values}


def edit_policy(ckpt: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    file = ckpt / POLICY
    torch.save(change(torch.load(file, weights_only=True)), file)


def edit_replay(ckpt: Path, change: Callable[[dict[str, np.ndarray]], dict[str, Any]]) -> None:
    file = ckpt / REPLAY
    with np.load(file) as data:
        arrays = {k: data[k] for k in data.files}
    np.savez(file, **change(arrays))


def refuse(ckpt: Path, match: str, marker: Path | None = None, **kwargs: Any) -> CheckpointError:
    """Loading raises a CheckpointError matching ``match``, and no code ran."""
    with pytest.raises(CheckpointError, match=match) as info:
        Algorithm.from_checkpoint(ckpt, **kwargs).stop()
    if marker is not None:
        assert not marker.exists(), "loading the tampered checkpoint ran its code"
    return info.value


# ---------------------------------------------------------------------- #
# names in config.json and corral_checkpoint.json that would import code
# ---------------------------------------------------------------------- #
@pytest.mark.parametrize("creator", ["subprocess:run", "subprocess:getoutput", "os:system"])
def test_an_env_creator_that_runs_a_command_is_refused(copy_of, marker, creator) -> None:
    ckpt = copy_of("ppo")
    # subprocess.run(env_context) would run the dict's keys as a command line.
    edit_json(ckpt / "config.json", updated(env=creator, env_config={"touch": 0, str(marker): 0}))
    error = refuse(ckpt, "not registered", marker)
    assert creator in str(error) and "trust_code=True" in str(error) and "env=" in str(error)


def test_corral_evaluate_refuses_it_too(copy_of, marker, run_cli) -> None:
    ckpt = copy_of("ppo")
    edit_json(ckpt / "config.json", updated(env="subprocess:run", env_config={"touch": 0, str(marker): 0}))
    done = run_cli("evaluate", str(ckpt), "--episodes", "1")
    assert done.returncode == 2, done.stderr
    assert "subprocess:run" in done.stderr and "--trust-code" in done.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    "change",
    [
        {"callbacks_class": ["subprocess:Popen"]},
        {"callbacks": "subprocess:Popen"},  # RLlib's key name
        {"model": {"custom_model": "subprocess:Popen"}},
        {"evaluation_config": {"explore": False, "env": "subprocess:run"}},
        {"evaluation_config": {"callbacks": ["subprocess:Popen"]}},
        {"policy_mapping_fn": "subprocess:getoutput"},
        {"policies_to_train": "subprocess:getoutput"},
        {"observation_fn": "subprocess:getoutput"},
        {"policies": {"p": {"policy_class": "subprocess:Popen"}}},
        {"policies": {"p": {"config": {"model": {"custom_model": "subprocess:Popen"}}}}},
        {"q_model_config": {"custom_model": "subprocess:Popen"}},  # any network's options (SAC's critics)
        {"model": {"custom_action_dist": "subprocess:Popen"}},
    ],
    ids=[
        "callbacks",
        "legacy-callbacks-key",
        "custom-model",
        "evaluation-env",
        "evaluation-callbacks",
        "policy-mapping-fn",
        "policies-to-train",
        "observation-fn",
        "policy-class",
        "policy-custom-model",
        "critic-custom-model",
        "custom-action-dist",
    ],
)
def test_other_import_paths_in_the_config_are_refused(copy_of, marker, change) -> None:
    ckpt = copy_of("ppo")
    config = json.loads((ckpt / "config.json").read_text())
    if "callbacks" in change:
        del config["callbacks_class"]
    (ckpt / "config.json").write_text(json.dumps({**config, **change}))
    refuse(ckpt, "subprocess", marker)


def by_value(marker: Path, **fields: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Set ``fields`` to the name ``__main__:Evil``, written by value as a pickle that creates the marker."""
    payload = base64.b64encode(pickle.dumps(Payload(marker))).decode("ascii")
    return lambda data: {**data, **fields, "__corral_by_value__": {"__main__:Evil": payload}}


@pytest.mark.parametrize(
    "fields",
    [
        {"callbacks_class": ["__main__:Evil"]},
        {"policy_mapping_fn": "__main__:Evil"},
        {"env": "__main__:Evil"},
        {"evaluation_config": {"callbacks_class": ["__main__:Evil"]}},
        {"env_config": {"anything": "__main__:Evil"}},  # no code option, and still never unpickled
    ],
    ids=["callbacks", "policy-mapping-fn", "env", "evaluation-callbacks", "env-config"],
)
def test_an_object_written_by_value_is_never_unpickled_without_trust_code(copy_of, marker, fields) -> None:
    ckpt = copy_of("ppo")
    edit_json(ckpt / "config.json", by_value(marker, **fields))
    refuse(ckpt, "by value", marker)


def test_an_object_written_by_value_that_the_user_passes_again_is_not_unpickled(copy_of, marker, restored_algos) -> None:
    ckpt = copy_of("ppo")
    edit_json(ckpt / "config.json", by_value(marker, env="__main__:Evil", callbacks_class=["__main__:Evil"]))
    restored_algos.append(Algorithm.from_checkpoint(ckpt, env="CartPole-v1", callbacks=[]))
    assert not marker.exists()


def write_evil_module(ckpt: Path, marker: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module inside the checkpoint folder that creates the marker when imported; its folder's parent on sys.path."""
    code = f"import pathlib\npathlib.Path({str(marker)!r}).touch()\nclass X:\n    pass\n"
    (ckpt / "evil.py").write_text(code)
    (ckpt / "__init__.py").write_text(code)  # importing the package would run it too
    monkeypatch.syspath_prepend(str(ckpt.parent))
    return f"{ckpt.name}.evil:X"


@pytest.mark.parametrize("where", ["env", "callbacks_class", "custom_model", "algorithm"])
@pytest.mark.parametrize("trust_code", [False, True])
def test_code_inside_the_checkpoint_is_never_imported(copy_of, marker, monkeypatch, where, trust_code) -> None:
    ckpt = copy_of("ppo")
    path = write_evil_module(ckpt, marker, monkeypatch)
    if where == "algorithm":
        edit_json(ckpt / "corral_checkpoint.json", updated(algorithm="NoPluginHasThisName", algorithm_class=path))
    elif where == "custom_model":
        edit_json(ckpt / "config.json", lambda data: {**data, "model": {**data["model"], "custom_model": path}})
    else:
        edit_json(ckpt / "config.json", updated(**{where: [path] if where == "callbacks_class" else path}))
    match = "inside the checkpoint folder" if trust_code else ("trust_code=True" if where == "algorithm" else "not registered")
    refuse(ckpt, match, marker, trust_code=trust_code)
    assert f"{ckpt.name}.evil" not in sys.modules and ckpt.name not in sys.modules


def test_a_module_next_to_the_checkpoint_folder_is_refused_when_the_folder_is_on_sys_path(copy_of, marker, monkeypatch) -> None:
    ckpt = copy_of("ppo")
    (ckpt / "evil_env.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n")
    monkeypatch.syspath_prepend(str(ckpt))  # e.g. the user runs python from inside the checkpoint folder
    edit_json(ckpt / "config.json", updated(env="evil_env:Env"))
    refuse(ckpt, "inside the checkpoint folder", marker, trust_code=True)


def test_an_unregistered_algorithm_class_is_not_imported(copy_of) -> None:
    ckpt = copy_of("ppo")
    edit_json(ckpt / "corral_checkpoint.json", updated(algorithm="Gone", algorithm_class="subprocess:Popen"))
    error = refuse(ckpt, "not installed")
    assert "trust_code=True" in str(error)


def test_a_relative_import_path_is_refused(copy_of) -> None:
    ckpt = copy_of("ppo")
    edit_json(ckpt / "config.json", updated(env=".relative:Env"))
    refuse(ckpt, "not an absolute import path", trust_code=True)


# ---------------------------------------------------------------------- #
# pickles and links
# ---------------------------------------------------------------------- #
def test_a_pickle_payload_in_the_policy_file_is_refused(copy_of, marker) -> None:
    ckpt = copy_of("ppo")
    torch.save({"weights": Payload(marker)}, ckpt / POLICY)
    refuse(ckpt, "cannot be loaded safely", marker)
    (ckpt / POLICY).write_bytes(pickle.dumps(Payload(marker), protocol=2))
    refuse(ckpt, "cannot be loaded safely", marker)


def test_a_pickle_payload_in_an_array_file_is_refused(copy_of, marker) -> None:
    ckpt = copy_of("dqn")
    edit_replay(ckpt, lambda arrays: {**arrays, "columns/obs": np.array([Payload(marker)], dtype=object)})
    refuse(ckpt, "Python objects", marker)


@pytest.mark.parametrize("link", [str(POLICY), "config.json", "arrays"])
def test_links_out_of_the_folder_are_refused(copy_of, tmp_path, link) -> None:
    ckpt = copy_of("dqn")
    outside = tmp_path / "outside"
    shutil.move(str(ckpt / link), outside)  # the real file, now outside: the link alone would load fine
    (ckpt / link).symlink_to(outside)
    refuse(ckpt, "outside the checkpoint")


def test_a_policy_id_that_climbs_out_of_the_folder_is_refused(copy_of) -> None:
    ckpt = copy_of("ppo")
    edit_json(
        ckpt / "corral_checkpoint.json", lambda meta: {**meta, "policies": {"../../../etc": meta["policies"]["default_policy"]}}
    )
    refuse(ckpt, "cannot be a folder name")


# ---------------------------------------------------------------------- #
# damaged files: a CheckpointError naming the file, never a raw exception
# ---------------------------------------------------------------------- #
def edit_runner(ckpt: Path, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Change the local env runner's saved state in algorithm_state.json."""
    edit_json(
        ckpt / "algorithm_state.json",
        lambda s: {**s, "env_runners": {**s["env_runners"], "local": change(s["env_runners"]["local"])}},
    )


def save_npy_as_npz(file: Path) -> None:
    np.save(file.with_suffix(""), np.zeros(3))  # writes <name>.npy
    file.with_suffix(".npy").replace(file)


DAMAGED: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "meta is a list": ("ppo", lambda c: (c / "corral_checkpoint.json").write_text("[1, 2]"), "corral_checkpoint.json"),
    "meta without algorithm": ("ppo", lambda c: edit_json(c / "corral_checkpoint.json", updated(algorithm=7)), "'algorithm'"),
    "meta without policies": ("ppo", lambda c: edit_json(c / "corral_checkpoint.json", updated(policies=[])), "policies"),
    "config is a list": ("ppo", lambda c: (c / "config.json").write_text("[]"), "config.json"),
    "config value out of range": ("ppo", lambda c: edit_json(c / "config.json", updated(lr=-1)), "config.json"),
    "config nested too deep": ("ppo", lambda c: (c / "config.json").write_text("[" * 100_000 + "]" * 100_000), "config.json"),
    "state is a number": ("ppo", lambda c: (c / "algorithm_state.json").write_text("3"), "algorithm_state.json"),
    "string counters": (
        "ppo",
        lambda c: edit_json(c / "algorithm_state.json", lambda s: {**s, "counters": {k: "12" for k in s["counters"]}}),
        "algorithm_state.json",
    ),
    "negative iteration": ("ppo", lambda c: edit_json(c / "algorithm_state.json", updated(iteration=-4)), "algorithm_state.json"),
    "junk rng state": (
        "ppo",
        lambda c: edit_json(c / "algorithm_state.json", updated(rng_state={"bit_generator": "PCG64", "state": 5})),
        "algorithm_state.json",
    ),
    "empty policy file": ("ppo", lambda c: (c / POLICY).write_bytes(b""), "policy_state.pt"),
    "list-shaped policy file": ("ppo", lambda c: torch.save([1, 2, 3], c / POLICY), "policy_state.pt"),
    "policy state without weights": ("ppo", lambda c: torch.save({}, c / POLICY), "policy_state.pt"),
    "weights of the wrong shape": (
        "ppo",
        lambda c: edit_policy(c, lambda s: {**s, "weights": {k: torch.zeros(3) for k in s["weights"]}}),
        "policy_state.pt",
    ),
    "NaN weights": (
        "ppo",
        lambda c: edit_policy(c, lambda s: {**s, "weights": {k: v * float("nan") for k, v in s["weights"].items()}}),
        "NaN",
    ),
    "optimizer moments of the wrong shape": (
        "ppo",
        lambda c: edit_policy(
            c,
            lambda s: {
                **s,
                "optimizer": {
                    **s["optimizer"],
                    "state": {k: {**v, "exp_avg": torch.zeros(2)} for k, v in s["optimizer"]["state"].items()},
                },
            },
        ),
        "optimizer state",
    ),
    "string timestep": ("ppo", lambda c: edit_policy(c, lambda s: {**s, "global_timestep": "x"}), "global_timestep"),
    "torch generator state of the wrong size": (
        "ppo",
        lambda c: edit_policy(c, lambda s: {**s, "torch_rng": torch.zeros(3, dtype=torch.uint8)}),
        "generator",
    ),
    "an object array in the sampling state": (
        "ppo",
        lambda c: edit_runner(c, lambda r: {**r, "obs": {"__ndarray__": {"dtype": "|O", "shape": [1], "base64": "AA=="}}}),
        "dtype object",
    ),
    "an env attribute the env does not have": (
        "ppo",
        lambda c: edit_runner(
            c, lambda r: {**r, "env": {"kind": "attributes", "values": {**r["env"]["values"], "__class__": {"value": 1}}}}
        ),
        "no attribute",
    ),
    "an env array of another shape": (
        "ppo",
        lambda c: edit_runner(
            c, lambda r: {**r, "env": {"kind": "attributes", "values": {**r["env"]["values"], "state": {"array": r["obs"]}}}}
        ),
        "shape",
    ),
    "a replay record for a native env": (
        "ppo",
        lambda c: edit_runner(c, lambda r: {**r, "env": {"kind": "replay", "sub_envs": []}}),
        "replays",
    ),
    "junk episode history": (
        "ppo",
        lambda c: edit_json(c / "algorithm_state.json", updated(episode_history={"episodes": [["a", 1, {}]]})),
        "episode reward",
    ),
    "truncated replay file": (
        "dqn",
        lambda c: (c / REPLAY).write_bytes((c / REPLAY).read_bytes()[:300]),
        "replay_buffer_default_policy.npz",
    ),
    "npy saved as npz": ("dqn", lambda c: save_npy_as_npz(c / REPLAY), "replay_buffer"),
    "string observations in the replay buffer": (
        "dqn",
        lambda c: edit_replay(c, lambda a: {**a, "columns/obs": a["columns/obs"].astype(str)}),
        "not numbers",
    ),
    "replay observations of another shape": (
        "dqn",
        lambda c: edit_replay(c, lambda a: {**a, "columns/obs": a["columns/obs"][:, :2]}),
        "shape",
    ),
    "replay size beyond its rows": ("dqn", lambda c: edit_replay(c, lambda a: {**a, "size": np.array(10**9)}), "replay buffer"),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_file_is_a_checkpoint_error_naming_it(copy_of, case) -> None:
    original, damage, match = DAMAGED[case]
    ckpt = copy_of(original)
    damage(ckpt)
    refuse(ckpt, match)


def test_an_array_header_claiming_more_than_the_file_holds_is_refused_before_reading(copy_of) -> None:
    ckpt = copy_of("dqn")
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f4", "fortran_order": False, "shape": (10**12,)})
    with zipfile.ZipFile(ckpt / REPLAY, "w") as archive:
        archive.writestr("size.npy", buffer.getvalue() + b"\0" * 16)
    refuse(ckpt, "more than the file holds")


def test_restore_into_an_algorithm_leaves_it_unchanged_when_the_checkpoint_is_damaged(copy_of, make_algo) -> None:
    ckpt = copy_of("ppo")
    edit_json(ckpt / "algorithm_state.json", updated(iteration=-1))
    algo = make_algo()
    algo.train()
    weights, iteration = algo.get_weights(), algo.iteration
    with pytest.raises(CheckpointError, match=r"algorithm_state\.json"):
        algo.restore(ckpt)
    assert algo.iteration == iteration
    for name, value in weights["default_policy"].items():
        np.testing.assert_array_equal(algo.get_weights()["default_policy"][name], value)


# ---------------------------------------------------------------------- #
# the legitimate ways in
# ---------------------------------------------------------------------- #
def test_an_env_given_by_import_path_needs_trust_or_the_env(copy_of, restored_algos) -> None:
    ckpt = copy_of("ppo_path_env")
    error = refuse(ckpt, "tests.toy_envs:DictObsEnv")
    assert "trust_code=True" in str(error)
    trusted = Algorithm.from_checkpoint(ckpt, trust_code=True)
    restored_algos.append(trusted)
    assert type(trusted) is PPO and trusted.iteration == 1
    from tests.toy_envs import DictObsEnv

    given = Algorithm.from_checkpoint(ckpt, env=DictObsEnv)
    restored_algos.append(given)
    assert given.iteration == 1


def test_registered_names_load_without_trust(copy_of, restored_algos) -> None:
    from corral import register_env

    register_env("corral-test-registered-cartpole", lambda ctx: __import__("gymnasium").make("CartPole-v1"))
    ckpt = copy_of("ppo")
    edit_json(ckpt / "config.json", updated(env="corral-test-registered-cartpole"))
    algo = Algorithm.from_checkpoint(ckpt)
    restored_algos.append(algo)
    assert algo.iteration == 1


def test_corral_evaluate_trust_code_loads_a_trusted_checkpoint(copy_of, run_cli) -> None:
    ckpt = copy_of("ppo_path_env")
    refused = run_cli("evaluate", str(ckpt), "--episodes", "1")
    assert refused.returncode == 2 and "--trust-code" in refused.stderr
    done = run_cli("evaluate", str(ckpt), "--episodes", "1", "--trust-code")
    assert done.returncode == 0, done.stderr
    assert "1 episodes" in done.stdout


def test_a_marker_payload_is_live(tmp_path, marker) -> None:
    """The payloads above do run when loaded unsafely: the tests that refuse them are not vacuous."""
    file = tmp_path / "payload.pt"
    torch.save({"weights": Payload(marker)}, file)
    torch.load(file, weights_only=False)
    assert marker.exists()
    marker.unlink()
    subprocess.run({"touch": 0, str(marker): 0}, check=True)  # what env="subprocess:run" would do
    assert marker.exists()


def test_a_checkpoint_naming_corral_classes_at_their_old_module_paths_loads(copy_of, restored_algos) -> None:
    """corral 0.1 wrote ``corral.core.callbacks:...`` before the core moved into sub-packages; such checkpoints load."""
    from corral.core.contracts.callbacks import DefaultCallbacks

    ckpt = copy_of("ppo")
    edit_json(ckpt / "config.json", updated(callbacks_class=["corral.core.callbacks:DefaultCallbacks"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the old path's warning (tested in test_layering)
        algo = Algorithm.from_checkpoint(ckpt)
    restored_algos.append(algo)
    assert algo.iteration == 1
    assert [type(c) for c in algo.callbacks.callbacks] == [DefaultCallbacks]


@pytest.mark.parametrize(
    "change",
    [
        {"env": "subprocess.getoutput"},  # RLlib's dotted class path, no registered name or gymnasium id
        {"custom_evaluation_function": "subprocess:getoutput"},
        {"env_task_fn": "subprocess:getoutput"},
        {"exploration_config": {"type": "subprocess:Popen"}},
        {"exploration_config": {"type": "subprocess.Popen"}},
        {"evaluation_config": {"exploration_config": {"type": "subprocess:Popen"}}},
        {"logger_config": {"type": "subprocess:Popen"}},
        {"learner_class": "subprocess:Popen"},
        {"policies": {"default_policy": {"config": {"config_class": "subprocess:Popen"}}}},
        {"replay_buffer_config": {"type": "subprocess:Popen"}},
        {"replay_buffer_config": {"underlying_replay_buffer_config": {"type": "subprocess.Popen"}}},
    ],
    ids=[
        "dotted-env",
        "custom-eval-function",
        "env-task-fn",
        "exploration",
        "dotted-exploration",
        "evaluation-exploration",
        "logger",
        "learner-class",
        "policy-own-config-class",
        "replay-buffer-class",
        "underlying-replay-buffer-class",
    ],
)
def test_the_newer_import_path_options_are_refused_too(copy_of, marker, change) -> None:
    ckpt = copy_of("ppo")
    edit_json(ckpt / "config.json", updated(**change))
    refuse(ckpt, "subprocess", marker)
