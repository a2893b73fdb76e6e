"""What a Learner logs during an update (RLlib's ``MetricsLogger`` as a Learner uses it), and how it becomes stats."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import torch


class LearnerMetrics:
    """What a Learner logs during an update (RLlib's ``MetricsLogger`` as a Learner uses it), reduced into its stats.

    Values logged during one update are reduced when it ends, each key by its
    own ``reduce``; ``window`` keeps the last that many of them. Each update
    starts afresh: where RLlib's default keeps a moving average across
    updates, corral reports the update's own mean.
    """

    _REDUCE: ClassVar[dict[str, Callable[[list[float]], float]]] = {
        "mean": lambda values: sum(values) / len(values),
        "sum": sum,
        "min": min,
        "max": max,
    }

    def __init__(self) -> None:
        self._values: dict[str, tuple[list[float], str | None, int | None]] = {}

    def log_value(
        self,
        key: str | tuple[str, ...],
        value: Any,
        reduce: str | None = "mean",
        window: int | None = None,
        ema_coeff: float | None = None,
        clear_on_reduce: bool = False,
    ) -> None:
        """Log one value of a metric, reduced with the others logged in the same update.

        Args:
            key: the metric's name; RLlib's ``(module_id, name)`` is the name (the stats are the policy's own).
            value: a number or a scalar tensor.
            reduce: ``"mean"``, ``"sum"``, ``"min"``, ``"max"``, or None for the last value.
            window: reduce only the last this many values logged in the update.
            ema_coeff: RLlib's moving average across updates, which corral does not keep: it must stay None.
            clear_on_reduce: RLlib's choice to start afresh after each reduction, which corral always does.

        Raises:
            ValueError: ``reduce`` is none of those, or an ``ema_coeff`` was given.
        """
        if reduce is not None and reduce not in self._REDUCE:
            raise ValueError(f"reduce={reduce!r}; Learner metrics reduce by one of {sorted(self._REDUCE)} or None (last value)")
        if ema_coeff is not None:
            raise ValueError(
                f"ema_coeff={ema_coeff!r}: corral reduces a Learner's metrics over each update (the mean, or of the last "
                "window values), not as a moving average across updates; drop ema_coeff, or give window"
            )
        name = _metric_name(key)
        values = self._values.setdefault(name, ([], reduce, window))[0]
        values.append(float(value.detach()) if isinstance(value, torch.Tensor) else float(value))
        self._values[name] = (values, reduce, window)

    def log_dict(self, stats: Mapping[str, Any], *, key: str | tuple[str, ...] | None = None, **kwargs: Any) -> None:
        """Log several values at once, each as :meth:`log_value` would.

        Args:
            stats: values by name (nested dicts are flattened into ``a/b`` names).
            key: a prefix for their names (a module id is dropped, as in :meth:`log_value`).
            **kwargs: :meth:`log_value`'s ``reduce``, ``window``, ``ema_coeff`` and ``clear_on_reduce``.
        """
        for name, value in stats.items():
            full = name if key is None else (*(key if isinstance(key, tuple) else (key,)), name)
            if isinstance(value, Mapping):
                self.log_dict(value, key=full, **kwargs)
            else:
                self.log_value(full, value, **kwargs)

    def peek(self, key: str | tuple[str, ...]) -> float:
        """A metric's value as the update's end would reduce it now.

        Raises:
            KeyError: nothing was logged under ``key`` in this update.
        """
        values, reduce, window = self._values[_metric_name(key)]
        kept = values[-window:] if window else values
        return kept[-1] if reduce is None else float(self._REDUCE[reduce](kept))

    def reduce(self) -> dict[str, float]:
        """Every metric logged since the last call, reduced; the log starts empty again."""
        reduced = {name: self.peek(name) for name in self._values}
        self._values = {}
        return reduced


def _metric_name(key: str | tuple[str, ...]) -> str:
    if isinstance(key, str):
        return key
    parts = [str(part) for part in key]
    return "/".join(parts[1:] if len(parts) > 1 else parts)  # (module_id, name, ...): the policy's own stats
