"""Policy: a torch model, its action distribution, exploration and optimizer.

An algorithm subclasses :class:`Policy` and writes ``learn_on_batch`` (and, if
it needs them, ``make_model``, ``extra_action_out`` and
``postprocess_trajectory``). Acting is batched: one forward pass for a whole
vector of observations, under ``torch.inference_mode()``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.core.common.restored import restored_count
from corral.core.common.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from corral.core.common.spaces import ActionAdapter, ObservationCheck, ObservationPreprocessor
from corral.core.contracts.actor_critic import GAEConfig
from corral.core.contracts.config import OPTIMIZERS, SCHEDULES, AlgorithmConfig
from corral.core.devices import policies_on, policy_device
from corral.core.learning.acting import single_action
from corral.core.learning.exploration import make_exploration
from corral.core.learning.filters import MeanStdFilter
from corral.core.learning.fused_adam import FUSED_ADAM_OPTIONS, FusedAdam, Optimizer, fused_adam_runs
from corral.core.learning.nonfinite import UpdateGuard
from corral.core.learning.postprocessing import add_gae
from corral.core.learning.schedules import PiecewiseSchedule
from corral.core.memory import check_fits
from corral.core.networks.action_masking import LEGAL_ACTIONS, ActionMaskedModel, MaskedObservationPreprocessor
from corral.core.networks.default_models import Model, build_model, torch_dtype
from corral.core.networks.distributions import ActionDistribution, distribution_for
from corral.core.seeding import (
    generator_state,
    int_seed,
    isolated_torch_seed,
    numpy_generator,
    set_generator_state,
    set_torch_generator_state,
    torch_generator,
)
from corral.errors import ConfigError, ObservationError


class Policy:
    """What maps observations to actions, and learns from batches of experience.

    Args:
        observation_space: one agent's observation space.
        action_space: one agent's action space (as the env defines it).
        config: the algorithm's (frozen) config.
    """

    thread_safe_learning: ClassVar[bool] = False
    """True if :meth:`learn_on_batch` touches only this policy's own state and draws only from its own
    generators (:attr:`torch_rng`, :attr:`np_rng`); the algorithm may then update several such policies
    at once, each in its own thread, with the same results (see ``num_learner_threads``)"""
    input_columns: ClassVar[tuple[str, ...]] = (
        SampleBatch.OBS,
        SampleBatch.ACTIONS,
        SampleBatch.REWARDS,
        SampleBatch.NEXT_OBS,
        SampleBatch.TERMINATEDS,
        SampleBatch.TRUNCATEDS,
    )
    """the columns :meth:`learn_on_batch` needs of rows read from files (``offline_data(input_=...)``): every file
    is checked for them before training starts; the default is a whole transition"""
    postprocessing_columns: ClassVar[tuple[str, ...]] = ()
    """the columns of :attr:`input_columns` that :meth:`postprocess_trajectory` computes (``advantages``,
    ``value_targets``): with ``postprocess_inputs`` a file needs a whole transition instead of them; without it
    a file must hold them itself, and one that does not is refused with the advice to turn postprocessing on"""

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any], config: AlgorithmConfig) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.config = config
        self.device = policy_device(config)
        """where the policy's networks and tensors live: the learner's device (``num_gpus``), or a remote env
        runner's own (``num_gpus_per_env_runner``); see :mod:`corral.core.devices`"""
        self.action_mask = MaskedObservationPreprocessor.detect(observation_space, action_space, config.action_mask_key)
        """the preprocessor of a masked observation space (a Dict holding ``config.action_mask_key``), else None"""
        self.preprocessor = self.action_mask or ObservationPreprocessor(observation_space)
        self.model_observation_space = observation_space if self.action_mask is None else self.action_mask.model_observation_space
        """what the model sees: the observation space, without the action mask when there is one"""
        self.action_adapter = ActionAdapter(action_space, config.normalize_actions, config.clip_actions)
        self.dist_class, self.num_outputs = distribution_for(self.action_adapter.policy_space)
        self.model = self._build_model()
        self.exploration = make_exploration(config.exploration_config, self.action_adapter.policy_space)
        filtered_shape = self.preprocessor.shape if self.action_mask is None else self.action_mask.model_input.shape
        self.observation_filter = MeanStdFilter(filtered_shape) if config.observation_filter == "MeanStdFilter" else None
        self.optimizer = self.make_optimizer()
        self._schedules = {
            name: PiecewiseSchedule(getattr(config, schedule))
            for schedule, name in SCHEDULES.items()
            if getattr(config, schedule, None)
        }
        self.global_timestep = 0
        self.seed_rngs(None)

    def seed_rngs(self, seed: int | None, *path: str | int) -> None:
        """Give this policy copy its own generators, derived from the algorithm's seed (see :mod:`corral.core.seeding`).

        ``torch_rng`` draws actions, exploration noise, minibatch orders and
        reparameterised samples; ``np_rng`` is free for an algorithm's numpy
        draws. Until this is called they start from fresh entropy.

        Args:
            seed: the algorithm's seed (None: fresh entropy).
            *path: names this copy, e.g. ``("policy", "default_policy", "sampling", 0)``.
        """
        self.torch_rng = torch_generator(seed, *path, "torch", device=self.device)
        self.np_rng = numpy_generator(seed, *path, "numpy")
        self.exploration.generator = self.torch_rng

    required_model_outputs: tuple[str, ...] = (SampleBatch.ACTION_DIST_INPUTS,)
    """the keys the model's forward must return, each with a row per observation; checked at build"""

    def _build_model(self) -> Model:
        """``make_model()``, after checking it fits in memory; then checked on a probe batch.

        The model is first built on torch's meta device, which allocates
        nothing, to count its parameters; then for real.

        Raises:
            ConfigError: the model cannot fit in memory, or its outputs do not fit the action space.
        """
        try:
            with torch.device("meta"):
                counted = sum(p.numel() for p in self.make_model().parameters())
        except Exception:  # a custom model that cannot be built on the meta device: no estimate
            counted = 0
        # weights, gradients and two optimizer moments, four bytes each: a lower bound
        check_fits(
            f"the model for observations of shape {self.preprocessor.shape} ({counted:,} parameters)",
            counted * 16,
            "use smaller layers (model.fcnet_hiddens, model.conv_filters) or smaller observations",
        )
        model = self.make_model().to(self.device)
        self._check_model_outputs(model)
        checked = cast(Model, model)  # it has Model's forward methods, whether or not it subclasses Model
        return checked if self.action_mask is None else ActionMaskedModel(checked, self.action_mask)

    def _check_model_outputs(self, model: nn.Module) -> None:
        """Run the model on two zero observations: each required output needs a row per observation."""
        model_input = self.preprocessor if self.action_mask is None else self.action_mask.model_input
        probe = torch.zeros((2, *model_input.shape), dtype=torch_dtype(model_input.dtype), device=self.device)
        what = f"the model {type(model).__qualname__}"
        if not all(
            callable(getattr(model, name, None)) for name in ("forward_inference", "forward_exploration", "forward_train")
        ):
            raise ConfigError(
                f"{what} lacks forward_inference/forward_exploration/forward_train; subclass corral.core.Model and write _forward"
            )
        try:
            with torch.no_grad():
                out = cast(Model, model).forward_inference(probe)  # its forward methods exist (checked above)
        except Exception as exc:  # a custom model may fail in any way
            raise ConfigError(
                f"{what} fails on a batch of observations of shape {tuple(probe.shape)}: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(out, dict):
            raise ConfigError(
                f"{what} returns a {type(out).__name__}; it must return a dict with {list(self.required_model_outputs)}"
            )
        expected = {SampleBatch.ACTION_DIST_INPUTS: (2, self.num_outputs)}
        for key in self.required_model_outputs:
            value = out.get(key)
            shape = expected.get(key)
            if not isinstance(value, torch.Tensor) or value.shape[0] != 2 or (shape is not None and tuple(value.shape) != shape):
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                want = shape or "one row per observation"
                raise ConfigError(f"{what} returns {key!r} of shape {got} for 2 observations; {type(self).__name__} needs {want}")

    # ------------------------------------------------------------------ #
    # what an algorithm may override
    # ------------------------------------------------------------------ #
    def make_model(self) -> nn.Module:
        """The network; by default the catalog's model for these spaces.

        It reads observations of :attr:`model_observation_space`; with an action
        mask, the policy wraps it in an :class:`ActionMaskedModel`.
        """
        return build_model(self.model_observation_space, self.action_adapter.policy_space, self.num_outputs, self.config.model)

    def make_optimizer(self) -> Optimizer:
        """The optimizer over the model's parameters, as the ``optimizer`` option names it."""
        return build_optimizer(self.model.parameters(), self.config.optimizer, lr=self.config.lr)

    def extra_action_out(
        self, model_out: dict[str, torch.Tensor], dist: ActionDistribution, actions: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """Per-step values to record beside the actions (log-probs, value estimates, ...).

        Called by :meth:`compute_actions` for every batch it acts on; the env
        runner stores each value as a column of the sample fragment.

        Args:
            model_out: the model's outputs for the batch, each with a row per observation.
            dist: the action distributions built from ``model_out[ACTION_DIST_INPUTS]``.
            actions: the actions chosen for the batch (``[B, ...]``), in the policy's action space.

        Returns:
            Columns by name, each with a row per observation; by default the actions'
            log-probabilities, the distribution inputs and, if the model returns them,
            its value estimates.
        """
        extras = {
            SampleBatch.ACTION_LOGP: dist.logp(actions),
            SampleBatch.ACTION_DIST_INPUTS: model_out[SampleBatch.ACTION_DIST_INPUTS],
        }
        if SampleBatch.VF_PREDS in model_out:
            extras[SampleBatch.VF_PREDS] = model_out[SampleBatch.VF_PREDS]
        return extras

    def postprocess_trajectory(self, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> SampleBatch:
        """Turn a time-major ``[T, N]`` fragment into training rows.

        The default drops reset rows and flattens. Algorithms that estimate
        returns (GAE, n-step) override this and call :meth:`flatten_fragment`.

        Args:
            fragment: columns of shape ``[T, N, ...]`` plus a boolean ``valid``.
            bootstrap_obs: ``[N, ...]`` preprocessed observations after the last row.
        """
        return self.flatten_fragment(fragment)

    def input_rows(self, rows: SampleBatch, postprocessed: bool) -> SampleBatch:
        """Rows read from files, checked (and postprocessed with ``postprocess_inputs``), as this policy learns from them.

        The default takes them as they are; a policy whose sampled rows gain
        columns that a file's transitions imply (a replay-based one's discounts)
        adds them here.

        Args:
            rows: flat rows of one block of a file, in the policy's dtypes.
            postprocessed: whether :meth:`postprocess_trajectory` made them.

        Returns:
            The rows to learn from.
        """
        return rows

    @staticmethod
    def flatten_fragment(fragment: SampleBatch) -> SampleBatch:
        """Valid rows of a ``[T, N]`` fragment as a flat batch (the ``valid`` column dropped)."""
        mask = fragment[SampleBatch.VALID].reshape(-1)
        return SampleBatch({k: v.reshape(-1, *v.shape[2:])[mask] for k, v in fragment.items() if k != SampleBatch.VALID})

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """Update the model from a batch; return learner stats. Algorithms implement this."""
        raise NotImplementedError(f"{type(self).__name__} must implement learn_on_batch()")

    # ------------------------------------------------------------------ #
    # acting
    # ------------------------------------------------------------------ #
    def preprocess(self, raw_obs: Any, update_filter: bool = False) -> np.ndarray:
        """Raw observations (a batch) to model inputs, through the observation filter.

        Args:
            raw_obs: a batch of observations as a vector env returns them (an array
                with a leading batch axis, or dicts/tuples of such arrays for Dict and
                Tuple spaces).
            update_filter: fold the batch into the observation filter's running
                statistics first; True only for observations that become training samples.

        Returns:
            ``[B, *preprocessor.shape]``: float32, or the image's own dtype for image
            observations without a filter.
        """
        obs = self.preprocessor(raw_obs)
        obs_filter = self.observation_filter
        if obs_filter is None:
            return obs
        if self.action_mask is None:
            return obs_filter(obs, update=update_filter)
        return self.action_mask.map_observation(obs, lambda model_obs: obs_filter(model_obs, update=update_filter))

    @torch.inference_mode()
    def compute_actions(
        self, obs: np.ndarray, explore: bool | None = None, timestep: int | None = None
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions (in the policy's action space) and extras for a batch of preprocessed observations.

        Args:
            obs: ``[B, ...]`` observations from :meth:`preprocess`.
            explore: explore (the model's ``forward_exploration``) or act deterministically
                (``forward_inference``); None means ``config.explore``.
            timestep: the timestep the exploration's schedules read; None means
                ``self.global_timestep``.

        Returns:
            ``(actions, extras)``: ``[B, ...]`` actions in the policy's action space
            (:attr:`action_adapter` maps them to the env's), and the
            :meth:`extra_action_out` columns, all as numpy arrays on the CPU.
        """
        explore = self.config.explore if explore is None else explore
        obs_t = torch.from_numpy(obs).to(self.device)
        model_out = self.model.forward_exploration(obs_t) if explore else self.model.forward_inference(obs_t)
        dist = self.dist_class(model_out[SampleBatch.ACTION_DIST_INPUTS])
        t = self.global_timestep if timestep is None else timestep
        self.exploration.action_mask = model_out.get(LEGAL_ACTIONS)  # set by an ActionMaskedModel
        actions = self.exploration.get_exploration_action(dist, t, explore)
        extras = self.extra_action_out(model_out, dist, actions)
        return actions.cpu().numpy(), {k: v.cpu().numpy() for k, v in extras.items()}

    def split_action_mask(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The model's observations and the legal actions of a batch, for code that calls parts of the model directly.

        The model's ``forward_*`` methods mask by themselves; an algorithm that
        feeds sub-networks itself (SAC's actor and critics) splits its batch here.

        Args:
            obs: ``[B, ...]`` preprocessed observations (``preprocess`` output, as a tensor).

        Returns:
            ``(observations, legal)``: without an action mask, ``obs`` itself and None;
            with one, the observations in the model's input shape and a ``[B, n]``
            boolean mask (see :func:`corral.core.networks.action_masking.mask_logits`).
        """
        if self.action_mask is None:
            return obs, None
        return self.action_mask.split(obs)

    @torch.inference_mode()
    def compute_log_likelihoods(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Log-likelihoods of ``actions`` under the policy's exploring action distribution (off-policy estimation weighs by them).

        Args:
            obs: ``[B, ...]`` preprocessed observations.
            actions: ``[B, ...]`` actions in the policy's action space.

        Returns:
            ``[B]`` float32 log-likelihoods under the distribution :meth:`compute_actions` samples from
            when it explores (an exploration that acts otherwise, such as epsilon-greedy, is not in them).
        """
        obs_t = torch.from_numpy(obs).to(self.device)
        dist = self.dist_class(self.model.forward_exploration(obs_t)[SampleBatch.ACTION_DIST_INPUTS])
        return dist.logp(torch.as_tensor(actions, device=self.device)).float().cpu().numpy()

    @torch.inference_mode()
    def compute_values(self, obs: np.ndarray) -> np.ndarray:
        """Value estimates for a batch of preprocessed observations (actor-critic models)."""
        return self.model.forward_inference(torch.from_numpy(obs).to(self.device))[SampleBatch.VF_PREDS].cpu().numpy()

    def check_observations(self, obs: Any, batched: bool) -> None:
        """Refuse raw observations whose form does not fit the observation space, before any forward pass.

        The shape, the Dict and Tuple parts, and that they are numbers: values outside the
        space's bounds are the caller's to judge (an env may well return them).

        Args:
            obs: one observation, or a batch with a leading batch axis.
            batched: whether ``obs`` is a batch.

        Raises:
            ObservationError: naming what is wrong and the space's shape.
        """
        check = getattr(self, "_observation_check", None)
        if check is None:  # made on first use: compute_single_action is for users, not the sampling loop
            check = self._observation_check = ObservationCheck(self.observation_space)
        found = check.problem(obs, batched, bounds=False)
        if found is not None:
            if batched:
                raise ObservationError(f"observation {found[0]} of the batch {found[1]}; give a batch with a leading axis")
            raise ObservationError(f"the observation {found[1]}; give one observation, without a batch axis")

    def compute_single_action(
        self,
        obs: Any = None,
        state: list[Any] | None = None,
        *,
        prev_action: Any = None,
        prev_reward: Any = None,
        info: Any = None,
        input_dict: dict[str, Any] | None = None,
        episode: Any = None,
        explore: bool | None = None,
        timestep: int | None = None,
    ) -> tuple[Any, list[Any], dict[str, Any]]:
        """The env action for one raw observation, with RLlib's signature and its ``(action, state_outs, extras)``.

        The observation filter is applied but not updated. The action is the env's:
        unsquashed or clipped as the config's ``normalize_actions`` and ``clip_actions``
        say (RLlib's policy leaves that to ``Algorithm.compute_single_action``; corral's
        policy holds the mapping, so what it returns can go to ``env.step`` as it is).

        Args:
            obs: one observation of ``observation_space``, without a batch axis.
            state: RNN state; corral's models are stateless, so only None or ``[]``.
            prev_action: the previous action (RLlib's; corral's models do not read it).
            prev_reward: the previous reward (RLlib's; corral's models do not read it).
            info: the env's info dict (RLlib's; corral's models do not read it).
            input_dict: instead of ``obs`` and ``state``: ``{"obs": ..., "state_in_0": ...}``.
            episode: the episode acted in (RLlib's; corral's explorations do not read it).
            explore: explore or act deterministically; None means ``config.explore``.
            timestep: the timestep exploration schedules read; None means :attr:`global_timestep`.

        Returns:
            ``(action, [], extras)``: the env action (an ``int`` for Discrete spaces, a numpy
            array otherwise), no RNN state, and the extra outputs for it
            (``action_dist_inputs``, ``action_logp``, ``action_prob``, ``vf_preds`` as the policy has them).

        Raises:
            ConfigError: ``state`` is not empty, or ``input_dict`` comes with ``obs`` or without ``"obs"``.
            ObservationError: ``obs`` does not fit the observation space (see :meth:`check_observations`).
        """
        action, extras = single_action(
            self, obs, state, prev_action=prev_action, prev_reward=prev_reward, input_dict=input_dict, explore=explore,
            timestep=timestep, adapter=self.action_adapter, policy_id=None, caller="Policy.compute_single_action",
        )  # fmt: skip
        return action, [], extras

    # ------------------------------------------------------------------ #
    # learning helpers
    # ------------------------------------------------------------------ #
    def to_tensors(self, batch: SampleBatch, keys: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
        """Columns as tensors on the policy's device (no copy on CPU unless read-only, as Ray's are).

        Args:
            batch: the columns to convert.
            keys: the columns wanted; None (or an empty list) means every column.

        Returns:
            Tensors by column name; on the CPU they share memory with ``batch``'s arrays
            where those are C-contiguous and writable.
        """
        return {k: torch.from_numpy(np.require(batch[k], requirements=["C", "W"])).to(self.device) for k in (keys or batch)}

    def apply_gradients(self, loss: torch.Tensor, terms: dict[str, torch.Tensor] | None = None) -> list[torch.Tensor]:
        """Backpropagate ``loss``, clip if ``grad_clip``, and step ``self.optimizer`` unless something is not finite.

        A NaN or inf loss or gradient norm, or weights that the step would make
        non-finite, stop the update before it reaches the weights (see
        :mod:`corral.core.learning.nonfinite`): a :class:`~corral.errors.TrainingError`,
        or a skipped update with ``debugging(on_nonfinite="skip")``.

        Args:
            loss: the total loss.
            terms: its terms by name, so an error can say which one was not finite.

        Returns:
            Each param group's gradient norm before clipping (see :meth:`clip_gradients`).

        Raises:
            TrainingError: something was not finite and ``on_nonfinite`` is ``"raise"``.
        """
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
        norms = self.clip_gradients()
        if self.update_guard.check_gradients(loss, norms, terms):
            self.update_guard.step()
        return norms

    def clip_gradients(self) -> list[torch.Tensor]:
        """Clip gradients to ``grad_clip`` as ``grad_clip_by`` says; returns each param group's global norm before.

        ``"global_norm"`` (the default) scales a param group's gradients together,
        ``"norm"`` each parameter's tensor on its own, ``"value"`` clamps every
        element to [-grad_clip, grad_clip], as RLlib's options do. One optimizer
        may hold several networks as param groups (SAC's critics, actor and
        temperature); each is clipped on its own, as if it had its own optimizer.
        The norms are measured even without ``grad_clip``: the update guard needs
        them to be finite.
        """
        norms = []
        clip, clip_by = self.config.grad_clip, self.config.grad_clip_by
        for group in self.optimizer.param_groups:
            grads = [p.grad for p in group["params"] if p.grad is not None]
            if not grads:
                norms.append(torch.zeros((), device=self.device))
                continue
            # what nn.utils.clip_grad_norm_ does, with its foreach kernels also on the CPU (half the time there)
            each = torch._foreach_norm(grads)
            norm = torch.linalg.vector_norm(torch.stack(each))
            if clip is not None and clip_by == "global_norm":
                torch._foreach_mul_(grads, torch.clamp(clip / (norm + 1e-6), max=1.0))
            elif clip is not None and clip_by == "norm":
                torch._foreach_mul_(grads, [torch.clamp(clip / (n + 1e-6), max=1.0) for n in each])
            elif clip is not None:
                torch._foreach_clamp_min_(grads, -clip)
                torch._foreach_clamp_max_(grads, clip)
            norms.append(norm)
        return norms

    @property
    def update_guard(self) -> UpdateGuard:
        """The NaN/inf guard of ``self.optimizer``'s steps (made on first use, so subclasses may replace the optimizer)."""
        guard = self.__dict__.get("_update_guard")
        if guard is None or guard.optimizer is not self.optimizer:
            guard = self.__dict__["_update_guard"] = UpdateGuard(self.optimizer, self.config.on_nonfinite)
        return guard

    def scheduled(self, name: str) -> float:
        """An option's value at the policy's current timestep: its schedule's (``lr_schedule``, ...) if it has one.

        Args:
            name: the option, e.g. ``"lr"`` or ``"entropy_coeff"``.

        Returns:
            The value to use now.
        """
        schedule = self._schedules.get(name)
        return schedule(self.global_timestep) if schedule is not None else float(getattr(self.config, name))

    def update_lr(self) -> float:
        """Apply the learning-rate schedule for the current timestep; returns the rate in use."""
        lr = self.scheduled("lr")
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    # ------------------------------------------------------------------ #
    # weights and state
    # ------------------------------------------------------------------ #
    def get_weights(self) -> dict[str, np.ndarray]:
        """The model's parameters and buffers as numpy arrays (copies)."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.model.state_dict().items()}

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Load parameters from :meth:`get_weights` output (numpy arrays or tensors)."""
        # np.array copies: arrays from Ray's object store are read-only, which torch refuses to wrap.
        self.model.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in weights.items()})

    def get_sampling_state(self) -> dict[str, Any]:
        """What a remote copy of this policy needs to act as it does: weights, timestep, observation filter.

        The timestep drives exploration schedules (epsilon); an exploration's
        own process (Ornstein-Uhlenbeck noise) stays each copy's own.
        """
        state = {"weights": self.get_weights(), "global_timestep": int(self.global_timestep)}
        if self.observation_filter is not None:
            state["observation_filter"] = self.observation_filter.get_state()
        return state

    def set_sampling_state(self, state: dict[str, Any]) -> None:
        """Act like the policy :meth:`get_sampling_state` was read from."""
        self.set_weights(state["weights"])
        self.global_timestep = state["global_timestep"]
        if self.observation_filter is not None and "observation_filter" in state:
            self.observation_filter.set_state(state["observation_filter"])

    def get_rng_state(self) -> dict[str, Any]:
        """The state of this copy's generators and exploration: what makes its next actions the same."""
        return {
            "torch_rng": self.torch_rng.get_state(),
            "torch_rng_device": self.torch_rng.device.type,
            "np_rng": json.dumps(generator_state(self.np_rng)),
            "exploration": self.exploration.get_state(),
        }

    def set_rng_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_rng_state`.

        A torch generator saved on another kind of device (a policy trained on a
        GPU, restored on a CPU) cannot be set here; this copy keeps its own.

        Raises:
            ValueError: a generator state does not fit (a tampered file).
        """
        if state.get("torch_rng_device", "cpu") == self.torch_rng.device.type:
            set_torch_generator_state(self.torch_rng, state["torch_rng"])
        set_generator_state(self.np_rng, json.loads(state["np_rng"]))
        self.exploration.set_state(state.get("exploration", {}))

    @classmethod
    def from_checkpoint(
        cls, checkpoint_path: str | os.PathLike[str], policy_id: str = DEFAULT_POLICY_ID, *, trust_code: bool = False
    ) -> Policy:
        """One policy of an algorithm checkpoint, alone: to act with it, or as a frozen opponent.

        Nothing else of the algorithm is built: no environment, no env runners;
        the checkpoint's env and callbacks are not even resolved. The policy is
        of the class the checkpoint's algorithm uses, whichever class this is
        called on.

        Args:
            checkpoint_path: an algorithm checkpoint folder (``algo.save()``).
            policy_id: the policy to load.
            trust_code: import what the checkpoint names (a custom model by path) even if
                it is not registered; only for checkpoints you trust.

        Returns:
            The policy, with the checkpoint's weights, filter statistics and timestep.

        Raises:
            CheckpointError: the checkpoint is damaged, has no such policy, stores its spaces
                only as descriptions (corral 0.1), or names code that is not registered.
        """
        from corral.core.persistence import checkpoints
        from corral.core.persistence.checkpoint_classes import algorithm_class_of

        ckpt = checkpoints.read_checkpoint(checkpoint_path)
        # the algorithm that wrote it knows how its policies are configured; found through the registry
        return algorithm_class_of(ckpt, trust_code).load_policy(ckpt, policy_id, trust_code)

    def get_state(self) -> dict[str, Any]:
        """Everything needed to resume: weights, optimizer, exploration, generators, filter, timestep. Tensors only."""
        state: dict[str, Any] = {
            "weights": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            **self.get_rng_state(),
            "global_timestep": int(self.global_timestep),
        }
        if self.observation_filter is not None:
            state["observation_filter"] = self.observation_filter.get_state()
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned.

        Raises:
            ValueError: the weights are not finite, or the optimizer's state does
                not fit the parameters (a tampered or mismatched checkpoint).
        """
        load_finite_weights(self.model, state["weights"])
        self.optimizer.load_state_dict(state["optimizer"])
        check_optimizer_state(self.optimizer)
        if "torch_rng" in state:  # checkpoints of corral 0.1 have none: the generators stay as they are
            self.set_rng_state(state)
        else:
            self.exploration.set_state(state.get("exploration", {}))
        self.global_timestep = restored_count(state.get("global_timestep", 0), "global_timestep")
        if self.observation_filter is not None and "observation_filter" in state:
            self.observation_filter.set_state(state["observation_filter"])


def build_policy(
    policy_class: type[Policy],
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    config: AlgorithmConfig,
    *path: str | int,
    device: torch.device | None = None,
) -> Policy:
    """Build a policy copy whose initial weights and generators all come from ``config.seed`` and ``path``.

    The model's initial weights are drawn from torch's global generator
    (``torch.nn.init``), forked and seeded for the duration, so two algorithms
    built with one seed start from the same weights and the process's
    generator is left alone.

    Args:
        policy_class: the algorithm's policy class.
        observation_space: one agent's observation space.
        action_space: one agent's action space.
        config: the algorithm's config (its ``seed``).
        path: names the copy: ``("policy", policy_id, stream, worker_index)``.
        device: where the policy lives (a remote env runner's device); None: the learner's (``num_gpus``).

    Returns:
        The policy, with its generators seeded.
    """
    with isolated_torch_seed(int_seed(config.seed, *path, "init")), policies_on(device):
        policy = policy_class(observation_space, action_space, config)
    policy.seed_rngs(config.seed, *path)
    return policy


class PolicyBuild(NamedTuple):
    """What builds a policy alike in every process (the learner's, each remote runner's): class, spaces, config.

    Attributes:
        policy_class: the policy's class (the algorithm's, or the one its ``PolicySpec`` names).
        observation_space: one agent's observation space.
        action_space: one agent's action space.
        config: the policy's frozen config (the algorithm's, with the policy's own options on top).
    """

    policy_class: type[Policy]
    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]
    config: AlgorithmConfig

    def build(
        self, policy_id: str, stream: str = "sampling", worker_index: int = 0, device: torch.device | None = None
    ) -> Policy:
        """A copy of the policy, seeded from the config's seed and where it lives (see :func:`build_policy`).

        Args:
            policy_id: the policy's id.
            stream: ``"sampling"`` or ``"evaluation"``.
            worker_index: 0 for the learner's copy, 1..N for remote runners'.
            device: where the copy lives; None: the learner's device (``num_gpus``).

        Returns:
            The new policy.
        """
        return build_policy(
            self.policy_class,
            self.observation_space,
            self.action_space,
            self.config,
            "policy",
            policy_id,
            stream,
            worker_index,
            device=device,
        )


def load_finite_weights(module: nn.Module, weights: Any) -> None:
    """``module.load_state_dict(weights)`` after checking every value is a finite tensor.

    Args:
        module: the network to load into.
        weights: a state dict read from a checkpoint; checked before ``module`` is touched.

    Raises:
        ValueError: ``weights`` is not a dict of tensors, or holds NaN or inf.
    """
    if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor) for v in weights.values()):
        raise ValueError("weights must be a dict of tensors")
    bad = [k for k, v in weights.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise ValueError(f"weights {bad} hold NaN or inf")
    module.load_state_dict(weights)


def check_optimizer_state(optimizer: Optimizer) -> None:
    """Check a loaded optimizer state: every per-parameter tensor has its parameter's shape and is finite.

    ``Optimizer.load_state_dict`` checks only the number of parameters; a
    moment of the wrong shape would fail only at the next step, mid-training.

    Raises:
        ValueError: a state tensor has the wrong shape or holds NaN or inf.
    """
    for group in optimizer.param_groups:
        for param in group["params"]:
            for key, value in optimizer.state.get(param, {}).items():
                if not isinstance(value, torch.Tensor):
                    continue
                if value.dim() > 0 and value.shape != param.shape:
                    raise ValueError(
                        f"optimizer state {key!r} has shape {tuple(value.shape)}, its parameter {tuple(param.shape)}"
                    )
                if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                    raise ValueError(f"optimizer state {key!r} holds NaN or inf")


def adam(params: Any, lr: float, **kwargs: Any) -> Optimizer:
    """Adam, fused into one kernel per step where this torch has the kernel for the device (CPU: torch >= 2.4).

    corral's own :class:`~corral.core.learning.fused_adam.FusedAdam` calls that
    kernel without ``torch.optim``'s first-use import of ``torch._dynamo``
    (0.85 s and 70 MB); ``torch.optim.Adam`` is built where it cannot, or where
    ``kwargs`` names an option only torch's class has (``foreach``, ``capturable``, ...).

    Args:
        params: the parameters to optimise, or param-group dicts, as ``torch.optim.Adam`` takes them.
        lr: the learning rate.
        **kwargs: Adam's other options (``eps``, ``betas``, ...).

    Returns:
        A :class:`FusedAdam`, else ``torch.optim.Adam``: fused if torch accepts ``fused=True`` for
        these parameters, the default implementation if not.
    """
    # groups' parameters as lists, so that looking at them here does not use up a generator
    params = [{**p, "params": _tensor_list(p["params"])} if isinstance(p, dict) else p for p in params]
    tensors = [t for group in params for t in (group["params"] if isinstance(group, dict) else [group])]
    if set(kwargs) <= FUSED_ADAM_OPTIONS and all(fused_adam_runs(t.device, t.dtype) for t in tensors):
        return FusedAdam(params, lr=lr, **kwargs)
    try:
        return torch.optim.Adam(params, lr=lr, fused=True, **kwargs)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(params, lr=lr, **kwargs)


def _tensor_list(params: Any) -> list[torch.Tensor]:
    return [params] if isinstance(params, torch.Tensor) else list(params)


def build_optimizer(params: Any, spec: dict[str, Any], lr: float) -> Optimizer:
    """The torch optimizer a config's ``optimizer`` option names (Adam through :func:`adam`, fused where it can be).

    Args:
        params: the parameters to optimise, or param-group dicts (each may carry its own ``lr``).
        spec: the ``optimizer`` option: ``{"type": "adam", "eps": 1e-5, ...}``, checked by the config.
        lr: the learning rate of groups that set none.

    Returns:
        The optimizer.
    """
    kind = spec.get("type", "adam")
    # JSON and YAML give betas as a list; torch documents a tuple
    kwargs = {key: tuple(value) if isinstance(value, list) else value for key, value in spec.items() if key != "type"}
    if kind == "adam":
        return adam(params, lr=lr, **kwargs)
    return cast(Optimizer, getattr(torch.optim, OPTIMIZERS[kind])(params, lr=lr, **kwargs))


POLICY_GRADIENT_COLUMNS = [SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS]
"""The columns :meth:`ActorCriticPolicy.policy_gradient_loss` reads."""


class ActorCriticPolicy(Policy):
    """A policy whose model has a value head; its samples get GAE(lambda) advantages.

    Shared by the on-policy actor-critic algorithms (PPO, A2C, third-party ones
    such as REINFORCE). Their config must define ``lambda_`` (1.0 gives Monte
    Carlo returns over the fragment), and ``vf_loss_coeff`` and
    ``entropy_coeff`` to use :meth:`policy_gradient_loss`.
    """

    required_model_outputs = (SampleBatch.ACTION_DIST_INPUTS, SampleBatch.VF_PREDS)
    config: GAEConfig
    input_columns = (*POLICY_GRADIENT_COLUMNS, SampleBatch.VF_PREDS)  # vf_preds: what GAE starts from
    postprocessing_columns = (SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS)

    def postprocess_trajectory(self, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> SampleBatch:
        """Add ``advantages`` and ``value_targets``, then flatten."""
        last_values = self.compute_values(bootstrap_obs)
        with_advantages = add_gae(fragment, last_values, self.config.gamma, self.config.lambda_)
        return self.flatten_fragment(with_advantages)

    def policy_gradient_loss(self, t: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The vanilla actor-critic loss on the :data:`POLICY_GRADIENT_COLUMNS` of ``t``.

        ``-log pi(a|s) * A + vf_loss_coeff * (V(s) - target)^2 / 2 - entropy_coeff * H[pi(.|s)]``,
        each term a mean over the batch.

        Returns:
            The total loss, and it and its terms as tensors by name (``total_loss``,
            ``policy_loss``, ``vf_loss``, ``entropy``), for :func:`to_floats`.
        """
        cfg = self.config
        out = self.model.forward_train(t[SampleBatch.OBS])
        dist = self.dist_class(out[SampleBatch.ACTION_DIST_INPUTS])
        policy_loss = -(dist.logp(t[SampleBatch.ACTIONS]) * t[SampleBatch.ADVANTAGES]).mean()
        vf_loss = 0.5 * (out[SampleBatch.VF_PREDS] - t[SampleBatch.VALUE_TARGETS]).pow(2).mean()
        entropy = dist.entropy().mean()
        total = policy_loss + cfg.vf_loss_coeff * vf_loss - self.scheduled("entropy_coeff") * entropy
        return total, {"total_loss": total, "policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy}


def standardize(x: torch.Tensor) -> torch.Tensor:
    """``x`` shifted and scaled to mean 0 and standard deviation 1 over the batch (advantage normalisation)."""
    return (x - x.mean()) / (x.std() + 1e-8)


def to_floats(tensors: dict[str, torch.Tensor]) -> dict[str, float]:
    """Scalar tensors to floats with one device sync, for learner stats."""
    return dict(zip(tensors, torch.stack([t.detach() for t in tensors.values()]).tolist(), strict=True))
