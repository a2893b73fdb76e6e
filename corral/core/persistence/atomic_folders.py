"""Folders that take their final name atomically: what a checkpoint save stands on.

A folder is written under a hidden sibling name (:func:`hidden_sibling`) and
then takes the final name; one that exists already swaps places with it in
one ``renameat2(RENAME_EXCHANGE)`` (``renamex_np(RENAME_SWAP)`` on macOS), or,
where the filesystem cannot swap, is moved aside first
(:func:`replace_folder`). Hidden names carry the writer's pid, so a leftover
of a killed process (:data:`STRAY`, :func:`pid_alive`) can be told from a
save still going on.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import re
import secrets
import shutil
import sys
from pathlib import Path
from typing import Any

STRAY = re.compile(r"\.(?P<name>.+)\.(?P<kind>tmp|old|del)-(?P<pid>\d+)-[0-9a-f]+")
"""Hidden folders a save or a prune makes on the way: ``.<name>.<kind>-<pid>-<token>``."""


def replace_folder(new: Path, target: Path) -> None:
    """Make ``new`` the folder at ``target`` and delete the old one; ``target`` never stands empty.

    Args:
        new: the complete new folder, under a hidden name beside ``target``.
        target: the folder's final name, which holds the old one now.
    """
    if exchange(new, target):
        shutil.rmtree(new)  # it holds the old checkpoint now, under a hidden name
        return
    # No atomic swap here: move the old one aside (the next save puts it back if we die in between).
    old = hidden_sibling(target, "old")
    os.rename(target, old)
    try:
        os.rename(new, target)
    except BaseException:
        os.rename(old, target)
        raise
    shutil.rmtree(old)


def hidden_sibling(target: Path, kind: str) -> Path:
    """A fresh hidden name beside ``target`` for a folder on its way, which :data:`STRAY` matches.

    The pid in it tells a leftover of a dead process from a folder still being written.

    Args:
        target: the folder's final name.
        kind: ``"tmp"`` (being written), ``"old"`` (moved aside) or ``"del"`` (being deleted).

    Returns:
        The hidden path (nothing is made there).
    """
    return target.with_name(f".{target.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}")


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically.

    Args:
        a: one path.
        b: the other.

    Returns:
        Whether they were swapped: False where the platform or filesystem cannot.

    Raises:
        OSError: the swap failed for another reason.
    """
    libc = _libc()
    if libc is None:
        return False
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        at_fdcwd, renameexchange = -100, 2
        result = libc.renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), renameexchange)
    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        rename_swap = 2
        result = libc.renamex_np(os.fsencode(a), os.fsencode(b), rename_swap)
    else:
        return False
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):  # this filesystem cannot swap
        return False
    raise OSError(err, os.strerror(err), str(b))


_LIBC: Any = None


def _libc() -> Any:
    global _LIBC
    if _LIBC is None and os.name == "posix":
        try:
            _LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        except OSError:
            _LIBC = False
    return _LIBC or None


def pid_alive(pid: int) -> bool:
    """Whether the process that made a hidden folder may still be using it (this process never is)."""
    if pid == os.getpid():
        return False  # this process is not saving anything else right now
    if os.name != "posix":
        return True  # no cheap, safe liveness test: keep the leftover
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def umask() -> int:
    """The process's umask (read by setting it, then putting it back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_tree(folder: Path) -> None:
    """Flush every file under ``folder`` to disk, before the folder takes its final name."""
    for file in folder.rglob("*"):
        if file.is_file():
            with open(file, "rb") as f:
                os.fsync(f.fileno())


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (where directories can be opened)."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
