"""The wire protocol between a policy server and its clients: JSON objects of numbers, strings and arrays, checked.

RLlib's policy server unpickles what a client sends, so any caller that
reaches its port runs code in the training process. corral's server reads a
JSON object instead and checks every field before anything else happens: the
command and its fields, episode ids, finite rewards, and observations and
actions against the policy's spaces (shape, dtype, bounds). A request that
fails any check gets a 4xx status with the reason (:class:`ProtocolError`),
and nothing of it is used. The commands are RLlib's (``START_EPISODE``,
``GET_ACTION``, ``LOG_ACTION``, ``LOG_RETURNS``, ``END_EPISODE``; and for local
inference ``GET_WORKER_ARGS``, ``GET_WEIGHTS``, ``REPORT_SAMPLES``).

``REPORT_SAMPLES`` carries several messages, handled in order: what a client
that acts itself did, or, from a client whose server acts, the returns it
logged since its last call followed by the call itself (one request a step
where RLlib's client makes two). It may end with a ``GET_ACTION``, and its
answer is its last message's.

A request body is one JSON object::

    {"command": "GET_ACTION", "episode_id": "a1b2", "observation": [0.01, -0.2, 0.03, 0.1]}

An observation or action is the JSON form of a value of its space: a number
for ``Discrete``, a (nested) list for ``Box``, ``MultiDiscrete`` and
``MultiBinary``, an object for ``Dict`` and a list for ``Tuple``. ``NaN`` and
``Infinity`` (which Python's JSON reader would take) are refused.

A multi-agent server's episodes (a ``multi_agent()`` config) take
observations, actions and rewards as objects by agent id (ids are JSON
strings), each agent's values checked against the spaces of the policy its
``policy_mapping_fn`` picks; ``LOG_RETURNS`` may carry ``dones``, the agents
done before the episode ends::

    {"command": "LOG_RETURNS", "episode_id": "a1b2", "reward": {"left": 1.0, "right": 0.0}, "dones": {"right": true}}
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

import gymnasium as gym
import numpy as np

from corral.core.common.sample_batch import SampleBatch
from corral.errors import CorralError

ACTION_LOGP = SampleBatch.ACTION_LOGP
"""LOG_ACTION's field for the log-probability the client gave its action: the batch column's name"""

START_EPISODE = "START_EPISODE"
GET_ACTION = "GET_ACTION"
LOG_ACTION = "LOG_ACTION"
LOG_RETURNS = "LOG_RETURNS"
END_EPISODE = "END_EPISODE"
GET_WORKER_ARGS = "GET_WORKER_ARGS"
GET_WEIGHTS = "GET_WEIGHTS"
REPORT_SAMPLES = "REPORT_SAMPLES"

FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    START_EPISODE: (frozenset(), frozenset({"episode_id", "training_enabled"})),
    GET_ACTION: (frozenset({"episode_id", "observation"}), frozenset()),
    LOG_ACTION: (frozenset({"episode_id", "observation", "action"}), frozenset({"action_prob", ACTION_LOGP})),
    LOG_RETURNS: (frozenset({"episode_id", "reward"}), frozenset({"info", "dones"})),
    END_EPISODE: (frozenset({"episode_id", "observation"}), frozenset()),
    GET_WORKER_ARGS: (frozenset(), frozenset()),
    GET_WEIGHTS: (frozenset(), frozenset()),
    REPORT_SAMPLES: (frozenset({"samples"}), frozenset()),
}
"""each command's required and optional fields besides ``command``"""

DEFAULT_MAX_REQUEST_BYTES = 1 << 20
"""the largest request body a server reads by default (1 MiB)"""

_EPISODE_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


class ProtocolError(CorralError, ValueError):
    """A request the server refuses: ``status`` is the HTTP status it answers with, the message says why.

    Args:
        status: the HTTP status: 4xx for a request refused (400 malformed, 401 no or wrong token, 404 unknown
            episode, 409 in conflict with the episode's state, 413 too large), 503 for a server that is stopping.
        reason: what was wrong, and what would be right.
    """

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclasses.dataclass(frozen=True)
class Request:
    """One checked request; observations and actions are still JSON values until checked against a space.

    Args:
        command: one of :data:`FIELDS`.
        fields: the command's fields as sent (every required one, and the optional ones given).
    """

    command: str
    fields: dict[str, Any]


def decode_request(body: bytes, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> Request:
    """Read and check a request body: a JSON object with a known command, its fields, and well-formed values.

    Observations, actions and samples are checked against the policy's spaces
    later, by whoever knows them (:func:`space_value`).

    Args:
        body: the request's bytes.
        max_bytes: the largest body accepted.

    Returns:
        The request.

    Raises:
        ProtocolError: 413 for a body over ``max_bytes``; 400 for anything else wrong, naming it.
    """
    if len(body) > max_bytes:
        raise too_large(len(body), max_bytes)
    try:
        message = json.loads(body.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        raise ProtocolError(400, "the request is not UTF-8 JSON (pickled objects are never read)") from None
    except RecursionError:
        raise ProtocolError(400, "the request nests too deeply") from None
    except ValueError as exc:  # json.JSONDecodeError, and the constants refused
        raise ProtocolError(400, f"the request is not valid JSON: {exc}") from None
    return check_message(message)


REPORTED = frozenset({START_EPISODE, LOG_ACTION, LOG_RETURNS, END_EPISODE})
"""the commands a REPORT_SAMPLES request carries: what a client did, in order (it may end with a GET_ACTION)"""


def report_body(messages: list[bytes]) -> bytes:
    """A ``REPORT_SAMPLES`` request of encoded messages, in order.

    Args:
        messages: each message as :func:`encode` wrote it.

    Returns:
        The request's body.
    """
    return b'{"command":"REPORT_SAMPLES","samples":[' + b",".join(messages) + b"]}"


def check_message(message: Any, within: str = "") -> Request:
    """Check one decoded message: a JSON object with a known command, exactly its fields, well-formed values.

    Args:
        message: what ``json.loads`` gave.
        within: where it was found, for errors (``"REPORT_SAMPLES' samples[3]: "``).

    Returns:
        The request; a ``REPORT_SAMPLES``'s ``samples`` are a list of checked requests.

    Raises:
        ProtocolError: 400 naming what is wrong.
    """
    if not isinstance(message, dict):
        raise ProtocolError(400, f"{within}the request must be a JSON object, not {type(message).__name__}")
    message = dict(message)
    command = message.pop("command", None)
    if command not in FIELDS:
        raise ProtocolError(400, f"unknown command {command!r}; the commands are {sorted(FIELDS)}")
    required, optional = FIELDS[command]
    missing, unknown = required - set(message), set(message) - required - optional
    if missing or unknown:
        what = [f"missing {sorted(missing)}" if missing else "", f"unknown {sorted(unknown)}" if unknown else ""]
        raise ProtocolError(
            400,
            f"{within}{command}: {' and '.join(w for w in what if w)}; it takes {sorted(required)} and optionally "
            f"{sorted(optional)}",
        )
    try:
        _check_fields(command, message)
    except ProtocolError as refused:
        raise ProtocolError(refused.status, f"{within}{refused}") from None
    if command == REPORT_SAMPLES:
        samples = message["samples"]
        if not isinstance(samples, list):
            raise ProtocolError(400, "REPORT_SAMPLES: samples must be a list of START_EPISODE, LOG_ACTION, ... messages")
        message["samples"] = [check_message(sample, f"REPORT_SAMPLES' samples[{i}]: ") for i, sample in enumerate(samples)]
        commands = [sample.command for sample in message["samples"]]
        if not set(commands[:-1]) <= REPORTED or (commands[-1:] and commands[-1] not in REPORTED | {GET_ACTION}):
            raise ProtocolError(
                400, f"REPORT_SAMPLES carries only {sorted(REPORTED)}, and may end with a GET_ACTION (whose answer is its own)"
            )
    return Request(command, message)


def too_large(size: int, max_bytes: int) -> ProtocolError:
    """The 413 refusal of a request of ``size`` bytes where at most ``max_bytes`` are read.

    Args:
        size: the request's bytes (its body's, or its ``Content-Length``).
        max_bytes: the largest body accepted.

    Returns:
        The error to raise.
    """
    return ProtocolError(413, f"the request has {size:,} bytes; this server reads at most {max_bytes:,}")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number this protocol takes (values must be finite)")


def _check_fields(command: str, fields: dict[str, Any]) -> None:
    """The checks that need no space: ids, flags, rewards, probabilities and infos."""
    episode_id = fields.get("episode_id")
    if episode_id is not None and not (isinstance(episode_id, str) and _EPISODE_ID.fullmatch(episode_id)):
        raise ProtocolError(400, f"{command}: episode_id must be 1-128 letters, digits or '_.:-', not {episode_id!r:.60}")
    if "training_enabled" in fields and not isinstance(fields["training_enabled"], bool):
        raise ProtocolError(400, f"{command}: training_enabled must be true or false")
    if "reward" in fields:
        reward = fields["reward"]
        rewards = reward.values() if isinstance(reward, dict) else [reward]  # a multi-agent reward by agent id
        if not all(_is_finite_number(value) for value in rewards):
            raise ProtocolError(
                400, f"{command}: reward must be a finite number (or an object of them by agent), not {reward!r:.60}"
            )
    if "action_prob" in fields and not (_is_finite_number(fields["action_prob"]) and 0 < fields["action_prob"] <= 1):
        raise ProtocolError(400, f"{command}: action_prob must be a probability in (0, 1]")
    if ACTION_LOGP in fields and not _is_finite_number(fields[ACTION_LOGP]):
        raise ProtocolError(400, f"{command}: action_logp must be a finite number (a log-probability or log-density)")
    if "action_prob" in fields and ACTION_LOGP in fields:
        raise ProtocolError(400, f"{command}: give action_prob or action_logp, not both")
    if "info" in fields and not isinstance(fields["info"], dict):
        raise ProtocolError(400, f"{command}: info must be a JSON object")
    if "dones" in fields and not (
        isinstance(fields["dones"], dict) and all(isinstance(d, bool) for d in fields["dones"].values())
    ):
        raise ProtocolError(400, f"{command}: dones must be an object of true/false by agent id")


def _is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_space_supported(space: gym.Space[Any], what: str) -> None:
    """Refuse, before a server starts, a space whose values have no JSON form here.

    Args:
        space: an observation or action space.
        what: its name in the error (``"the observation space"``).

    Raises:
        ProtocolError: the space, or one inside it, is not Box, Discrete, MultiDiscrete, MultiBinary, Dict or Tuple.
    """
    if isinstance(space, gym.spaces.Dict):
        for key, part in space.spaces.items():
            check_space_supported(part, f"{what}[{key!r}]")
    elif isinstance(space, gym.spaces.Tuple):
        for index, part in enumerate(space.spaces):
            check_space_supported(part, f"{what}[{index}]")
    elif not isinstance(space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        raise ProtocolError(
            400, f"{what} is a {type(space).__name__}: a server takes Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple"
        )


def space_value(value: Any, space: gym.Space[Any], what: str) -> Any:
    """A JSON value as a value of ``space`` (numpy arrays of its dtype), checked to be in it.

    Args:
        value: the JSON value a request holds.
        space: the space it must belong to.
        what: its name in an error (``"GET_ACTION's observation"``).

    Returns:
        The value as ``space.sample()`` would give one.

    Raises:
        ProtocolError: 400 naming what does not fit: the structure, the shape, the dtype, a non-finite number or the
            bounds.
    """
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(value, dict) or set(value) != set(space.spaces):
            keys = sorted(value) if isinstance(value, dict) else type(value).__name__
            raise ProtocolError(400, f"{what} must be an object with the keys {sorted(space.spaces)}, not {keys}")
        return {key: space_value(value[key], part, f"{what}[{key!r}]") for key, part in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        if not isinstance(value, list) or len(value) != len(space.spaces):
            raise ProtocolError(400, f"{what} must be a list of {len(space.spaces)} values")
        return tuple(
            space_value(item, part, f"{what}[{i}]") for i, (item, part) in enumerate(zip(value, space.spaces, strict=True))
        )
    if isinstance(space, gym.spaces.Discrete):
        if not (isinstance(value, int) and not isinstance(value, bool)) or not space.contains(np.int64(value)):
            raise ProtocolError(400, f"{what} must be an integer in [{space.start}, {space.start + space.n}), not {value!r:.60}")
        return np.int64(value)
    array = _array(value, space, what)
    if not space.contains(array):
        raise ProtocolError(400, f"{what} is outside its space {space}")
    return array


def _array(value: Any, space: gym.Space[Any], what: str) -> np.ndarray:
    """A Box's, MultiDiscrete's or MultiBinary's value as an array of the space's shape and dtype."""
    # as objects, a ragged list is an array of lists, which the check below refuses
    numbers = np.asarray(value if isinstance(value, list) else [value], dtype=object)
    flat = list(numbers.reshape(-1))
    integral = not np.issubdtype(space.dtype, np.floating)
    if not all(_is_finite_number(x) and (not integral or isinstance(x, int)) for x in flat):
        kind = "integers" if integral else "finite numbers"
        raise ProtocolError(400, f"{what} must hold {kind} only")
    shape = numbers.shape if isinstance(value, list) else ()
    if shape != space.shape:
        raise ProtocolError(400, f"{what} has shape {shape}; its space's is {space.shape}")
    return np.asarray(value, dtype=space.dtype)


def json_value(value: Any) -> Any:
    """A value of a space (numpy arrays and scalars, dicts, tuples) as JSON: what a server answers with.

    Args:
        value: an action or observation.

    Returns:
        Lists, numbers and objects that :func:`json.dumps` writes.
    """
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(key): json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(item) for item in value]
    return value


def encode(message: dict[str, Any]) -> bytes:
    """A request or response as the bytes sent: JSON, with arrays as lists and no ``NaN``.

    Args:
        message: the fields (numpy values are written as numbers and lists).

    Returns:
        UTF-8 JSON.

    Raises:
        ValueError: a value is not finite.
    """
    return json.dumps(json_value(message), allow_nan=False, separators=(",", ":")).encode("utf-8")
