"""Checkpoint folders: written atomically, read without running any code from them.

Layout::

    corral_checkpoint.json          format version, algorithm, its distribution, corral version, spaces
    config.json                     the config, to_dict()
    algorithm_state.json            counters, iteration, RNG states, metrics history, in-flight episodes
    policies/<policy_id>/policy_state.pt   tensors only (weights, optimizer, exploration, filter, RNG)
    arrays/<name>.npz               optional numpy arrays (replay buffers), read with allow_pickle=False

Writing: the new checkpoint is written into a hidden temporary sibling folder
and then takes the final name. When a checkpoint of that name exists already,
the two folders swap places in one atomic ``renameat2(RENAME_EXCHANGE)``
(``renamex_np(RENAME_SWAP)`` on macOS), so at every instant the final name
holds either the old or the new complete checkpoint; only then is the old one
deleted. Pruning first renames a checkpoint to a hidden name, then deletes
it, so a ``checkpoint_*`` folder is always complete. A save killed half-way
leaves hidden leftovers, which the next save into that folder removes.
The folder mechanics are :mod:`~corral.core.persistence.atomic_folders`'.

Reading: every file is checked to lie inside the folder (no symlink out of
it), JSON files must have the shape corral writes, policy files are read with
``torch.load(weights_only=True)`` and arrays with ``allow_pickle=False``; a
damaged or tampered file raises :class:`CheckpointError` naming it. What the
config names (env creators, callbacks, models) is checked separately, by
:mod:`corral.core.persistence.safe_loading`, before anything is imported.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, Protocol, Union, cast

import numpy as np

from corral.core.persistence import atomic_folders
from corral.errors import CheckpointError

FORMAT_VERSION = 1
META_FILE = "corral_checkpoint.json"
CONFIG_FILE = "config.json"
STATE_FILE = "algorithm_state.json"
POLICY_FILE = "policy_state.pt"
ARRAYS_DIR = "arrays"

_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
"""A policy id or array group name usable as one path component (no separators, no '..')."""


class Checkpoint(NamedTuple):
    """Everything a checkpoint folder holds, read and checked."""

    folder: Path
    meta: dict[str, Any]
    config: dict[str, Any]
    algorithm_state: dict[str, Any]
    policy_states: dict[str, dict[str, Any]]
    arrays: dict[str, dict[str, np.ndarray]]


# ---------------------------------------------------------------------- #
# writing
# ---------------------------------------------------------------------- #
def write_checkpoint(
    path: str | os.PathLike[str],
    meta: dict[str, Any],
    config: dict[str, Any],
    algorithm_state: dict[str, Any],
    policy_states: dict[str, dict[str, Any]],
    arrays: dict[str, dict[str, np.ndarray]] | None = None,
    extra_files: dict[str, Callable[[Path], Any]] | None = None,
) -> Path:
    """Write a checkpoint folder at ``path`` atomically; returns the path.

    Args:
        path: the checkpoint folder; an existing checkpoint there is replaced.
        meta: what goes into ``corral_checkpoint.json`` (the format version is added).
        config: the config's ``to_dict()``.
        algorithm_state: the algorithm's JSON state.
        policy_states: tensors-only state of each policy, by policy id.
        arrays: named groups of numpy arrays, each written as ``arrays/<name>.npz``.
        extra_files: by folder inside the checkpoint, what writes files into it
            (``export_native_model_files``); nothing reads them back when restoring.

    Returns:
        The absolute path of the checkpoint.

    Raises:
        CheckpointError: a policy id or array group name cannot be a folder name.
    """
    import torch  # here, not at the top: reading a checkpoint's metadata needs no torch

    for name in [*policy_states, *(arrays or {})]:
        _check_name(name, "policy id or array group")
    target = Path(path).expanduser().resolve()
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(parent)
    tmp = atomic_folders.hidden_sibling(target, "tmp")
    tmp.mkdir()
    tmp.chmod(0o777 & ~atomic_folders.umask())
    try:
        _write_json(tmp / META_FILE, {"format_version": FORMAT_VERSION, **meta})
        _write_json(tmp / CONFIG_FILE, config)
        _write_json(tmp / STATE_FILE, algorithm_state)
        for policy_id, state in policy_states.items():
            folder = tmp / "policies" / policy_id
            folder.mkdir(parents=True)
            torch.save(state, folder / POLICY_FILE)
        for name, group in (arrays or {}).items():
            (tmp / ARRAYS_DIR).mkdir(exist_ok=True)
            # The keys are array names (the cast tells mypy they do not fill savez's allow_pickle flag).
            np.savez(tmp / ARRAYS_DIR / f"{name}.npz", **cast("dict[str, Any]", group))
        for relative, write in (extra_files or {}).items():
            write(tmp / relative)
        atomic_folders.fsync_tree(tmp)
        if target.exists():
            atomic_folders.replace_folder(tmp, target)
        else:
            os.rename(tmp, target)
        atomic_folders.fsync_dir(parent)
    except BaseException:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def copy_without_pickles(path: CheckpointPath, target: str | os.PathLike[str]) -> Path:
    """A copy of a checkpoint that holds no pickle: the objects the script's config held by value are left out.

    What the config named by value (a lambda, a class of the script) stays
    as its name only: loading the copy asks for it to be passed again
    (``from_checkpoint(path, policy_mapping_fn=...)``). Everything else (weights,
    optimizer and algorithm state, arrays, exported model files) is copied,
    read and written as :func:`read_checkpoint` and :func:`write_checkpoint` do.

    Args:
        path: the checkpoint to copy.
        target: the new checkpoint's folder: new, empty, or a checkpoint (which is replaced).

    Returns:
        The absolute path of the copy.

    Raises:
        CheckpointError: ``path`` is no valid checkpoint, or ``target`` is a folder with other contents.
    """
    from corral.core.common.by_value import TABLE_KEY

    ckpt = read_checkpoint(path)
    folder = Path(target).expanduser()
    if folder.is_dir() and any(folder.iterdir()) and not (folder / META_FILE).is_file():
        raise CheckpointError(f"{str(folder)!r} holds files that are not a checkpoint; copy the checkpoint into a new folder")
    known = {META_FILE, CONFIG_FILE, STATE_FILE, "policies", ARRAYS_DIR}
    extra: dict[str, Callable[[Path], Any]] = {  # its other files (exported models); a link is not followed out
        entry.name: functools.partial(_copy_entry, entry)
        for entry in ckpt.folder.iterdir()
        if entry.name not in known and not entry.is_symlink()
    }
    meta = {key: value for key, value in ckpt.meta.items() if key != "format_version"}
    config = {key: value for key, value in ckpt.config.items() if key != TABLE_KEY}
    return write_checkpoint(folder, meta, config, ckpt.algorithm_state, ckpt.policy_states, ckpt.arrays, extra)


def _copy_entry(entry: Path, to: Path) -> None:
    """Copy a file or a folder (its links as links) of one checkpoint into another."""
    if entry.is_dir():
        shutil.copytree(entry, to, symlinks=True)
    else:
        shutil.copy2(entry, to)


def experiment_checkpoint(folder: Path, iteration: int) -> Path:
    """Where ``save()`` puts the checkpoint of ``iteration`` in an experiment folder: ``checkpoint_<iteration>``.

    Args:
        folder: the experiment folder.
        iteration: the training iteration the checkpoint is saved at.
    """
    return folder / f"checkpoint_{iteration:06d}"


def experiment_checkpoints(folder: Path) -> list[Path]:
    """The checkpoints ``save()`` wrote into an experiment folder, oldest first (their names sort by iteration)."""
    return sorted(path for path in folder.iterdir() if re.fullmatch(r"checkpoint_\d+", path.name))


def remove_checkpoint(path: str | os.PathLike[str]) -> None:
    """Delete a checkpoint so that no incomplete folder is ever left under its name.

    It is renamed to a hidden name first (atomic), then deleted; a kill during
    the deletion leaves only a hidden leftover, removed by the next save.
    """
    target = Path(path)
    trash = atomic_folders.hidden_sibling(target, "del")
    os.rename(target, trash)
    shutil.rmtree(trash)


def clean_leftovers(folder: str | os.PathLike[str]) -> list[Path]:
    """Remove what interrupted saves and prunes left in ``folder``; returns what was removed or put back.

    A leftover of a process that is still running (another save going on) is
    left alone. A previous checkpoint moved aside by a save that was killed
    before the new one took its name (only where folders cannot be swapped
    atomically) is put back under its name.
    """
    handled: list[Path] = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return handled
    for entry in entries:
        match = atomic_folders.STRAY.fullmatch(entry.name)
        if match is None or not entry.is_dir() or entry.is_symlink() or atomic_folders.pid_alive(int(match["pid"])):
            continue
        original = entry.with_name(match["name"])
        if match["kind"] == "old" and not original.exists() and (entry / META_FILE).is_file():
            os.rename(entry, original)
        else:
            shutil.rmtree(entry, ignore_errors=True)
        handled.append(entry)
    return handled


# ---------------------------------------------------------------------- #
# reading
# ---------------------------------------------------------------------- #
CheckpointPath = Union[str, os.PathLike[str], "HasPath"]
"""where a checkpoint is: a folder's path, or an object with one (Ray's ``Checkpoint``)"""


class HasPath(Protocol):
    """An object that says where a checkpoint is, as Ray's ``ray.tune.Checkpoint`` (``result.checkpoint``) does."""

    @property
    def path(self) -> Any:
        """the checkpoint's folder (on its ``filesystem``, if it has one)"""


def checkpoint_folder(path: CheckpointPath) -> Path:
    """The local folder of a checkpoint given as a path or as an object with a ``path`` (Ray's ``Checkpoint``).

    A Ray checkpoint on remote storage (its ``filesystem`` is not local) is
    downloaded first, with its own ``to_directory()``.

    Raises:
        CheckpointError: ``path`` is neither.
    """
    if not isinstance(path, (str, Path)) and hasattr(path, "path"):  # Ray's Checkpoint refuses os.fspath()
        filesystem = getattr(path, "filesystem", None)
        if filesystem is not None and getattr(filesystem, "type_name", "local") != "local" and hasattr(path, "to_directory"):
            return Path(path.to_directory())
        path = path.path
    if not isinstance(path, (str, os.PathLike)):
        raise CheckpointError(
            f"a checkpoint is a folder's path or an object with a .path (Ray's Checkpoint), not {type(path).__name__}"
        )
    return Path(path).expanduser()


MODULES_PATH = ("learner_group", "learner", "rl_module")
"""RLlib's path of an algorithm checkpoint's RLModules (its ``COMPONENT_*`` names); corral's has no such folders"""


def split_module_path(path: CheckpointPath, component: str | None = None) -> tuple[Path, str | None]:
    """An algorithm checkpoint's folder and the policy that RLlib's path of its modules names.

    RLlib keeps an algorithm's models at ``<checkpoint>/learner_group/learner/rl_module[/<module id>]``
    and names them as ``component="rl_module"`` or ``"learner_group/learner/rl_module[/<module id>]"``;
    corral's checkpoint is one folder, so the path is cut back to it.

    Args:
        path: the checkpoint folder, or RLlib's path of its modules or of one module inside it.
        component: RLlib's component name, or None when the path alone says it.

    Returns:
        ``(checkpoint folder, policy id or None for every policy)``.

    Raises:
        CheckpointError: a component that is not the models (corral restores those or the whole algorithm).
    """
    folder, policy_id = checkpoint_folder(path), None
    parts = [] if component is None else component.strip("/").split("/")
    for modules in (list(MODULES_PATH), list(MODULES_PATH[-1:])):  # RLlib's whole path, or its last part
        if parts[: len(modules)] == modules and len(parts) <= len(modules) + 1:
            policy_id = parts[len(modules)] if len(parts) > len(modules) else None
            break
    else:
        if parts:
            raise CheckpointError(
                f"component {component!r} is not one corral restores alone: give component='rl_module' (every "
                "policy's model), 'learner_group/learner/rl_module/<policy id>' (one), or no component (the whole algorithm)"
            )
    if folder.parent.name == "rl_module" and folder.parents[1].name == "learner":
        return folder.parents[3], policy_id or folder.name
    if folder.name == "rl_module" and folder.parent.name == "learner":
        return folder.parents[2], policy_id
    return folder, policy_id


def read_meta(path: CheckpointPath) -> dict[str, Any]:
    """The checkpoint's ``corral_checkpoint.json``, after checking the folder, its format version and its fields.

    Args:
        path: the checkpoint folder, or an object with its ``path`` (Ray's ``Checkpoint``).

    Raises:
        CheckpointError: the folder is missing, is not a checkpoint, is too new, or the file is malformed.
    """
    folder = checkpoint_folder(path)
    if not folder.is_dir():
        raise CheckpointError(f"checkpoint {str(folder)!r} does not exist or is not a folder")
    if not (folder / META_FILE).exists():
        raise CheckpointError(f"{str(folder)!r} is not a corral checkpoint (no {META_FILE})")
    meta = _read_json(folder, META_FILE)
    version = meta.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CheckpointError(f"{folder / META_FILE} has no valid format_version (an integer)")
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {str(folder)!r} has format version {version}, newer than this corral reads "
            f"({FORMAT_VERSION}); it was written by corral {meta.get('corral_version', '?')}: upgrade corral"
        )
    for key in ("algorithm",):
        if not isinstance(meta.get(key), str) or not meta[key]:
            raise CheckpointError(f"{folder / META_FILE} has no valid {key!r} (the algorithm's registered name)")
    for key in ("algorithm_class", "distribution", "distribution_version", "corral_version"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise CheckpointError(f"{folder / META_FILE}: {key!r} must be a string, not {type(meta[key]).__name__}")
    policies = meta.get("policies")
    if not isinstance(policies, dict) or not policies:
        raise CheckpointError(f"{folder / META_FILE} must list the checkpoint's policies under 'policies'")
    for policy_id, spaces in policies.items():
        _check_name(policy_id, "policy id", folder / META_FILE)
        if not isinstance(spaces, dict):
            raise CheckpointError(f"{folder / META_FILE}: policy {policy_id!r} must map to its spaces")
    return meta


def read_checkpoint(path: CheckpointPath) -> Checkpoint:
    """Read and check every file of a checkpoint folder; nothing in it is executed.

    Args:
        path: the checkpoint folder, or an object with its ``path`` (Ray's ``Checkpoint``).

    Raises:
        CheckpointError: a file is missing, lies outside the folder, is malformed, or holds code.
    """
    folder = checkpoint_folder(path)
    meta = read_meta(folder)
    config, state = _read_json(folder, CONFIG_FILE), _read_json(folder, STATE_FILE)
    policies = {pid: read_policy_state(folder, pid) for pid in meta["policies"]}
    return Checkpoint(folder, meta, config, state, policies, read_arrays(folder))


def read_config(path: CheckpointPath) -> dict[str, Any]:
    """A checkpoint's ``config.json`` (checked as :func:`read_checkpoint` checks it) without reading its weights."""
    return _read_json(checkpoint_folder(path), CONFIG_FILE)


def read_policy_state(folder: Path, policy_id: str) -> dict[str, Any]:
    """One policy's ``policy_state.pt``: tensors, numbers and containers only.

    Args:
        folder: the checkpoint folder.
        policy_id: the policy whose file to read, ``policies/<policy_id>/policy_state.pt``.

    Raises:
        CheckpointError: the file is missing, outside the folder, not loadable with
            ``weights_only=True`` (a pickle that would run code, say), or not a dict.
    """
    import torch

    relative = Path("policies") / policy_id / POLICY_FILE
    file = _inside(folder, relative)
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # pickle.UnpicklingError for forbidden globals, RuntimeError for corrupt zips, ...
        raise CheckpointError(
            f"{file} cannot be loaded safely ({type(exc).__name__}: {_first_line(exc)}); "
            "corral checkpoints hold tensors only and are never unpickled with code"
        ) from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{file} holds a {type(state).__name__}, not a policy state (a dict of tensors)")
    return state


def read_arrays(path: str | os.PathLike[str]) -> dict[str, dict[str, np.ndarray]]:
    """The checkpoint's ``arrays/*.npz`` groups (empty if it has none); never unpickles.

    Raises:
        CheckpointError: a file is outside the folder, not an ``.npz`` archive,
            damaged, or holds object arrays or arrays larger than the file.
    """
    folder = Path(path).expanduser()
    if not (folder / ARRAYS_DIR).exists():
        return {}
    _inside(folder, Path(ARRAYS_DIR), kind="folder")
    groups = {}
    for file in sorted((folder / ARRAYS_DIR).iterdir()):
        if file.suffix != ".npz":
            continue
        _check_name(file.stem, "array group", file)
        groups[file.stem] = _read_npz(_inside(folder, Path(ARRAYS_DIR) / file.name))
    return groups


def _read_npz(file: Path) -> dict[str, np.ndarray]:
    """An ``np.savez`` archive, each member's declared size checked against its stored size before reading it."""
    try:
        with zipfile.ZipFile(file) as archive:
            arrays = {}
            for info in archive.infolist():
                if not info.filename.endswith(".npy"):
                    raise CheckpointError(f"{file} holds {info.filename!r}, which is not an .npy array")
                with archive.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    if version not in _HEADER_READERS:
                        raise CheckpointError(
                            f"{file}: array {info.filename!r} has .npy format {version}, which corral does not write"
                        )
                    shape, _, dtype = _HEADER_READERS[version](member)
                    if dtype.hasobject:
                        raise CheckpointError(f"{file}: array {info.filename!r} holds Python objects, which corral never loads")
                    if int(np.prod(shape, dtype=np.float64)) * dtype.itemsize > info.file_size:
                        raise CheckpointError(f"{file}: array {info.filename!r} declares shape {shape}, more than the file holds")
                with archive.open(info) as member:
                    arrays[info.filename[: -len(".npy")]] = np.lib.format.read_array(member, allow_pickle=False)
            return arrays
    except CheckpointError:
        raise
    except Exception as exc:  # BadZipFile, a truncated member, a bad header: the file is damaged
        raise CheckpointError(
            f"{file} is not a readable .npz archive of arrays ({type(exc).__name__}: {_first_line(exc)})"
        ) from None


_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _inside(folder: Path, relative: Path, kind: str = "file") -> Path:
    """``folder / relative``, if it exists as a ``kind`` and resolves to a place inside the folder."""
    path = folder / relative
    if not (path.is_file() if kind == "file" else path.is_dir()):
        raise CheckpointError(f"checkpoint {str(folder)!r} is missing {relative}")
    root, resolved = folder.resolve(), path.resolve()
    if resolved != root and root not in resolved.parents:
        raise CheckpointError(
            f"{path} is a link to {resolved}, outside the checkpoint; a checkpoint is read only from its own folder"
        )
    return path


def _read_json(folder: Path, name: str) -> dict[str, Any]:
    path = _inside(folder, Path(name))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise CheckpointError(f"{path} is not valid JSON: {_first_line(exc)}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} holds a JSON {type(data).__name__}, not an object")
    return data


def _check_name(name: Any, what: str, where: Path | None = None) -> None:
    if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name) or name in (".", ".."):
        place = f"{where}: " if where is not None else ""
        raise CheckpointError(f"{place}{what} {name!r} cannot be a folder name; use letters, digits, '_', '-' and '.'")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


# ---------------------------------------------------------------------- #
# files
# ---------------------------------------------------------------------- #
def _write_json(path: Path, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
