"""Every random number an algorithm draws comes from generators it owns, derived from its one seed.

torch's and numpy's process-wide generators are shared by everything in the
process: two algorithms seeded alike would disturb each other, and a resumed
run could not put them back as they were. So each consumer gets its own
generator, derived from the algorithm's ``seed`` and a path naming the
consumer with :class:`numpy.random.SeedSequence`, which keeps the streams
independent however many there are:

- ``("policy", policy_id, stream, worker_index)``: a policy copy's
  ``torch.Generator`` (action sampling, exploration, minibatch order,
  reparameterised samples) and numpy ``Generator``; the learner's copy is
  ``("sampling", 0)``, a remote runner's copy its stream (``"sampling"`` or
  ``"evaluation"``) and worker index;
- ``("runner", stream, worker_index)``: an env runner's numpy ``Generator``,
  which draws the seed of every full reset of its environments;
- ``("replay", policy_id)``: a replay buffer's sampling;
- ``("algorithm",)``: ``Algorithm.rng``, free for plugins.

A model's initial weights are drawn inside :func:`isolated_torch_seed`, with the
process's generator forked and restored, so building an algorithm leaves it
as it was. With ``seed=None`` every generator starts from fresh OS entropy.
Every generator's state goes into checkpoints.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator

import numpy as np
import torch


def seed_sequence(seed: int | None, *path: str | int) -> np.random.SeedSequence:
    """The seed sequence of one consumer of randomness, e.g. ``seed_sequence(0, "policy", "default_policy", 0)``.

    Args:
        seed: the algorithm's seed; None draws fresh entropy from the OS.
        *path: names the consumer; strings are hashed to stable integers.
    """
    key = tuple(p if isinstance(p, int) else zlib.crc32(p.encode("utf-8")) for p in path)
    return np.random.SeedSequence(entropy=seed, spawn_key=key)


def numpy_generator(seed: int | None, *path: str | int) -> np.random.Generator:
    """A numpy ``Generator`` for the consumer named by ``path``.

    Args:
        seed: the algorithm's seed; None draws fresh entropy from the OS.
        *path: names the consumer, e.g. ``("runner", "sampling", 0)``.

    Returns:
        A new PCG64 generator; the same ``seed`` and ``path`` give the same stream.
    """
    return np.random.default_rng(seed_sequence(seed, *path))


def torch_generator(seed: int | None, *path: str | int, device: torch.device | str = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` for the consumer named by ``path``.

    Args:
        seed: the algorithm's seed; None draws fresh entropy from the OS.
        *path: names the consumer, e.g. ``("policy", "default_policy", "sampling", 0, "torch")``.
        device: where the generator draws; it must be the device of the tensors it fills.

    Returns:
        A new generator seeded with :func:`int_seed` of ``seed`` and ``path``.
    """
    generator = torch.Generator(device=device)
    generator.manual_seed(int_seed(seed, *path))
    return generator


def int_seed(seed: int | None, *path: str | int, bits: int = 64) -> int:
    """A plain integer seed of ``bits`` bits (32 for env resets) for the consumer named by ``path``.

    Args:
        seed: the algorithm's seed; None draws fresh entropy from the OS.
        *path: names the consumer, e.g. ``("replay", "default_policy")``.
        bits: 64 for a 64-bit seed; any other value gives a 32-bit one.

    Returns:
        A non-negative int below ``2**64`` (``bits=64``) or ``2**32`` (any other ``bits``).
    """
    dtype = np.uint64 if bits == 64 else np.uint32
    return int(seed_sequence(seed, *path).generate_state(1, dtype)[0])


@contextlib.contextmanager
def isolated_torch_seed(seed: int) -> Iterator[None]:
    """Run a block with torch's CPU generator seeded to ``seed``, and put the process's state back afterwards.

    For code that draws from the global generator without a ``generator=``
    argument, such as ``torch.nn.init`` in any model's constructor.
    """
    with torch.random.fork_rng(devices=[]):
        # the CPU generator alone: torch.manual_seed would also queue a seed for CUDA (formatting a
        # stack trace on every call while CUDA is not initialised), which fork_rng(devices=[]) does not restore
        torch.default_generator.manual_seed(seed)
        yield


def generator_state(generator: np.random.Generator) -> dict[str, object]:
    """A numpy generator's state, as JSON-serialisable data."""
    return dict(generator.bit_generator.state)


def set_generator_state(generator: np.random.Generator, state: object) -> None:
    """Restore :func:`generator_state` into ``generator``.

    Args:
        generator: the generator to change.
        state: what :func:`generator_state` returned (read back from a checkpoint).

    Raises:
        ValueError: the state is not one of this generator's kind.
    """
    if not isinstance(state, dict) or state.get("bit_generator") != generator.bit_generator.state["bit_generator"]:
        raise ValueError(f"not a {generator.bit_generator.state['bit_generator']} generator state")
    try:
        generator.bit_generator.state = state
    except (TypeError, KeyError) as exc:
        raise ValueError(f"invalid generator state: {exc}") from None


def set_torch_generator_state(generator: torch.Generator, state: object) -> None:
    """Restore a ``torch.Generator``'s ``get_state()``.

    Args:
        generator: the generator to change.
        state: what its ``get_state()`` returned (read back from a checkpoint).

    Raises:
        ValueError: the state is not a byte tensor of this generator's size
            (torch would crash the process on some malformed states).
    """
    expected = generator.get_state()
    if not isinstance(state, torch.Tensor) or state.dtype != torch.uint8 or state.shape != expected.shape:
        raise ValueError(f"a torch generator state must be a uint8 tensor of shape {tuple(expected.shape)}")
    generator.set_state(state)
