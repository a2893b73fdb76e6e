"""``corral new-plugin NAME``: write a plugin distribution that installs, trains and passes the conformance kit.

The files are templates in ``templates/`` (``string.Template`` syntax), so what
a new plugin looks like can be read and changed without reading this code.
"""

from __future__ import annotations

import keyword
import re
from importlib import resources
from pathlib import Path
from string import Template

from corral.errors import ConfigError
from corral.plugin_api import PLUGIN_API_VERSION

# Where each template goes in the new distribution ({package} is the import name).
_LAYOUT = {
    "pyproject.toml": "pyproject.toml.tmpl",
    "README.md": "README.md.tmpl",
    "src/{package}/__init__.py": "__init__.py.tmpl",
    "src/{package}/config.py": "config.py.tmpl",
    "src/{package}/policy.py": "policy.py.tmpl",
    "src/{package}/algorithm.py": "algorithm.py.tmpl",
    "tests/test_conformance.py": "test_conformance.py.tmpl",
}


def new_plugin(name: str, directory: str | Path = ".") -> Path:
    """Write the distribution ``corral-<name>`` for the algorithm ``name`` into ``directory``.

    Args:
        name: The algorithm's registered name and class name, e.g. ``"MyPG"``:
            a Python identifier starting with a letter.
        directory: Where to create the distribution's folder.

    Returns:
        The new folder, ``<directory>/corral-<name lower-cased>``.

    Raises:
        ConfigError: ``name`` is not a usable class name, an installed algorithm has it (the new
            plugin would shadow it, or be shadowed), or the folder exists.
    """
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name) or keyword.iskeyword(name):
        raise ConfigError(
            f"plugin name {name!r} must be a Python identifier starting with a letter "
            "(it becomes the algorithm's class and registered name), e.g. 'MyPG'"
        )
    from corral.registry import list_algorithms  # installed metadata only: nothing is imported

    taken = {info.name.lower(): info for info in list_algorithms()}
    if name.lower() in taken:
        found = taken[name.lower()]
        raise ConfigError(
            f"an installed algorithm is named {found.name!r} (from {found.dist}); "
            f"give the new plugin a name of its own, e.g. 'My{name}'"
        )
    dist = f"corral-{name.lower().replace('_', '-')}"
    package = f"corral_{name.lower()}"
    target = Path(directory).expanduser() / dist
    if target.exists():
        raise ConfigError(f"{target} already exists; choose another --dir or remove it first")
    from corral import __version__

    values = {
        "name": name,
        "dist": dist,
        "package": package,
        "corral_version": __version__,
        "corral_api": PLUGIN_API_VERSION,
    }
    templates = resources.files(__name__) / "templates"
    for relative, template in _LAYOUT.items():
        path = target / relative.format(package=package)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template((templates / template).read_text()).substitute(values))
    return target
