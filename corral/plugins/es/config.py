"""ES's and ARS's hyperparameters: RLlib's option names and defaults, and what perturbing whole weights rules out."""

from __future__ import annotations

from corral.core import AlgorithmConfig, ConfigError, option


class EvolutionConfig(AlgorithmConfig, defaults={"observation_filter": "MeanStdFilter"}):
    """What ES and ARS share: the perturbations, the shared noise table, the episodes that report the return."""

    noise_stdev: float = option(0.02, "training", gt=0)
    """standard deviation of the weight perturbations (noise_stdev x a slice of the noise table)"""
    noise_size: int = option(250_000_000, "training", ge=1, le=2**31 - 1)
    """numbers in the shared noise table (float32; 250M is 1 GB): one table per node, read by every env runner there"""
    eval_prob: float = option(0.03, "training", ge=0, lt=1)
    """probability that an episode slot plays the unperturbed weights instead; those episodes are the reported return"""
    report_length: int = option(10, "reporting", ge=1, le=1_000_000)
    """episode_reward_mean is the mean over the unperturbed episodes of the last report_length iterations"""
    action_noise_std: float = option(0.01, "training", ge=0)
    """standard deviation of Gaussian noise added to Box actions in perturbed episodes"""

    def validate(self) -> None:  # type: ignore[override]  # replaces pydantic's deprecated classmethod, as AlgorithmConfig's does
        """The rules of perturbing whole weights first, then the base checks.

        Raises:
            ConfigError: an option asks for something ES and ARS cannot do.
        """
        problems = (
            (
                self.num_learners > 0,
                "num_learners > 0: ES and ARS update the weights from episode returns, with no gradient to share "
                "out; set num_learners=0 and add env runners instead",
            ),
            (
                len(self.policies) > 1,
                "ES and ARS perturb one policy; train several with PPO or IMPALA",
            ),
        )
        for wrong, message in problems:
            if wrong:
                raise ConfigError(message)
        super().validate()

    def step_size(self) -> float:
        """The optimizer's step size (``stepsize`` for ES, ``sgd_stepsize`` for ARS)."""
        raise NotImplementedError

    def optimizer_type(self) -> str:
        """The optimizer of the weights' update: ``"adam"`` (ES) or ``"sgd"`` (ARS)."""
        raise NotImplementedError


class ESConfig(EvolutionConfig, defaults={"train_batch_size": 10_000, "num_env_runners": 10}):
    """Config of :class:`~corral.plugins.es.ES`: OpenAI's evolution strategies, with RLlib's defaults.

    Each iteration plays mirrored pairs of episodes (weights plus and minus a
    perturbation drawn from the shared noise table) until at least
    ``episodes_per_batch`` episodes and ``train_batch_size`` env steps; the
    returns' centered ranks weight the perturbations into a gradient estimate,
    which Adam (``stepsize``) follows with an ``l2_coeff`` weight decay.
    """

    l2_coeff: float = option(0.005, "training", ge=0)
    """weight decay: l2_coeff x the weights is added to the step's gradient"""
    episodes_per_batch: int = option(1000, "training", ge=2, le=2**31 - 1)
    """perturbed episodes per iteration, at least (two per perturbation)"""
    stepsize: float = option(0.01, "training", gt=0)
    """Adam's step size"""

    def step_size(self) -> float:
        """``stepsize``."""
        return self.stepsize

    def optimizer_type(self) -> str:
        """Adam, as OpenAI's ES and RLlib's."""
        return "adam"


class ARSConfig(EvolutionConfig, defaults={"num_env_runners": 2, "action_noise_std": 0.0}):
    """Config of :class:`~corral.plugins.es.ARS`: augmented random search, with RLlib's defaults.

    Each iteration plays mirrored pairs of episodes for ``num_rollouts``
    episodes, at least; the ``rollouts_used`` directions with the best return
    of the two make the step, scaled by the standard deviation of their
    returns, taken by plain SGD (``sgd_stepsize``). ``offset`` is subtracted
    from every reward (a survival bonus, say).
    """

    num_rollouts: int = option(32, "training", ge=2, le=2**31 - 1)
    """perturbed episodes per iteration, at least (two per direction)"""
    rollouts_used: int = option(32, "training", ge=1, le=2**31 - 1)
    """episodes whose directions make the step: the best directions by their better return (at most num_rollouts)"""
    sgd_stepsize: float = option(0.01, "training", gt=0)
    """SGD's step size"""
    offset: float = option(0.0, "training")
    """subtracted (as its absolute value) from every reward of a perturbed or unperturbed episode"""

    def step_size(self) -> float:
        """``sgd_stepsize``."""
        return self.sgd_stepsize

    def optimizer_type(self) -> str:
        """Plain SGD, as ARS and RLlib's."""
        return "sgd"
