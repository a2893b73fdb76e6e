"""``ModelCatalog``: RLlib's registry of custom models by name.

``ModelCatalog.register_custom_model("my_model", MyModel)`` lets a config say
``model={"custom_model": "my_model", "custom_model_config": {...}}``; the
config, its Tune trials and its checkpoints then hold the name, not the class
(see :mod:`corral.core.contracts.options.model_names`, where the names live).
A script that restores such a checkpoint registers the name again before it
does. Custom action distributions (``register_custom_action_dist``) come with a
later step of issue 31.
"""

from __future__ import annotations

from corral.core.contracts.options.model_names import register_model_class


class ModelCatalog:
    """RLlib's ``ModelCatalog``: where custom models are registered by name."""

    @staticmethod
    def register_custom_model(model_name: str, model_class: type) -> None:
        """Register a custom model class under a name, for ``model={"custom_model": model_name}``.

        Registering a name again replaces its class. Remote env runners get the
        classes their config names; where Ray Tune is imported the name is
        registered with Tune too, for its trials.

        Args:
            model_name: the name configs use; any non-empty string.
            model_class: a ``torch.nn.Module`` subclass: a :class:`~corral.core.networks.model_v2.TorchModelV2`,
                a plain module or a corral ``Model`` (see :mod:`corral.core.networks.custom_model`).

        Raises:
            ConfigError: the name is not a non-empty string, or the class is not a ``torch.nn.Module`` subclass.
        """
        register_model_class(model_name, model_class)
