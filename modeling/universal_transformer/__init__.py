"""Universal Transformer (Dehghani et al. 2019): one transformer layer shared across steps, optionally causal (the
Sequential Universal Transformer) and with adaptive computation time."""

from .configuration_universal_transformer import UniversalTransformerConfig
from .modeling_universal_transformer import (
    UniversalTransformerForSequenceClassification,
    UniversalTransformerModel,
    UniversalTransformerPreTrainedModel,
)

UniversalTransformerConfig.register_for_auto_class()
UniversalTransformerModel.register_for_auto_class("AutoModel")
UniversalTransformerForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")

__all__ = [
    "UniversalTransformerConfig",
    "UniversalTransformerForSequenceClassification",
    "UniversalTransformerModel",
    "UniversalTransformerPreTrainedModel",
]
