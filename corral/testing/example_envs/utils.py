"""Mixins that count the joint actions of matrix games, from RLlib's ``examples.env.utils`` (``interfaces`` and ``mixins``).

A matrix-game env (RLlib's iterated prisoner's dilemma and its kin) mixes one
of these in, calls ``_init_info`` once, ``_accumulate_info`` with each step's
actions, and puts ``_get_episode_info()`` (how often each joint action was
played) into the last step's infos, then ``_reset_info`` at reset.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

__all__ = ["InfoAccumulationInterface", "NPlayersNDiscreteActionsInfoMixin", "TwoPlayersTwoActionsInfoMixin"]


class InfoAccumulationInterface(ABC):
    """The four methods through which an env accumulates statistics over an episode and reports them."""

    @abstractmethod
    def _init_info(self) -> None:
        raise NotImplementedError

    @abstractmethod
    def _reset_info(self) -> None:
        raise NotImplementedError

    @abstractmethod
    def _get_episode_info(self) -> dict[str, Any]:
        raise NotImplementedError

    @abstractmethod
    def _accumulate_info(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError


class TwoPlayersTwoActionsInfoMixin(InfoAccumulationInterface, ABC):
    """Counts the four joint actions of a two-player, two-action game (0 cooperate, 1 defect).

    ``_get_episode_info`` returns the fraction of the episode's steps that were
    ``"CC"``, ``"DD"``, ``"CD"`` and ``"DC"`` (player 0's action first).
    """

    def _init_info(self) -> None:
        self.cc_count: list[bool] = []
        self.dd_count: list[bool] = []
        self.cd_count: list[bool] = []
        self.dc_count: list[bool] = []

    def _reset_info(self) -> None:
        for counts in (self.cc_count, self.dd_count, self.cd_count, self.dc_count):
            counts.clear()

    def _get_episode_info(self) -> dict[str, Any]:
        return {
            "CC": np.mean(self.cc_count).item(),
            "DD": np.mean(self.dd_count).item(),
            "CD": np.mean(self.cd_count).item(),
            "DC": np.mean(self.dc_count).item(),
        }

    def _accumulate_info(self, ac0: Any, ac1: Any) -> None:
        self.cc_count.append(ac0 == 0 and ac1 == 0)
        self.cd_count.append(ac0 == 0 and ac1 == 1)
        self.dc_count.append(ac0 == 1 and ac1 == 0)
        self.dd_count.append(ac0 == 1 and ac1 == 1)


class NPlayersNDiscreteActionsInfoMixin(InfoAccumulationInterface, ABC):
    """Counts the joint actions (action profiles) of a game of any number of players with discrete actions.

    A profile is named by the players' actions joined with ``_`` (``"0_1_1"``);
    ``_get_episode_info`` returns the fraction of steps each profile played was
    played (empty before the first step).
    """

    def _init_info(self) -> None:
        self.info_counters: dict[str, int] = {"n_steps_accumulated": 0}

    def _reset_info(self) -> None:
        self.info_counters = {"n_steps_accumulated": 0}

    def _get_episode_info(self) -> dict[str, Any]:
        steps = self.info_counters["n_steps_accumulated"]
        if steps == 0:
            return {}
        return {profile: count / steps for profile, count in self.info_counters.items() if profile != "n_steps_accumulated"}

    def _accumulate_info(self, *actions: Any) -> None:
        profile = "_".join(str(action) for action in actions)
        self.info_counters[profile] = self.info_counters.get(profile, 0) + 1
        self.info_counters["n_steps_accumulated"] += 1
