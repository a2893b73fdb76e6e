"""A learner thread: updates run in a thread of their own while the main thread samples (RLlib's IMPALA ``LearnerThread``).

The main thread puts work (a train batch and what goes with it) into a
bounded queue; the thread takes one item at a time and runs the update on
it. The update runs in the thread, so whatever it must read consistently
(the weights the env runners get next) it copies there, between updates.

Nothing else may touch the policies while an update runs: whoever reads or
replaces them (a checkpoint, an evaluation, ``add_policy``) first calls
:meth:`LearnerThread.wait_idle`, which returns once the queue is empty and
the thread waits. An error in an update ends the thread and drops what was
queued; the main thread raises it at its next call.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

import torch

from corral.errors import LearnerError

Work = TypeVar("Work")
Result = TypeVar("Result")


class LearnerThread(Generic[Work, Result]):
    """Runs ``update`` on queued work in a daemon thread; see the module docstring.

    Args:
        update: one update; it runs in the thread, where it may touch the policies.
        queue_size: items that may wait for the thread.
        timeout_s: how long :meth:`put` waits for room in a full queue before it
            decides the thread is stuck (RLlib's ``learner_queue_timeout``).
    """

    def __init__(self, update: Callable[[Work], Result], *, queue_size: int, timeout_s: float) -> None:
        self._update = update
        self.queue_size, self.timeout_s = queue_size, timeout_s
        self._queue: deque[tuple[Work, int]] = deque()
        self._finished: list[Result] = []
        self._busy = False  # an update is running
        self._error: BaseException | None = None
        self._stopping = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    @property
    def queued(self) -> int:
        """Items waiting for the thread."""
        return len(self._queue)

    def put(self, work: Work) -> None:
        """Queue an item, waiting while the queue is full; the thread starts with the first.

        Args:
            work: what the update takes.

        Raises:
            LearnerError: the queue stayed full for ``timeout_s`` seconds.
            BaseException: what an earlier update raised.
        """
        if self._thread is None:
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="corral-learner-thread", daemon=True)
            self._thread.start()
        deadline = time.monotonic() + self.timeout_s
        with self._changed:
            while len(self._queue) >= self.queue_size and self._error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LearnerError(
                        f"the learner thread took no train batch for {self.timeout_s:g} s while {len(self._queue)} "
                        "waited (learner_queue_timeout): an update is stuck, or slower than that; raise "
                        "learner_queue_timeout if updates take this long"
                    )
                self._changed.wait(left)
            self._raise_error()
            self._queue.append((work, torch.get_num_threads()))
            self._changed.notify_all()

    def finished(self) -> list[Result]:
        """What the updates finished since the last call gave, oldest first (without waiting).

        Raises:
            BaseException: what an update raised.
        """
        with self._changed:
            self._raise_error()
            done, self._finished = self._finished, []
            return done

    def wait_idle(self) -> None:
        """Wait until every queued item is learned on and no update runs (at once when called by an update).

        Raises:
            BaseException: what an update raised.
        """
        if threading.current_thread() is self._thread:
            return
        with self._changed:
            self._changed.wait_for(lambda: self._error is not None or not (self._queue or self._busy))
            self._raise_error()

    def stop(self) -> None:
        """End the thread after the update it runs; queued items are dropped."""
        with self._changed:
            self._stopping = True
            self._queue.clear()
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            self._thread = None  # it ended; the next put starts another
            raise error

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._stopping or bool(self._queue))
                if self._stopping:
                    return
                work, threads = self._queue.popleft()
                self._busy = True
                self._changed.notify_all()  # room in the queue
            if torch.get_num_threads() != threads:  # OpenMP counts threads per calling thread: use the main thread's
                torch.set_num_threads(threads)
            try:
                result = self._update(work)
            except BaseException as exc:  # handed to the main thread, which raises it
                with self._changed:
                    self._error, self._busy = exc, False
                    self._queue.clear()
                    self._changed.notify_all()
                return
            with self._changed:
                self._finished.append(result)
                self._busy = False
                self._changed.notify_all()
