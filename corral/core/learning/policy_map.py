"""Policies by id, at most ``policy_map_capacity`` of them in memory; the others wait on disk.

A league of self-play opponents grows by a snapshot every few iterations,
and every snapshot is a network, an optimizer and its moments. RLlib's
``policy_map_capacity`` bounds how many are alive at once; :class:`PolicyMap`
does the same. Looking a policy up marks it most recently used; when more
than ``capacity`` are in memory, the least recently used one is written to a
temporary file (its full :meth:`~corral.core.learning.policy.Policy.get_state`)
and dropped. Looking it up again builds a fresh copy and loads that state, so
a policy that went to disk and came back acts and learns exactly as if it had
stayed.

Hold a policy for the duration of a call, not across calls: a policy that has
been moved out is a detached object, and what is done to it afterwards is lost.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path

import torch

from corral.core.learning.policy import Policy


class PolicyMap(MutableMapping[str, Policy]):
    """A dict of policies by id that keeps at most ``capacity`` of them in memory.

    Args:
        capacity: how many policies stay in memory (``policy_map_capacity``).
        rebuild: ``rebuild(policy_id)`` makes a fresh copy of a policy that was moved
            out (its weights come from the saved state).
        on_load: called with ``(policy_id, policy)`` after a copy is rebuilt and loaded
            (a remote runner sets its filter to keep deltas), and after ``map[id] = policy``.
        on_evict: called with ``(policy_id, policy)`` just before a policy is moved out
            (a remote runner collects what the copy has not reported yet).
    """

    def __init__(
        self,
        capacity: int,
        rebuild: Callable[[str], Policy],
        on_load: Callable[[str, Policy], None] | None = None,
        on_evict: Callable[[str, Policy], None] | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"policy_map_capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._rebuild = rebuild
        self._on_load = on_load
        self._on_evict = on_evict
        self._loaded: OrderedDict[str, Policy] = OrderedDict()  # least recently used first
        self._stashed: dict[str, int] = {}  # policies on disk: the eviction that put each there, which names its file
        self._folder: Path | None = None
        self.evictions = 0
        """how many times a policy was moved out of memory"""

    # ------------------------------------------------------------------ #
    # the mapping
    # ------------------------------------------------------------------ #
    def __getitem__(self, policy_id: str) -> Policy:
        policy = self._loaded.get(policy_id)
        if policy is not None:
            self._loaded.move_to_end(policy_id)
            return policy
        if policy_id not in self._stashed:
            raise KeyError(policy_id)
        return self._load(policy_id)

    def __setitem__(self, policy_id: str, policy: Policy) -> None:
        self._drop_stash(policy_id)
        self._loaded[policy_id] = policy
        self._loaded.move_to_end(policy_id)
        if self._on_load is not None:
            self._on_load(policy_id, policy)
        self._evict_over_capacity()

    def __delitem__(self, policy_id: str) -> None:
        if policy_id in self._loaded:
            del self._loaded[policy_id]
        elif policy_id in self._stashed:
            self._drop_stash(policy_id)
        else:
            raise KeyError(policy_id)

    def __iter__(self) -> Iterator[str]:
        # insertion order of the loaded ones, then those on disk: an id's place may change, the set does not
        return iter([*self._loaded, *self._stashed])

    def __len__(self) -> int:
        return len(self._loaded) + len(self._stashed)

    def __contains__(self, policy_id: object) -> bool:
        return policy_id in self._loaded or policy_id in self._stashed

    def __repr__(self) -> str:
        return f"PolicyMap(capacity={self.capacity}, in_memory={list(self._loaded)}, on_disk={list(self._stashed)})"

    # ------------------------------------------------------------------ #
    # what is in memory
    # ------------------------------------------------------------------ #
    def loaded(self) -> dict[str, Policy]:
        """The policies in memory now, by id, without touching their recency.

        Returns:
            A new dict; loops that need only the policies that may have changed
            (a policy on disk changes only after it is loaded) use it, so they do not
            pull every policy back into memory.
        """
        return dict(self._loaded)

    def moved_out_since(self, evictions: int) -> list[str]:
        """The policies on disk that went there after the map had made ``evictions`` evictions.

        Args:
            evictions: an earlier value of :attr:`evictions` (a broadcast's, say).

        Returns:
            Their ids; the other policies on disk have not changed since then.
        """
        return [policy_id for policy_id, eviction in self._stashed.items() if eviction > evictions]

    @property
    def folder(self) -> Path | None:
        """The private temporary folder of the policies on disk; None until one first goes there."""
        return self._folder

    def close(self) -> None:
        """Remove the folder of the policies on disk now (they leave the map): for a process about to be killed.

        A map otherwise removes it when it is garbage-collected or the process
        exits normally; a Ray actor that is killed does neither.
        """
        self._stashed.clear()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    # ------------------------------------------------------------------ #
    # moving out and in
    # ------------------------------------------------------------------ #
    def _evict_over_capacity(self) -> None:
        while len(self._loaded) > self.capacity:
            policy_id, policy = next(iter(self._loaded.items()))
            if self._on_evict is not None:
                self._on_evict(policy_id, policy)  # may raise (weights that are not finite): nothing moved yet
            # a file of this process's own, read only by it: a save that fails leaves the policy in memory
            torch.save(policy.get_state(), self._path(self.evictions + 1))
            del self._loaded[policy_id]
            self.evictions += 1
            self._stashed[policy_id] = self.evictions

    def _load(self, policy_id: str) -> Policy:
        policy = self._rebuild(policy_id)
        policy.set_state(torch.load(self._path(self._stashed[policy_id]), map_location="cpu", weights_only=True))
        self[policy_id] = policy  # drops the file, calls on_load, moves another out if over capacity
        return policy

    def _drop_stash(self, policy_id: str) -> None:
        eviction = self._stashed.pop(policy_id, None)
        if eviction is not None:
            self._path(eviction).unlink(missing_ok=True)

    def _path(self, eviction: int) -> Path:
        return self._stash_folder() / f"{eviction}.pt"

    def _stash_folder(self) -> Path:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="corral-policy-map-"))
            # removed with the map, or when the process exits
            weakref.finalize(self, shutil.rmtree, self._folder, True)
        return self._folder
