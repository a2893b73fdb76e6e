"""Checkpoint folders: written atomically, read without running any code from them.

Layout::

    corral_checkpoint.json          format version, algorithm, its distribution, corral version, spaces
    config.json                     the config, to_dict()
    algorithm_state.json            counters, iteration, RNG state
    policies/<policy_id>/policy_state.pt   tensors only (weights, optimizer, exploration, filter)
    arrays/<name>.npz               optional numpy arrays (replay buffers), read with allow_pickle=False

A checkpoint is written into a temporary sibling folder and renamed into place,
so a crash never leaves a half-written one and an older checkpoint at the same
path survives until the new one is complete. Policy files are read with
``torch.load(weights_only=True)``: a tampered file raises CheckpointError
instead of executing code.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from corral.core.errors import CheckpointError

FORMAT_VERSION = 1
META_FILE = "corral_checkpoint.json"
CONFIG_FILE = "config.json"
STATE_FILE = "algorithm_state.json"
POLICY_FILE = "policy_state.pt"


def write_checkpoint(
    path: str | os.PathLike[str],
    meta: dict[str, Any],
    config: dict[str, Any],
    algorithm_state: dict[str, Any],
    policy_states: dict[str, dict[str, Any]],
    arrays: dict[str, dict[str, np.ndarray]] | None = None,
) -> Path:
    """Write a checkpoint folder at ``path`` atomically; returns the path.

    Args:
        arrays: named groups of numpy arrays, each written as ``arrays/<name>.npz``.
    """
    target = Path(path).expanduser().resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    tmp.chmod(0o777 & ~_umask())  # mkdtemp makes it private; a checkpoint gets the usual permissions
    try:
        _write_json(tmp / META_FILE, {"format_version": FORMAT_VERSION, **meta})
        _write_json(tmp / CONFIG_FILE, config)
        _write_json(tmp / STATE_FILE, algorithm_state)
        import torch  # here, not at the top: reading a checkpoint's metadata needs no torch

        for policy_id, state in policy_states.items():
            folder = tmp / "policies" / policy_id
            folder.mkdir(parents=True)
            torch.save(state, folder / POLICY_FILE)
        for name, group in (arrays or {}).items():
            (tmp / "arrays").mkdir(exist_ok=True)
            np.savez(tmp / "arrays" / f"{name}.npz", **group)
        _fsync_tree(tmp)
        if target.exists():
            # Move the old one aside first, so that at every moment one complete checkpoint exists.
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.replace(target, old / target.name)
            try:
                os.replace(tmp, target)
            except BaseException:
                os.replace(old / target.name, target)  # put the previous checkpoint back
                shutil.rmtree(old, ignore_errors=True)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def read_meta(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The checkpoint's ``corral_checkpoint.json``, after checking the folder and its format version."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise CheckpointError(f"checkpoint {str(folder)!r} does not exist or is not a folder")
    meta = _read_json(folder / META_FILE, "is not a corral checkpoint (no corral_checkpoint.json)")
    version = meta.get("format_version")
    if not isinstance(version, int):
        raise CheckpointError(f"checkpoint {str(folder)!r} has no valid format_version in {META_FILE}")
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {str(folder)!r} has format version {version}, newer than this corral reads "
            f"({FORMAT_VERSION}); it was written by corral {meta.get('corral_version', '?')}: upgrade corral"
        )
    return meta


def read_checkpoint(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, dict[str, Any]]]:
    """``(meta, config, algorithm_state, policy_states)`` of a checkpoint folder."""
    folder = Path(path).expanduser()
    meta = read_meta(folder)
    config = _read_json(folder / CONFIG_FILE, f"is missing {CONFIG_FILE}")
    state = _read_json(folder / STATE_FILE, f"is missing {STATE_FILE}")
    import torch

    policies = {}
    for policy_id in meta.get("policies", {}):
        file = folder / "policies" / policy_id / POLICY_FILE
        if not file.is_file():
            raise CheckpointError(f"checkpoint {str(folder)!r} is missing {file.relative_to(folder)}")
        try:
            policies[policy_id] = torch.load(file, map_location="cpu", weights_only=True)
        except Exception as exc:  # pickle.UnpicklingError for forbidden globals, RuntimeError for corrupt zips, ...
            raise CheckpointError(
                f"{file} cannot be loaded safely ({type(exc).__name__}: {str(exc).splitlines()[0]}); "
                "corral checkpoints hold tensors only and are never unpickled with code"
            ) from None
    return meta, config, state, policies


def read_arrays(path: str | os.PathLike[str]) -> dict[str, dict[str, np.ndarray]]:
    """The checkpoint's ``arrays/*.npz`` groups (empty if it has none); never unpickles."""
    folder = Path(path).expanduser() / "arrays"
    groups = {}
    for file in sorted(folder.glob("*.npz")) if folder.is_dir() else []:
        try:
            with np.load(file, allow_pickle=False) as data:
                groups[file.stem] = {key: data[key] for key in data.files}
        except (ValueError, OSError) as exc:
            raise CheckpointError(f"{file} cannot be loaded safely: {exc}") from None
    return groups


def _write_json(path: Path, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")


def _read_json(path: Path, missing: str) -> Any:
    if not path.is_file():
        raise CheckpointError(f"{str(path.parent)!r} {missing}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is not valid JSON: {exc}") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_tree(folder: Path) -> None:
    for file in folder.rglob("*"):
        if file.is_file():
            with open(file, "rb") as f:
                os.fsync(f.fileno())
