"""One entry-point group's plugins: discovered lazily, loaded one at a time.

A plugin that fails to import must not take the others down with it, and two
distributions claiming one name must be reported rather than resolved by
whichever happens to come first. So each entry point is loaded on its own,
its failure is caught and remembered, and name clashes are found up front.
"""

from __future__ import annotations

import contextlib
import logging
import reprlib
import threading
from dataclasses import dataclass
from typing import Any

import corral.errors as errors
from corral.plugin_api import api_problem
from corral.registry.discovery import (
    DISABLE_ENV_VAR,
    IN_PROCESS,
    DiscoveredEntryPoint,
    PluginInfo,
    PluginStatus,
    disabled_names,
    discover,
    normalize_dist_name,
)

logger = logging.getLogger("corral.registry")


@dataclass(eq=False)
class _Slot:
    """Mutable state of one discovered entry point (PluginInfo is its snapshot)."""

    found: DiscoveredEntryPoint
    blocked: bool = False
    clash: str | None = None
    loaded: bool = False
    obj: Any = None
    failure_message: str | None = None
    failure_short: str | None = None
    failure_cause: BaseException | None = None
    incompatible: str | None = None
    warned: bool = False
    """whether :meth:`PluginRegistry.load_all` logged why it skips this plugin (once per process, not per call)"""

    @property
    def key(self) -> str:
        return self.found.name.lower()

    @property
    def where(self) -> str:
        f = self.found
        return f"distribution {f.dist} {f.version} (entry point: {f.name} = {f.value})"

    @property
    def status(self) -> PluginStatus:
        if self.incompatible is not None:
            return "incompatible"
        if self.failure_message is not None:
            return "broken"
        if self.blocked:
            return "blocked"
        if self.clash is not None:
            return "conflict"
        return "ok" if self.loaded else "not loaded"

    def info(self, group: str, shadowed_by: str | None = None) -> PluginInfo:
        f = self.found
        if shadowed_by is not None and self.status in ("ok", "not loaded"):
            return PluginInfo(f.name, group, f.dist, f.version, f.value, "shadowed", f"shadowed by {shadowed_by}")
        status = self.status
        error = {"broken": self.failure_short, "incompatible": self.incompatible, "conflict": self.clash}.get(status)
        return PluginInfo(f.name, group, f.dist, f.version, f.value, status, error)


class PluginRegistry:
    """The plugins of one entry-point group, e.g. ``corral.algorithms``.

    One class serves algorithms, explorations and hook plugins, so that all
    three get the same isolation, conflict and blocking rules. Nothing is
    discovered until first asked, and nothing is imported until a plugin is
    looked up, so building a registry is cheap and listing never imports a
    plugin (nor torch).

    Args:
        group: The entry-point group to read.
        kind: What a plugin is called in messages ("algorithm").
        unknown_error: Raised for a name nobody provides.
        expects_class: Whether a plugin must be a class (hook plugins may be
            modules or instances).
        required_attribute: An attribute a plugin must have, if any.
        requirement: The sentence telling the user what a plugin must be,
            shown when ``required_attribute`` is missing.
    """

    def __init__(
        self,
        group: str,
        kind: str,
        *,
        unknown_error: type[errors.UnknownPluginError] = errors.UnknownPluginError,
        expects_class: bool = True,
        required_attribute: str | None = None,
        requirement: str = "",
    ) -> None:
        self.group = group
        self.kind = kind
        self._unknown_error = unknown_error
        self._expects_class = expects_class
        self._required_attribute = required_attribute
        self._requirement = requirement
        self._lock = threading.RLock()
        self._slots: list[_Slot] | None = None
        self._in_process: dict[str, tuple[str, Any]] = {}

    # ----------------------------------------------------------- discovery

    def refresh(self) -> None:
        """Forget all discovered, loaded and in-process-registered plugins.

        In-process registrations are cleared too, so that after a refresh the
        registry reflects exactly the environment (``sys.path``,
        ``CORRAL_DISABLE_PLUGINS``) and nothing left over from earlier code.
        """
        with self._lock:
            self._slots = None
            self._in_process.clear()

    def _discovered(self) -> list[_Slot]:
        with self._lock:
            if self._slots is None:
                self._slots = self._build()
            return self._slots

    def _build(self) -> list[_Slot]:
        blocked = disabled_names()
        slots = [_Slot(f, blocked=f.name.lower() in blocked, incompatible=f.incompatible) for f in discover(self.group)]
        by_key: dict[str, list[_Slot]] = {}
        for slot in slots:
            if not slot.blocked:
                by_key.setdefault(slot.key, []).append(slot)
        for same in by_key.values():
            if len(same) > 1:
                providers = " and ".join(f"{s.found.dist} {s.found.version}" for s in same)
                for slot in same:
                    slot.clash = f"{same[0].found.name!r} is provided by {providers}"
        return slots

    # ------------------------------------------------------------- listing

    def list_plugins(self, check: bool = False) -> list[PluginInfo]:
        """Describe every plugin of the group, without importing any unless ``check``.

        Args:
            check: Import every usable plugin, one at a time with its failure
                caught, so that each shows as ``"ok"`` or ``"broken"`` rather
                than ``"not loaded"``. Imports torch with the algorithms.

        Returns:
            One record per entry point and per in-process registration,
            sorted by name (case-insensitively), then distribution.
        """
        with self._lock:
            if check:
                for slot in self._discovered():
                    if slot.status == "not loaded":
                        with contextlib.suppress(errors.PluginLoadError):  # remembered in the slot, shown as broken
                            self._load(slot)
            infos = [slot.info(self.group, self._shadowing(slot)) for slot in self._discovered()]
            infos += [self._in_process_info(name, obj) for name, obj in self._in_process.values()]
        return sorted(infos, key=lambda i: (i.name.lower(), i.dist.lower()))

    def names(self) -> list[str]:
        """Return every name the group provides, for messages and completion."""
        return sorted({info.name for info in self.list_plugins()}, key=str.lower)

    def _shadowing(self, slot: _Slot) -> str | None:
        if slot.key not in self._in_process:
            return None
        return f"the in-process registration {self._in_process_info(*self._in_process[slot.key]).value}"

    def _in_process_info(self, name: str, obj: Any) -> PluginInfo:
        qualname = getattr(obj, "__qualname__", type(obj).__qualname__)
        value = f"{getattr(obj, '__module__', '?')}:{qualname}"
        return PluginInfo(name, self.group, IN_PROCESS, "", value, "ok", None)

    # ------------------------------------------------------------- lookup

    def get(self, name: str, dist: str | None = None) -> Any:
        """Return the plugin registered as ``name``, importing it if needed.

        In-process registrations win over entry points, since they are the
        user's explicit choice. ``dist`` picks one distribution's entry point
        when several provide the name.

        Args:
            name: The plugin's name, in any case.
            dist: The distribution to take it from (any spelling that
                normalizes the same), or ``"<in-process>"``.

        Returns:
            The loaded object; later lookups return the same object.

        Raises:
            UnknownPluginError: Nobody (or not ``dist``) provides ``name``.
            PluginLoadError: It failed to import, is not what the group
                expects, is blocked, or several distributions provide it.
        """
        if not isinstance(name, str):
            raise TypeError(f"A {self.kind} name must be a string, got {type(name).__name__}")
        if dist is not None and not isinstance(dist, str):
            raise TypeError(f"dist must be a distribution name (str), got {type(dist).__name__}")
        key = name.strip().lower()
        with self._lock:
            providers = [s for s in self._discovered() if s.key == key]
            if dist is None:
                if key in self._in_process:
                    return self._in_process[key][1]
                if not providers:
                    raise self._unknown(name)
                if len(providers) > 1 and not any(s.blocked for s in providers):
                    raise self._conflict(providers)
                chosen = providers
            elif dist == IN_PROCESS:
                if key in self._in_process:
                    return self._in_process[key][1]
                raise self._not_from(name, dist, providers)
            else:
                wanted = normalize_dist_name(dist)
                chosen = [s for s in providers if normalize_dist_name(s.found.dist) == wanted]
                if not chosen:
                    raise self._not_from(name, dist, providers)
            blocked = [s for s in chosen if s.blocked]
            if blocked:
                raise self._blocked(blocked)
            return self._load(chosen[0])

    def load_all(self) -> list[tuple[PluginInfo, Any]]:
        """Load every usable plugin of the group, skipping (never raising) failures.

        Meant for hook plugins and integrations, which all run rather than being
        chosen by name: one broken logger must not stop training. Blocked and
        conflicting plugins are skipped; failures are logged once and
        remembered, so ``list_plugins`` shows them as broken.

        Returns:
            ``(info, object)`` pairs for the plugins that loaded, by name.
        """
        loaded: list[tuple[PluginInfo, Any]] = []
        with self._lock:
            for slot in self._discovered():
                if slot.blocked:
                    continue
                if slot.clash is not None:
                    if not slot.warned:
                        logger.warning("Skipping %s %s: %s.", self.kind, slot.where, slot.clash)
                    slot.warned = True
                    continue
                try:
                    obj = self._load(slot)
                except errors.PluginLoadError as exc:
                    if not slot.warned:
                        logger.warning("%s", exc)
                    slot.warned = True
                    continue
                loaded.append((slot.info(self.group), obj))
            loaded += [(self._in_process_info(n, o), o) for n, o in self._in_process.values()]
        return sorted(loaded, key=lambda pair: (pair[0].name.lower(), pair[0].dist.lower()))

    def _load(self, slot: _Slot) -> Any:
        if slot.loaded:
            return slot.obj
        if slot.incompatible is not None:
            raise errors.PluginLoadError(
                f"The {self.kind} {slot.found.name!r} from {slot.where} is incompatible with this corral: "
                f"{slot.incompatible}. Install a release of {slot.found.dist} made for it, or set "
                f"{DISABLE_ENV_VAR}={slot.found.name} to skip it."
            )
        if slot.failure_message is None:
            try:
                obj = slot.found.entry_point.load()
            except Exception as exc:  # a plugin's import may raise anything
                slot.failure_short = _first_line(exc)
                slot.failure_cause = exc
                slot.failure_message = (
                    f"Could not load {self.kind} {slot.found.name!r} from {slot.where}: "
                    f"{slot.failure_short}. Other plugins are unaffected; fix or uninstall "
                    f"{slot.found.dist}, or set {DISABLE_ENV_VAR}={slot.found.name} to skip it."
                )
            else:
                slot.incompatible = api_problem(obj)
                if slot.incompatible is not None:
                    return self._load(slot)
                problem = self._problem(obj)
                if problem is None:
                    slot.loaded, slot.obj = True, obj
                    return obj
                slot.failure_short = problem
                slot.failure_message = f"The {self.kind} {slot.found.name!r} from {slot.where} is not usable: {problem}."
        raise errors.PluginLoadError(slot.failure_message) from slot.failure_cause

    def _problem(self, obj: Any) -> str | None:
        if self._expects_class and not isinstance(obj, type):
            return f"expected a class, got {type(obj).__name__} {reprlib.repr(obj)}"
        if self._required_attribute and not hasattr(obj, self._required_attribute):
            return f"{getattr(obj, '__qualname__', obj)!s} has no {self._required_attribute}; {self._requirement}"
        return None

    # ----------------------------------------------------- registration

    def register(self, name: str, obj: Any) -> None:
        """Register ``obj`` as ``name`` in this process only.

        For tests and notebooks, where installing a distribution is overkill.
        Registering a name again replaces the earlier registration (re-running
        a notebook cell must work).

        Args:
            name: The name to look it up by (case-insensitive).
            obj: The plugin (a class, for algorithms and explorations).

        Raises:
            TypeError: ``name`` is not a string, or ``obj`` is not a class
                where one is expected.
            ValueError: ``name`` is empty.
            PluginLoadError: ``obj`` lacks what the group requires (an
                algorithm must subclass corral's ``Algorithm``).
        """
        if not isinstance(name, str):
            raise TypeError(f"A {self.kind} name must be a string, got {type(name).__name__}")
        clean = name.strip()
        if not clean:
            raise ValueError(f"A {self.kind} name must not be empty")
        if self._expects_class and not isinstance(obj, type):
            raise TypeError(
                f"Cannot register {self.kind} {clean!r}: expected a class, got "
                f"{type(obj).__name__} {reprlib.repr(obj)} (pass the class, not an instance)"
            )
        problem = api_problem(obj) or self._problem(obj)
        if problem is not None:
            raise errors.PluginLoadError(f"Cannot register {self.kind} {clean!r}: {problem}")
        with self._lock:
            self._in_process[clean.lower()] = (clean, obj)

    # ------------------------------------------------------------ errors

    def _unknown(self, name: str) -> errors.UnknownPluginError:
        names = self.names()
        installed = f"Installed {self.kind}s: {', '.join(names)}." if names else f"No {self.kind}s are installed."
        return self._unknown_error(f"Unknown {self.kind} {name!r}. {installed}{errors.did_you_mean(name, names)}")

    def _not_from(self, name: str, dist: str, providers: list[_Slot]) -> errors.UnknownPluginError:
        if not providers and name.strip().lower() not in self._in_process:
            return self._unknown(name)
        offered = [f"{s.found.dist} {s.found.version}" for s in providers]
        if name.strip().lower() in self._in_process:
            offered.append(IN_PROCESS)
        return self._unknown_error(
            f"Distribution {dist!r} does not provide {self.kind} {name!r}; it is provided by: {', '.join(offered)}."
        )

    def _conflict(self, slots: list[_Slot]) -> errors.PluginLoadError:
        listing = "; ".join(f"{s.found.dist} {s.found.version} ({s.found.value})" for s in slots)
        # Suggest a non-corral distribution: choosing the built-in needs no plugin.
        others = [s.found for s in slots if normalize_dist_name(s.found.dist) != "corral"]
        example = others[0] if others else slots[0].found
        return errors.PluginLoadError(
            f"{len(slots)} distributions provide the {self.kind} {example.name!r}: {listing}. "
            f'Pass dist="..." to choose one, e.g. dist="{example.dist}", '
            f"or uninstall all but one."
        )

    def _blocked(self, slots: list[_Slot]) -> errors.PluginLoadError:
        where = "; ".join(s.where for s in slots)
        return errors.PluginLoadError(
            f"The {self.kind} {slots[0].found.name!r} ({where}) is blocked by "
            f"{DISABLE_ENV_VAR}; remove it from that variable to use it."
        )


def _first_line(exc: BaseException) -> str:
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__
