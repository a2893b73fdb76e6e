"""Objects from the user's script, written by value where a config is written as data.

``to_dict()`` writes a class or a function as its import path
(``"package.module:Name"``), which any process imports again. What the running
script defines (``__main__``), a lambda, or a function defined inside another
has no path another process could import: a Tune trial, which builds its
algorithm from the param space, would fail on it. Such an object is written by
value: under its name (``"__main__:GridEnv"``, ``"__main__:<lambda>#2"`` for a
second lambda) where the option is, and pickled by cloudpickle (as Ray sends
functions) in one table beside the options::

    {"env": "__main__:GridEnv", ..., "__corral_by_value__": {"__main__:GridEnv": "<base64>"}}

so the values stay short and readable (Tune names a trial after its ``env``).
Unpickling runs code, so a name in the table turns back into its object only

- in the process that wrote it, which remembers the object (nothing is unpickled);
- inside :func:`trusted`: a Tune trial of corral's trainable (the param space
  its own run wrote) and ``Algorithm.from_checkpoint(..., trust_code=True)``.

Anywhere else reading one is a :class:`~corral.errors.ConfigError` that names
it and says to pass the object itself. An object that corral made and can make
again from a name says so in ``__corral_reference__`` (``make_multi_agent``'s
classes), and is written as that name.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import logging
import pickle
import sys
from collections.abc import Iterator
from typing import Any

from corral.errors import ConfigError

logger = logging.getLogger("corral")

TABLE_KEY = "__corral_by_value__"
"""the key of a config dict that holds, by name, the pickles of the objects written by value"""
REFERENCE_ATTRIBUTE = "__corral_reference__"
"""set on an object corral made (not inherited): the string that makes it again, written in its place"""

_TRUSTED = contextvars.ContextVar("corral_by_value_trusted", default=False)
_BY_ID: dict[int, tuple[Any, str, str]] = {}
"""``(object, name, pickle)`` of every object this process wrote or read by value, by its id (kept alive here)"""
_BY_NAME: dict[str, tuple[Any, str]] = {}
"""``(object, pickle)`` by name"""
_BY_PICKLE: dict[str, Any] = {}
"""objects by their pickle"""


def reference(obj: Any) -> str | None:
    """The string that names ``obj`` for any process: its import path or corral's own reference; None if it has none.

    Args:
        obj: a class or a function.

    Returns:
        ``"package.module:Name"`` where importing it gives ``obj`` back, the
        ``__corral_reference__`` corral set on it, or None (defined in ``__main__``,
        a lambda, a function inside another, an object no longer found under its name).
    """
    own = getattr(obj, "__dict__", {}).get(REFERENCE_ATTRIBUTE)
    if isinstance(own, str):
        return own
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or module == "__main__":
        return None
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return f"{module}:{qualname}" if found is obj else None


def encode(obj: Any) -> str:
    """How a config writes a class or function: its :func:`reference`, else its name by value (see :func:`pickles`).

    An object cloudpickle cannot pickle is written as ``"module:qualname"``, with a
    warning that no other process can import it.

    Args:
        obj: a class or a function.

    Returns:
        The reference, or the name it is written by value under.
    """
    named = reference(obj)
    if named is not None:
        return named
    known = _BY_ID.get(id(obj))
    if known is not None:
        return known[1]
    path = f"{getattr(obj, '__module__', None)}:{getattr(obj, '__qualname__', type(obj).__name__)}"
    import cloudpickle  # gymnasium's dependency too

    try:
        data = cloudpickle.dumps(obj)
    except Exception as exc:  # whatever the object holds may refuse to be pickled
        logger.warning(
            "%s cannot be written by value (cloudpickle: %s: %s); it is written as its path, which other processes "
            "(Tune trials, a checkpoint's reader) cannot import: define it in a module",
            path,
            type(exc).__name__,
            exc,
        )
        return path
    return _remember(obj, path, base64.b64encode(data).decode("ascii"))


def pickles(data: Any) -> dict[str, str]:
    """The table of a config dict: the pickle of every name in ``data`` that :func:`encode` wrote by value.

    Args:
        data: what ``to_dict()`` wrote (dicts, lists, strings, ...).

    Returns:
        ``{name: base64 pickle}``, empty when nothing was written by value.
    """
    found: dict[str, str] = {}
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and item in _BY_NAME:
            found[item] = _BY_NAME[item][1]
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


def table_of(config: dict[str, Any]) -> dict[str, str]:
    """A config dict's table of objects written by value (empty if it has none).

    Raises:
        ConfigError: the table is not a dict of names to pickles (base64 text).
    """
    table = config.get(TABLE_KEY, {})
    if not isinstance(table, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
        raise ConfigError(f"{TABLE_KEY} must map the names of objects written by value to their pickles (base64 text)")
    return table


@contextlib.contextmanager
def trusted() -> Iterator[None]:
    """Within this block, objects written by value that this process did not write are unpickled (running their code)."""
    previous = _TRUSTED.set(True)
    try:
        yield
    finally:
        _TRUSTED.reset(previous)


def written_here(text: str) -> bool:
    """Whether this process wrote (or read) the object of this pickle: it turns back into that object, unpickling nothing.

    Args:
        text: a pickle from a table (base64 text).
    """
    return text in _BY_PICKLE


def restore(values: dict[str, Any], max_depth: int = 32) -> dict[str, Any]:
    """A config dict without its table, each name written by value (in dicts and lists too) its object again.

    Args:
        values: options by name, as ``to_dict()`` wrote them; without a table they are returned as they are.
        max_depth: how deep to look into nested dicts and lists (a config refuses deeper ones anyway).

    Returns:
        The options; containers that held a name are copies.

    Raises:
        ConfigError: a name this process did not write, outside :func:`trusted`, or a pickle that does not load.
    """
    if TABLE_KEY not in values:
        return values
    table = table_of(values)
    memo: dict[int, Any] = {}

    def walk(item: Any, where: str, depth: int) -> Any:
        if isinstance(item, str):
            return _object(item, table[item], where) if item in table else item
        if depth >= max_depth or not isinstance(item, (dict, list, tuple)):
            return item
        if id(item) in memo:
            return memo[id(item)]
        memo[id(item)] = item  # a container inside itself stays as it is
        if isinstance(item, dict):
            new: Any = {key: walk(element, f"{where}.{key}", depth + 1) for key, element in item.items()}
        else:
            new = [walk(element, f"{where}[{i}]", depth + 1) for i, element in enumerate(item)]
            new = tuple(new) if isinstance(item, tuple) else new
        memo[id(item)] = new
        return new

    return {key: walk(value, str(key), 1) for key, value in values.items() if key != TABLE_KEY}


def _object(name: str, text: str, where: str) -> Any:
    if text in _BY_PICKLE:
        return _BY_PICKLE[text]
    if not _TRUSTED.get():
        raise ConfigError(
            f"{where}={name!r} is written by value (pickled by cloudpickle, as corral writes what a script defines); "
            "unpickling it would run the code it holds, which corral does only in the Tune trials of the run that "
            "wrote it and for a checkpoint loaded with trust_code=True. Pass the object itself"
        )
    try:
        obj = pickle.loads(base64.b64decode(text, validate=True))  # trusted: see the module docstring
    except Exception as exc:  # a damaged pickle, or one that needs a module this process lacks
        raise ConfigError(f"{where}={name!r}, written by value, cannot be unpickled here: {type(exc).__name__}: {exc}") from None
    _remember(obj, name, text)
    return obj


def _remember(obj: Any, name: str, text: str) -> str:
    """Keep ``obj`` under ``name`` (or ``name#2``, ... if another object has it); returns the name it is kept under."""
    base, number = name.partition("#")[0], 1
    while name in _BY_NAME and _BY_NAME[name][0] is not obj:
        number += 1
        name = f"{base}#{number}"
    _BY_ID[id(obj)] = (obj, name, text)
    _BY_NAME[name] = (obj, text)
    _BY_PICKLE[text] = obj
    return name
