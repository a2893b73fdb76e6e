"""PG's update: one gradient step on ``-log pi(a|s) * G`` per batch, ``G`` each row's discounted return."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from corral.core import Policy, SampleBatch, TorchLearner, add_discounted_returns, build_model, joint_norm, to_floats
from corral.plugins.pg.config import PGConfig


class PGPolicy(Policy):
    """A policy network with no value head, learning from the returns its own actions got.

    Postprocessing gives each row ``advantages``: its discounted return to the
    end of the episode or of the fragment, whichever comes first (RLlib's PG).
    A recurrent model (``use_lstm``, ``use_attention``) learns on sequences
    from the recorded state.
    """

    config: PGConfig
    thread_safe_learning = True
    data_parallel_learning = True
    recurrent_models = True
    input_columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES)
    postprocessing_columns = (SampleBatch.ADVANTAGES,)

    def make_model(self) -> nn.Module:
        """The catalog's model, or a plain custom model, without a value head (PG learns no values)."""
        return build_model(
            self.model_observation_space, self.model_action_space, self.num_outputs, self.config.model, value_function=False
        )

    def postprocess_trajectory(self, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> SampleBatch:
        """Add each row's discounted return within its fragment as ``advantages``, then flatten (or cut into sequences)."""
        return self.training_rows(add_discounted_returns(fragment, self.config.gamma))

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """One gradient step on the whole batch."""
        lr = self.update_lr()
        t = self.to_tensors(batch, [SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES])
        total, terms = self.minibatch_loss(self.share(t))  # on a Learner, its rows of the batch
        grad_norm = joint_norm(self.apply_gradients(total, terms))
        return {**to_floats({**terms, "grad_gnorm": grad_norm}), "cur_lr": lr}

    def compute_loss(
        self, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``-mean(log pi(a|s) * advantages)``, RLlib's PG loss, from the model's outputs.

        Returns:
            The loss, and it by name (``policy_loss``, which is also the ``total_loss``).
        """
        dist = self.dist_class(fwd_out[SampleBatch.ACTION_DIST_INPUTS])
        policy_loss = -(dist.logp(batch[SampleBatch.ACTIONS]) * batch[SampleBatch.ADVANTAGES]).mean()
        return policy_loss, {"policy_loss": policy_loss, "total_loss": policy_loss}


class PGTorchLearner(TorchLearner):
    """PG's Learner (RLlib's name): subclass it to replace a part of PG's update (see corral.core.Learner)."""

    policy_classes = (PGPolicy,)
