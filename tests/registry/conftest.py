"""Throwaway plugin distributions for registry tests, made without pip.

A distribution is just a ``<name>-<version>.dist-info`` folder (``METADATA``
and ``entry_points.txt``) next to its modules on ``sys.path``; writing those
into ``tmp_path`` lets each test build exactly the plugin environment it needs.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import corral.registry as registry

REPO_ROOT = Path(__file__).resolve().parents[2]

ALGORITHM_SOURCE = '''
class {cls}:
    """A stand-in algorithm: only what the registry relies on."""

    @classmethod
    def get_default_config(cls):
        return {{"algorithm": "{cls}"}}
'''


class PluginEnv:
    """Writes fake distributions under one directory that is on ``sys.path``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._packages: set[str] = set()

    def add_dist(
        self,
        dist: str,
        version: str = "1.0",
        *,
        entry_points: Mapping[str, Mapping[str, str]] | None = None,
        modules: Mapping[str, str] | None = None,
        root: Path | None = None,
        requires: tuple[str, ...] = (),
    ) -> Path:
        """Write a distribution's metadata and modules; return its dist-info folder.

        Args:
            dist: The distribution name.
            version: Its version.
            entry_points: ``{group: {name: "module:attr"}}``.
            modules: ``{"pkg.mod": source}``; packages get an ``__init__.py``.
            root: Where to write (default: the directory on ``sys.path``).
            requires: ``Requires-Dist`` lines, e.g. ``("corral>=9",)``.
        """
        root = root or self.root
        for module, source in (modules or {}).items():
            parts = module.split(".")
            self._packages.add(parts[0])
            path = root.joinpath(*parts) / "__init__.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source))
        info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        requirements = "".join(f"Requires-Dist: {r}\n" for r in requires)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n{requirements}")
        lines = []
        for group, eps in (entry_points or {}).items():
            lines.append(f"[{group}]")
            lines += [f"{name} = {value}" for name, value in eps.items()]
            lines.append("")
        (info / "entry_points.txt").write_text("\n".join(lines))
        return info

    def add_algorithm_dist(self, dist: str, version: str, package: str, *names: str) -> None:
        """Write a distribution providing algorithm classes named ``names`` in ``package``."""
        self.add_dist(
            dist,
            version,
            entry_points={"corral.algorithms": {n: f"{package}:{n}" for n in names}},
            modules={package: "".join(ALGORITHM_SOURCE.format(cls=n) for n in names)},
        )

    def forget_modules(self) -> None:
        """Drop the fake packages from ``sys.modules`` so no test sees another's."""
        for name in list(sys.modules):
            if name.split(".")[0] in self._packages:
                del sys.modules[name]


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PluginEnv]:
    """A fresh plugin environment: tmp_path first on sys.path, registry rebuilt."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv(registry.DISABLE_ENV_VAR, raising=False)
    env = PluginEnv(site)
    registry.refresh()
    yield env
    registry.refresh()
    env.forget_modules()


def ours(infos: list[registry.PluginInfo], *dists: str) -> list[registry.PluginInfo]:
    """Keep only records from the given distributions (corral's own may be installed)."""
    return [i for i in infos if i.dist in dists]
