"""Neural Data Router (Csordás et al.): shared-layer transformer with a copy gate and geometric attention."""

from .configuration_ndr import NDRConfig
from .geometric_attention import geometric_attention, geometric_attention_weights
from .modeling_ndr import NDRForSequenceClassification, NDRModel, NDRPreTrainedModel

NDRConfig.register_for_auto_class()
NDRModel.register_for_auto_class("AutoModel")
NDRForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")

__all__ = [
    "NDRConfig",
    "NDRForSequenceClassification",
    "NDRModel",
    "NDRPreTrainedModel",
    "geometric_attention",
    "geometric_attention_weights",
]
