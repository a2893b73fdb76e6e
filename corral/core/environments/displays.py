"""What the env runners need of a display that shows or records a sub-environment (``render_env``, ``record_env``).

The displays themselves are an integration (:mod:`corral.integrations.rendering`),
asked through the ``sub_environment_display`` seam; the core only calls them.
"""

from __future__ import annotations

from typing import Any, Protocol


class SubEnvironmentDisplay(Protocol):
    """Shows or records one sub-environment: made in :attr:`render_mode`, checked, then wrapped."""

    @property
    def render_mode(self) -> str:
        """The ``render_mode`` the sub-environment is made in (``"human"``, ``"rgb_array"``)."""
        ...

    def check(self, env_id: str | None, label: str) -> None:
        """Raise before any env is made where the display cannot work (a library missing, say).

        Args:
            env_id: the gymnasium id the env spec names, or None for a class or creator.
            label: the env's name, for messages.
        """
        ...

    def wrap(self, env: Any, label: str) -> Any:
        """``env`` as it is shown or recorded.

        Args:
            env: the sub-environment, made in :attr:`render_mode`.
            label: the env's name, for messages.

        Returns:
            The wrapped env, stepped in place of ``env``.
        """
        ...
