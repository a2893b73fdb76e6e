"""IMPALA's update: an actor-critic loss on V-trace targets, from sequences sampled with older weights."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch

from corral.core import Policy, RecurrentModel, SampleBatch, TorchLearner, joint_norm, to_floats, vtrace
from corral.core.common.sample_batch import STATE_IN_PREFIX, state_in_key, state_out_key
from corral.core.networks.recurrent import initial_state
from corral.plugins.impala.config import IMPALAConfig

_SEQUENCE_COLUMNS = [
    SampleBatch.OBS,
    SampleBatch.ACTIONS,
    SampleBatch.REWARDS,
    SampleBatch.TERMINATEDS,
    SampleBatch.TRUNCATEDS,
    SampleBatch.ACTION_LOGP,
    SampleBatch.VALID,
]


class IMPALAPolicy(Policy):
    """Keeps each sub-environment's fragment as one sequence; V-trace runs at learning time.

    The targets must use the learner's current value function and policy, so
    nothing is estimated when sampling: a batch row is a whole sequence
    (``[B, T, ...]`` columns) plus the observation to bootstrap from.

    A recurrent model's sequence also holds the state it started from
    (``state_in_k``) and the previous actions and rewards; the learner runs the
    model over it step by step from that state, starting over where an episode
    starts inside the sequence, as the env runner did.
    """

    config: IMPALAConfig
    thread_safe_learning = True
    data_parallel_learning = True
    recurrent_models = True
    required_model_outputs = (SampleBatch.ACTION_DIST_INPUTS, SampleBatch.VF_PREDS)
    input_columns = (*_SEQUENCE_COLUMNS, SampleBatch.BOOTSTRAP_OBS)
    postprocessing_columns = (SampleBatch.VALID, SampleBatch.BOOTSTRAP_OBS)  # sequences: only postprocessing cuts them

    def postprocess_trajectory(self, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> SampleBatch:
        """One row per sub-environment: its ``[T, ...]`` sequence and its bootstrap observation.

        A fragment longer than ``rollout_fragment_length`` (a block of rows read
        from files) is first cut into pieces of that length, as env runners
        would have sampled them; the last one is padded with reset rows holding
        its bootstrap observation, which V-trace and the state pass over.
        """
        length = self.config.get_rollout_fragment_length()
        if len(fragment[SampleBatch.VALID]) > length:
            pieces = [self._sequences(*piece) for piece in _pieces(fragment, bootstrap_obs, length)]
            return SampleBatch({k: np.concatenate([piece[k] for piece in pieces]) for k in pieces[0]})
        return self._sequences(fragment, bootstrap_obs)

    def _sequences(self, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> SampleBatch:
        # copies: the runner writes its next fragment into the same buffers
        columns = _SEQUENCE_COLUMNS + (_RECURRENT_COLUMNS if self.is_recurrent else [])
        sequences = {k: np.ascontiguousarray(np.swapaxes(fragment[k], 0, 1)) for k in columns}
        starts = {k: fragment[k][0].copy() for k in fragment if k.startswith(STATE_IN_PREFIX)}  # each sequence's first state
        return SampleBatch({**sequences, **starts, SampleBatch.BOOTSTRAP_OBS: np.asarray(bootstrap_obs)})

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """One gradient step on the V-trace actor-critic loss over every sequence of the batch."""
        cfg = self.config
        lr = self.update_lr()
        t, time_major = self.sequence_tensors(batch)
        actions = flat_steps(time_major[SampleBatch.ACTIONS])
        dist_inputs, values, last_values = self.sequence_outputs(self.model, t, time_major)
        dist = self.dist_class(dist_inputs)
        target_logp = dist.logp(actions).view_as(values)
        valid = time_major[SampleBatch.VALID].float()
        vs, pg_advantages = self.vtrace_targets(time_major, valid, target_logp, values, last_values)
        count = valid.sum().clamp(min=1.0)
        policy_loss = -(target_logp * pg_advantages).sum() / count
        vf_loss = 0.5 * ((values - vs).pow(2) * valid).sum() / count
        entropy = (dist.entropy().view_as(values) * valid).sum() / count
        total = policy_loss + cfg.vf_loss_coeff * vf_loss - self.scheduled("entropy_coeff") * entropy
        terms = {"policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy}
        rows = float(valid.sum()) if self.gradient_sync is not None else None  # a Learner's weight: its valid steps
        grad_norm = joint_norm(self.apply_gradients(total, terms, rows))
        stats = {"total_loss": total, "policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy, "grad_gnorm": grad_norm}
        return {**to_floats(stats), "cur_lr": lr}

    def sequence_tensors(self, batch: SampleBatch) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """A batch of sequences as tensors (this Learner's share of them): ``[B, T, ...]``, and the step columns ``[T, B, ...]``.

        Args:
            batch: rows of ``[T, ...]`` sequences (:meth:`postprocess_trajectory`).

        Returns:
            ``(t, time_major)``.
        """
        recurrent = [k for k in batch if k.startswith(STATE_IN_PREFIX)] + (_RECURRENT_COLUMNS if self.is_recurrent else [])
        t = self.share(self.to_tensors(batch, [*_SEQUENCE_COLUMNS, SampleBatch.BOOTSTRAP_OBS, *recurrent]))  # a Learner's
        return t, {k: t[k].transpose(0, 1) for k in _SEQUENCE_COLUMNS}

    def sequence_outputs(
        self, model: Any, t: dict[str, torch.Tensor], time_major: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A model (this policy's, or a copy of it such as APPO's target network) over the batch's sequences.

        Args:
            model: the network to run.
            t: the batch's tensors (:meth:`sequence_tensors`).
            time_major: its step columns, ``[T, B, ...]``.

        Returns:
            ``[T * B, ...]`` time-major action-distribution inputs, ``[T, B]`` values, and ``[B]`` values of the
            bootstrap observations (without gradients).
        """
        if self.is_recurrent:
            return self._recurrent_outputs(model, t)
        out = model.forward_train(flat_steps(time_major[SampleBatch.OBS]))
        steps, sequences = time_major[SampleBatch.REWARDS].shape
        with torch.no_grad():
            last_values = model.forward_train(t[SampleBatch.BOOTSTRAP_OBS])[SampleBatch.VF_PREDS]
        return out[SampleBatch.ACTION_DIST_INPUTS], out[SampleBatch.VF_PREDS].view(steps, sequences), last_values

    def vtrace_targets(
        self,
        time_major: dict[str, torch.Tensor],
        valid: torch.Tensor,
        target_logp: torch.Tensor,
        values: torch.Tensor,
        last_values: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """V-trace's value targets and policy-gradient advantages (``[T, B]``) for a target policy's log-probabilities.

        Args:
            time_major: the batch's step columns, ``[T, B, ...]``.
            valid: ``[T, B]`` 1.0 at the steps taken, 0.0 at reset rows.
            target_logp: ``[T, B]`` log-probabilities of the batch's actions under the policy V-trace corrects towards.
            values: ``[T, B]`` the learner's values.
            last_values: ``[B]`` the values of the bootstrap observations.

        Returns:
            ``(vs, pg_advantages)``.
        """
        cfg = self.config
        return vtrace(
            time_major[SampleBatch.ACTION_LOGP], target_logp, time_major[SampleBatch.REWARDS], values, last_values,
            time_major[SampleBatch.TERMINATEDS], time_major[SampleBatch.TRUNCATEDS], valid, cfg.gamma,
            cfg.vtrace_clip_rho_threshold, cfg.vtrace_clip_c_threshold, cfg.vtrace_clip_pg_rho_threshold,
        )  # fmt: skip

    def _recurrent_outputs(self, model: Any, t: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A recurrent model over ``[B, T]`` sequences, a step at a time from each one's first state.

        After a reset row (``valid`` False) an episode starts: the state starts over,
        as the env runner's did; the recorded previous actions and rewards already do.

        Returns:
            ``[T * B, ...]`` time-major action-distribution inputs, ``[T, B]`` values, and
            ``[B]`` values of the bootstrap observations from the state after each sequence.
        """
        model = cast(RecurrentModel, model)
        initial = initial_state(model)
        state = [t[state_in_key(k)] for k in range(len(initial))]
        valid = t[SampleBatch.VALID]
        sequences, steps = valid.shape
        one_step = torch.ones(sequences, dtype=torch.int32, device=self.device)
        dist_inputs, values = [], []
        for step in range(steps):
            if step > 0:
                state = _start_over(state, initial, ~valid[:, step - 1])
            out = model.forward_train(
                t[SampleBatch.OBS][:, step : step + 1], state, one_step,
                t[SampleBatch.PREV_ACTIONS][:, step : step + 1], t[SampleBatch.PREV_REWARDS][:, step : step + 1],
            )  # fmt: skip
            state = [out[state_out_key(k)] for k in range(len(initial))]
            dist_inputs.append(out[SampleBatch.ACTION_DIST_INPUTS])
            values.append(out[SampleBatch.VF_PREDS])
        with torch.no_grad():
            ended = ~valid[:, -1]
            state = _start_over([part.detach() for part in state], initial, ended)
            last_action = t[SampleBatch.ACTIONS][:, -1:]
            last_reward = t[SampleBatch.REWARDS][:, -1:]
            last_values = model.forward_train(
                t[SampleBatch.BOOTSTRAP_OBS].unsqueeze(1), state, one_step,
                torch.where(_rows(ended, last_action), torch.zeros_like(last_action), last_action),
                torch.where(ended.unsqueeze(1), torch.zeros_like(last_reward), last_reward),
            )[SampleBatch.VF_PREDS]  # fmt: skip
        return torch.cat(dist_inputs), torch.stack(values), last_values


_RECURRENT_COLUMNS = [SampleBatch.PREV_ACTIONS, SampleBatch.PREV_REWARDS]


def flat_steps(column: torch.Tensor) -> torch.Tensor:
    """A ``[T, B, ...]`` column as ``[T * B, ...]`` rows (IMPALA's and APPO's time-major steps).

    Args:
        column: a time-major column.

    Returns:
        The same steps, one row each.
    """
    return column.reshape(column.shape[0] * column.shape[1], *column.shape[2:])


def _rows(mask: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A ``[B]`` mask shaped to broadcast over ``like``'s rows."""
    return mask.reshape(-1, *([1] * (like.dim() - 1)))


def _start_over(state: list[torch.Tensor], initial: list[torch.Tensor], rows: torch.Tensor) -> list[torch.Tensor]:
    """The state, with the initial one where ``rows`` starts an episode."""
    return [torch.where(_rows(rows, part), start, part) for part, start in zip(state, initial, strict=True)]


def _pieces(fragment: SampleBatch, bootstrap_obs: np.ndarray, length: int) -> list[tuple[SampleBatch, np.ndarray]]:
    """A long ``[T, N]`` fragment as pieces of ``length`` rows and their bootstrap observations (``postprocess_trajectory``)."""
    steps = len(fragment[SampleBatch.VALID])
    padding = -steps % length
    padded = {}
    for key, column in fragment.items():
        pad = np.zeros((padding, *column.shape[1:]), column.dtype)
        if key == SampleBatch.OBS:  # reset rows after the last step: they hold the observation after it
            pad[:] = bootstrap_obs
        padded[key] = np.concatenate([column, pad])
    out = []
    for start in range(0, steps, length):
        end = start + length
        after = padded[SampleBatch.OBS][end] if end < steps + padding else bootstrap_obs
        out.append((SampleBatch({k: v[start:end] for k, v in padded.items()}), after))
    return out


class IMPALATorchLearner(TorchLearner):
    """IMPALA's Learner (RLlib's name): subclass it to replace a part of IMPALA's update (see corral.core.Learner)."""

    policy_classes = (IMPALAPolicy,)
