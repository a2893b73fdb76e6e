"""Experiences in from files (``offline_data(input_=...)``): what to read, checked before training, read in chunks.

``input_`` names a folder, a glob pattern, a file or a list of them, or a
dict mixing ``"sampler"`` (the env runners) with any of these at given
proportions. Files are Parquet (the default) or JSON lines, as
:mod:`corral.integrations.offline.experience_output` writes them; Parquet written
by other tools reads too when its columns are named as corral's (or mapped with
``input_config={"columns": {"obs": "observation", ...}}``).

Before training starts every file's columns are checked against the policy
that is to learn from them: a missing path, a missing column, or a column
whose shape or type does not fit the policy's observation or action space is
a :class:`~corral.errors.ConfigError` naming the file and the column. Values
(an action outside the space, a non-finite observation) are checked as each
file is read, and every column is read under corral's name and in the
policy's dtype, whatever wrote the file (:mod:`~corral.integrations.offline.input_columns`).

Files are read one at a time, in a seeded order that changes every epoch, so
a dataset larger than memory trains as long as each file fits;
``shuffle_buffer_size`` rows are held back and drawn at random. Chunks are
one sample call's rows, so a mix with the sampler is balanced in rows.

This module builds the input and mixes its sources, and turns rows back into
fragments for ``postprocess_inputs``. The rest is a module each, whose names
are importable from here as before: :mod:`~corral.integrations.offline.input_files`
(which files, and reading one), :mod:`~corral.integrations.offline.input_check`
(rows checked against the policy) and
:mod:`~corral.integrations.offline.experience_reader` (chunks, epochs, the shuffle buffer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch, state_in_key, state_out_key
from corral.core.contracts.options.config_checks import ray_data_reading_options
from corral.core.learning.recurrent.sequences import step_inputs
from corral.core.seeding import numpy_generator
from corral.errors import ConfigError
from corral.integrations.offline.experience_output import require_pyarrow
from corral.integrations.offline.experience_reader import ExperienceReader as ExperienceReader, InputReaderSource
from corral.integrations.offline.input_check import InputCheck as InputCheck
from corral.integrations.offline.input_columns import Columns as Columns
from corral.integrations.offline.input_files import (
    INPUT_SUFFIXES as INPUT_SUFFIXES,
    SAMPLER as SAMPLER,
    file_format_of as file_format_of,
    holds_episodes as holds_episodes,
    input_beside as input_beside,
    input_files as input_files,
    read_experiences as read_experiences,
    renamed as renamed,
    table_columns as table_columns,
)

TRANSITION_COLUMNS = (SampleBatch.REWARDS, SampleBatch.NEXT_OBS, SampleBatch.TERMINATEDS, SampleBatch.TRUNCATEDS)
"""what postprocessing (``postprocess_inputs``) and learning from rewards need besides obs and actions"""


# ---------------------------------------------------------------------- #
# rows back into fragments, for postprocess_inputs
# ---------------------------------------------------------------------- #
def episode_order(rows: Columns) -> tuple[Columns, np.ndarray]:
    """Rows in episode order (by ``eps_id``, ``agent_index`` and ``t`` where present), and where each run ends.

    A run is consecutive steps of one agent in one episode; it ends at
    ``terminateds`` or ``truncateds``, where the next row belongs to another
    episode or agent or skips a step, and at the last row.

    Args:
        rows: flat rows, with ``terminateds`` and ``truncateds`` where the file has them (without, only
            the keys part runs).

    Returns:
        ``(ordered rows, ends)``: ``ends`` is a boolean per row, True on the last row of each run.
    """
    keys = [k for k in (SampleBatch.EPS_ID, SampleBatch.AGENT_INDEX, SampleBatch.T) if k in rows]
    count = len(rows[SampleBatch.OBS])
    order = np.lexsort([rows[k] for k in reversed(keys)]) if keys else np.arange(count)
    rows = {k: v[order] for k, v in rows.items()}
    flags = [rows[k] for k in (SampleBatch.TERMINATEDS, SampleBatch.TRUNCATEDS) if k in rows]
    ends = np.logical_or.reduce(flags) if flags else np.zeros(count, dtype=bool)
    if count:
        ends[-1] = True
    same_run = np.ones(max(count - 1, 0), dtype=bool)
    for key in keys:
        step = 1 if key == SampleBatch.T else 0
        same_run &= rows[key][1:] == rows[key][:-1] + step
    ends[:-1] |= ~same_run
    return rows, ends


def as_fragment(rows: Columns) -> tuple[SampleBatch, np.ndarray]:
    """Transitions as one time-major ``[T, 1]`` fragment of the kind env runners make, to postprocess them.

    Rows are put in episode order (by ``eps_id``, ``agent_index`` and ``t`` where the
    file has them) and a reset row (invalid, its observation the episode's next
    one) follows the end of every run of consecutive steps. A run that ends
    without ``terminateds`` (its episode goes on in another file, or the data
    just stops) is marked truncated: the value of its next observation bootstraps it.

    Args:
        rows: flat transitions with ``obs``, ``new_obs``, ``terminateds`` and ``truncateds`` (for
            postprocessing; a recurrent policy's rows without them are only cut into sequences,
            their runs told apart by ``eps_id``).

    Returns:
        ``(fragment, bootstrap_obs)`` as :meth:`Policy.postprocess_trajectory` takes them.
    """
    rows, ends = episode_order(rows)
    count = len(ends)
    if SampleBatch.TERMINATEDS in rows:
        rows[SampleBatch.TRUNCATEDS] = rows[SampleBatch.TRUNCATEDS] | (ends & ~rows[SampleBatch.TERMINATEDS])
    # row i goes to i + (resets before it); each end's reset row right after it
    position = np.arange(count) + np.concatenate([[0], np.cumsum(ends)[:-1]]) if count else np.zeros(0, np.int64)
    length = count + int(ends.sum())
    fragment: dict[str, np.ndarray] = {}
    for key, value in rows.items():
        column = np.zeros((length, *value.shape[1:]), value.dtype)
        column[position] = value
        fragment[key] = column[:, None]
    has_next = SampleBatch.NEXT_OBS in rows
    if has_next:
        fragment[SampleBatch.OBS][position[ends] + 1, 0] = rows[SampleBatch.NEXT_OBS][ends]
    valid = np.zeros((length, 1), bool)
    valid[position] = True
    fragment[SampleBatch.VALID] = valid
    bootstrap = rows[SampleBatch.NEXT_OBS][-1:] if count and has_next else fragment[SampleBatch.OBS][:0, 0]
    return SampleBatch(fragment), bootstrap


def with_previous_steps(fragment: SampleBatch) -> SampleBatch:
    """A fragment of :func:`as_fragment` with ``prev_actions`` and ``prev_rewards`` where its file had none.

    A recurrent model may read them; RLlib's files and corral's hold them, other
    files may not. Each is the row before's within a run, and zero at a run's
    first step (the row before is a reset row, all zeros).

    Args:
        fragment: a ``[T, 1]`` fragment in episode order, reset rows zero.

    Returns:
        The fragment, with the columns it lacked.
    """
    out = SampleBatch(fragment)
    for column, previous in ((SampleBatch.ACTIONS, SampleBatch.PREV_ACTIONS), (SampleBatch.REWARDS, SampleBatch.PREV_REWARDS)):
        if previous not in out and column in out:
            value = out[column]
            out[previous] = np.concatenate([np.zeros_like(value[:1]), value[:-1]])
    return out


# ---------------------------------------------------------------------- #
# where training samples come from
# ---------------------------------------------------------------------- #
class ExperienceInput:
    """The files, the sampler, or a mix of them at given proportions, as one source of sample calls.

    Each call is served by the source furthest below its share of the rows
    served so far, so the proportions hold in rows whatever each source's
    batch size (the sampler's calls lose an episode's reset rows).

    Args:
        sources: ``(name, proportion, reader)``; ``reader`` None is the sampler.
        rows: rows per read from files: one sample call's worth.
    """

    def __init__(self, sources: Sequence[tuple[str, float, ExperienceReader | None]], rows: int) -> None:
        self.sources = list(sources)
        self.rows = rows
        self.rows_from = [0] * len(self.sources)

    def next(self, sample: Callable[[], MultiAgentBatch], rows: int | None = None) -> MultiAgentBatch:
        """The next sample call's rows.

        Args:
            sample: samples the env runners (called when the sampler's turn comes).
            rows: rows to read from files this call; default one full sample call's worth.

        Returns:
            The rows, by policy id.
        """
        total = sum(self.rows_from)
        behind = [share * total - served for (_, share, _), served in zip(self.sources, self.rows_from, strict=True)]
        index = max(range(len(self.sources)), key=lambda i: (behind[i], self.sources[i][1]))
        reader = self.sources[index][2]
        batch = sample() if reader is None else reader.next(rows or self.rows)
        self.rows_from[index] += batch.agent_steps
        return batch

    def close(self) -> None:
        """Stop every reader's stream of blocks (see :meth:`ExperienceReader.close`)."""
        for _, _, reader in self.sources:
            if reader is not None:
                reader.close()

    def get_state(self) -> dict[str, Any]:
        """The rows served by each source and each reader's position, as JSON data."""
        return {
            "rows_from": list(self.rows_from),
            "readers": [None if reader is None else reader.get_state() for _, _, reader in self.sources],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Go on from what :meth:`get_state` returned.

        Raises:
            ValueError: the state is for other sources.
        """
        if len(state["rows_from"]) != len(self.sources) or len(state["readers"]) != len(self.sources):
            saved = len(state["rows_from"])
            raise ValueError(f"the saved input state is for {saved} sources, but input_ names {len(self.sources)}")
        for (_, _, reader), saved in zip(self.sources, state["readers"], strict=True):
            if reader is not None:
                reader.set_state(saved)
        self.rows_from = [int(n) for n in state["rows_from"]]


def build_experience_input(config: Any, policies: Mapping[str, Any], input_reader: Any = None) -> ExperienceInput | None:
    """The input ``config.input_`` asks for, every file checked against its policy; None for the sampler alone.

    Args:
        config: the algorithm's config (``input_``, ``input_config``, ``shuffle_buffer_size``,
            ``actions_in_input_normalized``, ``postprocess_inputs``).
        policies: the learner's policies by id (their spaces check the files; they
            postprocess the rows when ``postprocess_inputs`` is on).
        input_reader: the ``InputReader`` the config's input creator made, read instead of files.

    Returns:
        The input, or None when ``input_`` is ``"sampler"``.

    Raises:
        ConfigError: a missing path, a file without input files, a file whose policy,
            columns or values do not fit (naming the file and the column).
    """
    spec = config.input_
    if input_reader is None and isinstance(spec, str) and spec == SAMPLER:
        return None
    entries = [] if input_reader is not None else list(spec.items()) if isinstance(spec, Mapping) else [(spec, 1.0)]
    checks: dict[str, InputCheck] = {}

    def check_for(path: Path, policy_id: str) -> InputCheck:
        if policy_id not in policies:
            raise ConfigError(
                f"input file {str(path)!r} holds experiences of policy {policy_id!r}, but this run's policies are "
                f"{sorted(policies)}; map them with multi_agent(policies=...)"
            )
        if policy_id not in checks:
            policy = policies[policy_id]
            reads, computed = type(policy).input_columns, type(policy).postprocessing_columns
            if config.postprocess_inputs:  # the transitions postprocessing reads, instead of what it computes
                required, computed = (*(c for c in reads if c not in computed), *TRANSITION_COLUMNS), ()
            else:
                required = reads
            if policy.is_recurrent:
                required = (*required, *recurrent_columns(config.model))
            checks[policy_id] = InputCheck(policy, tuple(dict.fromkeys(required)), config.actions_in_input_normalized, computed)
        return checks[policy_id]

    def prepare(path: Path, read: dict[str, Columns]) -> dict[str, Columns]:
        out = {}
        for pid, batch in read.items():
            rows = check_for(path, pid).check(path, pid, batch)
            out[pid] = training_rows(policies[pid], rows, config.postprocess_inputs) if len(rows[SampleBatch.OBS]) else rows
        return out

    file_format = config.input_config.get("format")
    columns = config.input_config.get("columns") or {}
    # RLlib's iter_batches_kwargs name the shuffle buffer too (the config refuses two different sizes)
    shuffle = config.shuffle_buffer_size or config.iter_batches_kwargs.get("local_shuffle_buffer_size") or 0
    ray_data_options = ray_data_reading_options(config)
    sources: list[tuple[str, float, ExperienceReader | None]] = []
    for source, share in entries:
        name = str(source)
        if source == SAMPLER:
            sources.append((name, share, None))
            continue
        paths = input_files(source, file_format)
        files = [(path, file_format_of(path, file_format)) for path in paths]
        if any(fmt == "parquet" for _, fmt in files):
            require_pyarrow("offline_data(input_=...) reads", "or read JSON lines (input_config={'format': 'json'})")
        for path, fmt in files:  # before training: each file's first rows and layout
            for pid, batch in read_experiences(path, fmt, columns, head=True).items():
                check_for(path, pid).check(path, pid, batch)
            check_layout(path, fmt, config.input_read_episodes)
        ray_data = _reads_through_ray_data(config, [fmt for _, fmt in files], bool(ray_data_options))
        rng = numpy_generator(config.seed, "input", len(sources))  # each reader its own: its state is saved with it
        reader = ExperienceReader(files, prepare, shuffle, rng, columns, ray_data, ray_data_options)
        sources.append((name, share, reader))
    if input_reader is not None:
        rng = numpy_generator(config.seed, "input", 0)
        sources.append((type(input_reader).__name__, 1.0, InputReaderSource(input_reader, prepare, shuffle, rng)))
    rows = config.get_rollout_fragment_length() * config.num_envs_per_env_runner * max(1, config.num_env_runners)
    return ExperienceInput(sources, rows)


def training_rows(policy: Any, rows: Columns, postprocess: bool) -> Columns:
    """A block's checked rows as ``policy`` learns from them.

    With ``postprocess_inputs`` they are postprocessed as a fragment, in episode
    order. A recurrent policy's are cut into sequences of each episode's steps
    (postprocessed or not), starting from the state recorded in the file, or,
    where the file has none, the state the policy's model computes.

    Args:
        policy: the policy that learns from them.
        rows: the rows, checked (:class:`InputCheck`).
        postprocess: whether ``postprocess_inputs`` is on.

    Returns:
        The training rows.
    """
    if postprocess or policy.is_recurrent:
        fragment, bootstrap_obs = as_fragment(rows)
        if policy.is_recurrent:
            fragment = with_previous_steps(fragment)
            if not all(column in fragment for column in state_columns_of(policy, postprocess)):
                fragment = policy.recurrent_states(fragment)
        if postprocess and SampleBatch.VF_PREDS in type(policy).input_columns:
            fragment = with_reset_row_values(policy, fragment)
        if postprocess:
            rows = dict(policy.postprocess_trajectory(fragment, bootstrap_obs))
        else:
            rows = dict(policy.training_rows(fragment))
    return dict(policy.input_rows(SampleBatch(rows), postprocess))


def with_reset_row_values(policy: Any, fragment: SampleBatch) -> SampleBatch:
    """A fragment of :func:`as_fragment` whose reset rows hold the value of the observation they hold.

    A run that a file cuts off (no ``terminateds``) bootstraps from the value
    on the reset row after it, as an env runner's fragment has it; a file has
    no row there, so the policy estimates it (from the state after the run's
    last step, for a recurrent policy).

    Args:
        policy: a policy whose postprocessing reads ``vf_preds`` (PPO's, A2C's).
        fragment: a ``[T, 1]`` fragment with ``vf_preds``.

    Returns:
        The fragment with ``vf_preds`` set on its reset rows.
    """
    reset = ~fragment[SampleBatch.VALID][:, 0]
    if not reset.any():
        return fragment
    inputs: dict[str, Any] = {}
    if policy.is_recurrent:
        at_rows = step_inputs(fragment, policy.get_initial_state())
        inputs = {k: [part[reset] for part in v] if k == "state" else v[reset] for k, v in at_rows.items()}
    values = fragment[SampleBatch.VF_PREDS].copy()
    values[reset, 0] = policy.compute_values(fragment[SampleBatch.OBS][reset, 0], **inputs)
    return SampleBatch({**fragment, SampleBatch.VF_PREDS: values})


def recurrent_columns(model: Any) -> tuple[str, ...]:
    """What a recurrent policy needs of a file beyond its algorithm's columns.

    Its episodes (``eps_id``), to cut each into sequences, and the rewards when
    the model reads the previous one. The state each step was recorded with
    is read where the file has it (:func:`state_columns_of`), else computed.

    Args:
        model: the config's model options.

    Returns:
        The column names.
    """
    prev_reward = model.lstm_use_prev_reward or model.attention_use_n_prev_rewards
    return (SampleBatch.EPS_ID, *([SampleBatch.REWARDS] if prev_reward else []))


def state_columns_of(policy: Any, postprocessing: bool) -> list[str]:
    """The recorded state a recurrent policy learns from where a file has all of it, as RLlib does.

    Each step's starting state (``state_in_k``), which a sequence starts from;
    with postprocessing, also its ending state (``state_out_k``), which a
    truncated episode's bootstrap value reads. A file without them has them
    computed by the policy's model, each episode from its start
    (:meth:`~corral.core.learning.policy.Policy.recurrent_states`).

    Args:
        policy: the recurrent policy (its model's initial state gives the state parts).
        postprocessing: whether ``postprocess_inputs`` is on.

    Returns:
        The column names.
    """
    parts = range(len(policy.get_initial_state()))
    return [state_in_key(k) for k in parts] + ([state_out_key(k) for k in parts] if postprocessing else [])


def check_layout(path: Path, file_format: str, read_episodes: bool) -> None:
    """Refuse a file whose rows are not what ``input_read_episodes`` says: episodes, or steps.

    Args:
        path: the input file.
        file_format: its format.
        read_episodes: ``config.input_read_episodes``.

    Raises:
        ConfigError: naming the file, its layout and the setting that reads it.
    """
    if holds_episodes(path, file_format) == read_episodes:
        return
    if read_episodes:
        raise ConfigError(
            f"input_read_episodes=True reads files of episodes (written with output_write_episodes=True), but input "
            f"file {str(path)!r} holds one row per step; read it with input_read_episodes=False"
        )
    raise ConfigError(
        f"input file {str(path)!r} holds one row per episode (written with output_write_episodes=True); read it "
        "with offline_data(input_read_episodes=True)"
    )


def _reads_through_ray_data(config: Any, formats: list[str], tuned: bool) -> bool:
    """Whether a reader goes through Ray Data: when asked (``use_ray_data``, or ``tuned``: the config sets Ray Data's
    own reading options), or by default on a Ray cluster (remote env runners).

    Raises:
        ConfigError: ``use_ray_data=True`` for JSON lines files (Ray Data reads corral's Parquet).
    """
    wanted = config.input_config.get("use_ray_data")
    if wanted is None and tuned:
        wanted = True  # the user tuned Ray Data's reading
    if wanted and "json" in formats:
        raise ConfigError(
            "input_config use_ray_data=True reads Parquet files, but the input holds JSON lines; "
            "record with output_config={'format': 'parquet'}, or read them in this process (use_ray_data=False, "
            "without map_batches_kwargs and iter_batches_kwargs prefetch_batches)"
        )
    if wanted is None:
        return config.num_env_runners > 0 and "json" not in formats
    return bool(wanted)
