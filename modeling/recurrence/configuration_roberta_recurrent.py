"""Configuration of RoBERTa with window-level recurrence for extractive question answering (Yoshida et al. 2020, "Adding
Recurrence to Pretrained Transformers", §5.4)."""

from transformers import RobertaConfig

from .recurrence_module import check_recurrence_fields


class RobertaWithRecurrenceConfig(RobertaConfig):
    r"""
    A `RobertaConfig` plus the recurrence of §5.4. A question with a long context is read as windows that each begin
    with the question and a separator (built by the data code); the final layer of window i, mean-pooled over its
    real tokens, goes through a feed-forward network into h_prev, one extra key and value at layer `insertion_layer`
    of window i + 1 (bidirectional attention: every position sees it). The [CLS] states of all windows are max-pooled
    into the answer-type classifier (span / yes / no).

    Args:
        insertion_layer (`int`, defaults to 1): l_ins, the (0-based) index of the layer whose self-attention gets
            h_prev. The paper's "second layer" (§5.4, l_ins = 2, layers counted from 1): index 1 here.
        recurrence_hidden_size (`int`, defaults to 768), recurrence_num_hidden_layers (`int`, defaults to 1): the
            network from z to h_prev: this many ReLU hidden layers of this width. The paper's "2 layer,
            768-dimensional hidden layer MLP" is read as two linear layers around one hidden layer of 768.
        recurrence_pooling (`str`, defaults to "last_layer"): "last_layer" (paper, §5.4: mean of the final layer) or
            "layer_weighted" (Eq. 1, as in the GPT-2 models).
        use_recurrence (`bool`, defaults to True): False is the disjoint baseline of Table 3: the same windows, each
            read on its own.
        num_answer_types (`int`, defaults to 3): classes of the answer-type classifier (span, yes, no).
        Other arguments are `RobertaConfig`'s.
    """

    model_type = "roberta_recurrent"

    def __init__(
        self,
        insertion_layer=1,
        recurrence_hidden_size=768,
        recurrence_num_hidden_layers=1,
        recurrence_pooling="last_layer",
        use_recurrence=True,
        num_answer_types=3,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_recurrence_fields(insertion_layer, self.num_hidden_layers, "num_hidden_layers", recurrence_hidden_size,
                                recurrence_num_hidden_layers, recurrence_pooling)
        if num_answer_types < 1:
            raise ValueError(f"num_answer_types must be >= 1, got {num_answer_types}")
        self.insertion_layer = insertion_layer
        self.recurrence_hidden_size = recurrence_hidden_size
        self.recurrence_num_hidden_layers = recurrence_num_hidden_layers
        self.recurrence_pooling = recurrence_pooling
        self.use_recurrence = use_recurrence
        self.num_answer_types = num_answer_types


__all__ = ["RobertaWithRecurrenceConfig"]
