"""Position Transformer: one pre-LayerNorm transformer whose `position_encoding` field selects NoPE, learned absolute
positions, RoPE, T5's relative bias, FIRE or Abacus embeddings, so that they compare on one backbone."""

from .configuration_position_transformer import PositionTransformerConfig
from .modeling_position_transformer import (
    PositionTransformerForSequenceClassification,
    PositionTransformerModel,
    PositionTransformerPreTrainedModel,
)

PositionTransformerConfig.register_for_auto_class()
PositionTransformerModel.register_for_auto_class("AutoModel")
PositionTransformerForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")

__all__ = [
    "PositionTransformerConfig",
    "PositionTransformerForSequenceClassification",
    "PositionTransformerModel",
    "PositionTransformerPreTrainedModel",
]
