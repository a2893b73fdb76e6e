"""RLlib's decorators for the API a script overrides or calls: ``override``, ``Deprecated`` and their kin.

``override(Parent)`` checks, when the class is created, that the class really
derives from ``Parent``: a typo'd or stale base fails at import, as in RLlib.
The stability markers (``PublicAPI``, ``DeveloperAPI``, ...) document and
return what they decorate unchanged, which is all RLlib's do for a caller.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

DEPRECATED_VALUE = -1
"""RLlib's marker for a config option a user should no longer set"""


class NotProvided:
    """RLlib's sentinel for "argument not given" in a config method (``def training(self, *, x=NotProvided)``)."""


class _OverrideCheck:
    """Holds the decorated method until its class exists, then checks the class derives from the named parent.

    Under ``@classmethod`` (or another wrapper) the class never hands itself over; the
    check is then skipped and a call goes straight to the method.
    """

    def __init__(self, func: Callable[..., Any], parent: type) -> None:
        self.func = func
        self.parent = parent
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __set_name__(self, owner: type, name: str) -> None:
        if not issubclass(owner, self.parent):
            raise NameError(
                f"@override({self.parent.__name__}) on {owner.__name__}.{name}: {owner.__name__} does not derive from it"
            )
        setattr(owner, name, self.func)


def override(parent_cls: type) -> Callable[[T], T]:
    """Mark a method as overriding one of ``parent_cls``; the class must derive from it.

    Args:
        parent_cls: the class whose method is overridden.

    Returns:
        The decorator.

    Raises:
        TypeError: ``parent_cls`` is not a class (``@override`` was written without its argument).
    """
    if not isinstance(parent_cls, type):
        raise TypeError(f"@override needs the parent class, e.g. @override(TorchModelV2); got {parent_cls!r}")

    def decorate(func: T) -> T:
        return _OverrideCheck(func, parent_cls)  # type: ignore[arg-type,return-value]

    return decorate


def _marker(obj: T) -> T:
    return obj


PublicAPI = DeveloperAPI = ExperimentalAPI = OldAPIStack = _marker
"""RLlib's stability markers: they document, and return what they decorate unchanged"""


def OverrideToImplementCustomLogic(obj: T) -> T:
    """Mark a base-class method that subclasses override; :func:`is_overridden` tells whether one did.

    Args:
        obj: the method.

    Returns:
        The same method, marked.
    """
    obj.__is_overridden__ = False  # type: ignore[attr-defined]
    return obj


OverrideToImplementCustomLogic_CallToSuperRecommended = OverrideToImplementCustomLogic
"""The same mark, for a method whose override should call ``super()``"""


def is_overridden(obj: Any) -> bool:
    """Whether ``obj`` (a method) is a subclass's override of a marked base method.

    Args:
        obj: a method, bound or not.

    Returns:
        False for the marked base method itself; True otherwise.
    """
    return bool(getattr(getattr(obj, "__func__", obj), "__is_overridden__", True))


def deprecation_warning(
    old: str, new: str | None = None, *, help: str | None = None, error: bool | type[Exception] | None = None
) -> None:
    """Say that ``old`` is deprecated, with ``new`` (or ``help``) as what to use; raise where ``error`` says.

    Args:
        old: what is deprecated.
        new: what to use instead.
        help: free text in place of ``new``.
        error: True raises ``ValueError``; an exception class raises that; falsy warns.

    Raises:
        ValueError: ``error`` is True (or the exception class ``error`` names).
    """
    message = f"`{old}` has been deprecated." + (f" Use `{new}` instead." if new else f" {help}" if help else "")
    if error:
        raise (error if isinstance(error, type) else ValueError)(message)
    warnings.warn(message, DeprecationWarning, stacklevel=2)


def Deprecated(
    old: str | None = None, *, new: str | None = None, help: str | None = None, error: bool = True
) -> Callable[[T], T]:
    """Decorate a function or class as deprecated: calling it raises (``error=True``) or warns.

    Args:
        old: the name to report (default: the decorated object's).
        new: what to use instead.
        help: free text in place of ``new``.
        error: raise ``ValueError`` on use instead of warning.

    Returns:
        The decorator.
    """

    def decorate(obj: T) -> T:
        name = old or str(getattr(obj, "__name__", obj))
        if isinstance(obj, type):
            init = obj.__init__  # type: ignore[misc]

            @functools.wraps(init)
            def deprecated_init(*args: Any, **kwargs: Any) -> None:
                deprecation_warning(name, new, help=help, error=error)
                init(*args, **kwargs)

            obj.__init__ = deprecated_init  # type: ignore[misc]
            return obj

        @functools.wraps(obj)  # type: ignore[arg-type]
        def deprecated(*args: Any, **kwargs: Any) -> Any:
            deprecation_warning(name, new, help=help, error=error)
            return obj(*args, **kwargs)  # type: ignore[operator]

        return deprecated  # type: ignore[return-value]

    return decorate
