"""Fault injection: a process killed between any two filesystem operations of a save or a prune.

Each case forks a child that saves and dies (``os._exit``, no cleanup runs)
at the k-th operation, for every k. Afterwards the final name must hold a
complete, loadable checkpoint (the old one or the new one), every
``checkpoint_*`` folder must be complete, and the next save must clear what
the dead process left behind.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from corral.core.persistence import atomic_folders, checkpoints

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="kills are simulated in a forked child")

KILLED = 77


def kill_points() -> list[tuple[Any, str]]:
    """Every operation of a save or a prune that touches the filesystem."""
    return [
        (checkpoints.os, "rename"),
        (checkpoints.shutil, "rmtree"),
        (atomic_folders, "exchange"),
        (checkpoints, "_write_json"),
        (atomic_folders, "fsync_tree"),
        (torch, "save"),
    ]


def count_operations(action: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> int:
    calls = 0
    with monkeypatch.context() as patch:
        for owner, name in kill_points():
            real = getattr(owner, name)

            def counting(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
                nonlocal calls
                calls += 1
                return _real(*args, **kwargs)

            patch.setattr(owner, name, counting)
        action()
    return calls


def run_killed_at(k: int, action: Callable[[], Any]) -> int:
    """Run ``action`` in a forked child that dies at its k-th filesystem operation; returns the exit code."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            calls = 0
            for owner, name in kill_points():
                real = getattr(owner, name)

                def dying(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
                    nonlocal calls
                    calls += 1
                    if calls == k:
                        os._exit(KILLED)
                    return _real(*args, **kwargs)

                setattr(owner, name, dying)
            action()
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def iteration_of(folder: Path) -> int:
    """The iteration of the complete checkpoint in ``folder`` (reading every file of it)."""
    return checkpoints.read_checkpoint(folder).algorithm_state["iteration"]


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.fixture
def two_states(make_algo, tmp_path) -> tuple[Any, Path]:
    """An algorithm at iteration 2 and a pristine copy of its checkpoint from iteration 1."""
    algo = make_algo()
    algo.train()
    pristine = Path(algo.save(tmp_path / "pristine"))
    algo.train()
    return algo, pristine


@pytest.mark.parametrize("atomic_swap", [True, False], ids=["exchange", "two-renames"])
def test_a_kill_at_any_point_of_an_overwrite_leaves_a_loadable_checkpoint(two_states, tmp_path, monkeypatch, atomic_swap) -> None:
    algo, pristine = two_states
    if not atomic_swap:
        monkeypatch.setattr(atomic_folders, "exchange", lambda a, b: False)
    folder = tmp_path / "runs"
    target = folder / "ckpt"
    folder.mkdir()

    def reset() -> None:
        for entry in folder.iterdir():
            shutil.rmtree(entry)
        shutil.copytree(pristine, target)

    reset()
    total = count_operations(lambda: algo.save(target), monkeypatch)
    assert iteration_of(target) == 2 and total >= 5
    seen = set()
    for k in range(1, total + 2):
        reset()
        code = run_killed_at(k, lambda: algo.save(target))
        assert code == (KILLED if k <= total else 0), f"operation {k}: the child exited with {code}"
        if target.exists():
            seen.add(iteration_of(target))
        else:
            # Only without an atomic swap, between its two renames: the next save puts the old one back.
            assert not atomic_swap, f"a kill at operation {k} of {total} left nothing under the final name"
            checkpoints.clean_leftovers(folder)
            assert iteration_of(target) == 1
        algo.save(folder / "other")  # the next save clears what the dead child left
        assert hidden(folder) == [], f"operation {k}: leftovers {hidden(folder)} survived the next save"
    assert seen == {1, 2}


def test_a_kill_at_any_point_of_a_pruning_save_leaves_only_complete_checkpoints(make_algo, monkeypatch, tmp_path) -> None:
    from ..conftest import small_ppo_config

    algo = make_algo(small_ppo_config().checkpointing(keep_checkpoints_num=1))
    algo.train()
    logdir = algo.logdir
    pristine = Path(shutil.copytree(Path(algo.save()), tmp_path / "pristine"))  # checkpoint_000001
    algo.train()

    def reset() -> None:
        for entry in logdir.iterdir():
            if entry.is_dir():
                shutil.rmtree(entry)
        shutil.copytree(pristine, logdir / "checkpoint_000001")

    reset()
    total = count_operations(algo.save, monkeypatch)
    assert sorted(p.name for p in logdir.iterdir() if p.is_dir()) == ["checkpoint_000002"]
    for k in range(1, total + 2):
        reset()
        run_killed_at(k, algo.save)
        found = sorted(p for p in logdir.iterdir() if p.name.startswith("checkpoint_"))
        assert found, f"a kill at operation {k} of {total} left no checkpoint"
        for folder in found:
            assert iteration_of(folder) == int(folder.name.split("_")[1]), f"{folder.name} is incomplete after a kill at {k}"
    algo.save()
    assert hidden(logdir) == []


def test_leftovers_of_a_running_save_are_left_alone(tmp_path) -> None:
    """Another process still saving into the folder keeps its temporary folder."""
    alive = tmp_path / f".ckpt.tmp-{os.getppid()}-abcd1234"
    dead_pid = 2**22 + 12345  # above Linux's default pid_max, so no such process
    dead = tmp_path / f".ckpt.tmp-{dead_pid}-abcd1234"
    alive.mkdir()
    dead.mkdir()
    unrelated = tmp_path / ".ckpt.tmp-notes"
    unrelated.mkdir()
    checkpoints.clean_leftovers(tmp_path)
    assert alive.exists() and unrelated.exists() and not dead.exists()


def test_a_checkpoint_moved_aside_is_put_back(tmp_path) -> None:
    """Where folders cannot be swapped atomically, a save killed between its renames is undone by the next one."""
    aside = tmp_path / f".ckpt.old-{2**22 + 1}-abcd1234"
    aside.mkdir()
    (aside / checkpoints.META_FILE).write_text(json.dumps({"format_version": 1}))
    checkpoints.clean_leftovers(tmp_path)
    assert (tmp_path / "ckpt" / checkpoints.META_FILE).is_file() and not aside.exists()
