"""lengthgen models. Importing this package registers every config and model with the transformers Auto classes."""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
)

from .answer_slots import AnswerReader, AnswerSlotsConfig, LSTMEncoder
from .ibert import IBertConfig, IBertForMaskedLM, IBertForSequenceClassification, IBertModel, IBertPreTrainedModel
from .lstm import LSTMClassifierConfig, LSTMForSequenceClassification, LSTMPreTrainedModel
from .ndr import (
    NDRConfig,
    NDRForSequenceClassification,
    NDRModel,
    NDRPreTrainedModel,
    geometric_attention,
    geometric_attention_weights,
)
from .position_transformer import (
    PositionTransformerConfig,
    PositionTransformerForSequenceClassification,
    PositionTransformerModel,
    PositionTransformerPreTrainedModel,
)
from .recurrence import (
    CausalLMWithRecurrence,
    CausalLMWithRecurrenceConfig,
    GPT2WithRecurrence,
    GPT2WithRecurrenceConfig,
    RecurrentState,
    RobertaWithRecurrenceConfig,
    RobertaWithRecurrenceForQuestionAnswering,
    check_overlap,
)
from .recurrence.flops import flops_per_token
from .stack_rnn import StackRNNConfig, StackRNNForSequenceClassification, StackRNNModel, StackRNNPreTrainedModel
from .tape_rnn import TapeRNNConfig, TapeRNNForSequenceClassification, TapeRNNModel, TapeRNNPreTrainedModel
from .universal_transformer import (
    UniversalTransformerConfig,
    UniversalTransformerForSequenceClassification,
    UniversalTransformerModel,
    UniversalTransformerPreTrainedModel,
)

for config_class, model_classes in (
    (AnswerSlotsConfig, {AutoModelForMaskedLM: AnswerReader}),
    (IBertConfig, {AutoModel: IBertModel, AutoModelForMaskedLM: IBertForMaskedLM,
                   AutoModelForSequenceClassification: IBertForSequenceClassification}),
    (NDRConfig, {AutoModel: NDRModel, AutoModelForSequenceClassification: NDRForSequenceClassification}),
    (CausalLMWithRecurrenceConfig, {AutoModelForCausalLM: CausalLMWithRecurrence}),
    (GPT2WithRecurrenceConfig, {AutoModelForCausalLM: GPT2WithRecurrence}),
    (RobertaWithRecurrenceConfig, {AutoModelForQuestionAnswering: RobertaWithRecurrenceForQuestionAnswering}),
    (LSTMClassifierConfig, {AutoModelForSequenceClassification: LSTMForSequenceClassification}),
    (UniversalTransformerConfig, {AutoModel: UniversalTransformerModel,
                                  AutoModelForSequenceClassification: UniversalTransformerForSequenceClassification}),
    (StackRNNConfig, {AutoModel: StackRNNModel, AutoModelForSequenceClassification: StackRNNForSequenceClassification}),
    (TapeRNNConfig, {AutoModel: TapeRNNModel, AutoModelForSequenceClassification: TapeRNNForSequenceClassification}),
    (PositionTransformerConfig, {AutoModel: PositionTransformerModel,
                                 AutoModelForSequenceClassification: PositionTransformerForSequenceClassification}),
):
    AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    for auto_class, model_class in model_classes.items():
        auto_class.register(config_class, model_class, exist_ok=True)

__all__ = [
    "AnswerReader",
    "AnswerSlotsConfig",
    "CausalLMWithRecurrence",
    "CausalLMWithRecurrenceConfig",
    "GPT2WithRecurrence",
    "GPT2WithRecurrenceConfig",
    "IBertConfig",
    "IBertForMaskedLM",
    "IBertForSequenceClassification",
    "IBertModel",
    "IBertPreTrainedModel",
    "LSTMEncoder",
    "LSTMClassifierConfig",
    "LSTMForSequenceClassification",
    "LSTMPreTrainedModel",
    "NDRConfig",
    "NDRForSequenceClassification",
    "NDRModel",
    "NDRPreTrainedModel",
    "PositionTransformerConfig",
    "PositionTransformerForSequenceClassification",
    "PositionTransformerModel",
    "PositionTransformerPreTrainedModel",
    "RecurrentState",
    "RobertaWithRecurrenceConfig",
    "RobertaWithRecurrenceForQuestionAnswering",
    "StackRNNConfig",
    "StackRNNForSequenceClassification",
    "StackRNNModel",
    "StackRNNPreTrainedModel",
    "TapeRNNConfig",
    "TapeRNNForSequenceClassification",
    "TapeRNNModel",
    "TapeRNNPreTrainedModel",
    "UniversalTransformerConfig",
    "UniversalTransformerForSequenceClassification",
    "UniversalTransformerModel",
    "UniversalTransformerPreTrainedModel",
    "check_overlap",
    "flops_per_token",
    "geometric_attention",
    "geometric_attention_weights",
]
