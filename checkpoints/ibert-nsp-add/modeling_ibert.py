"""PyTorch I-BERT: BERT with its position embeddings replaced by one bidirectional recurrent layer.

Nam et al., "I-BERT: Inductive Generalization of Transformer to Arbitrary Context Lengths" (§4, Figure 2c):

    token embeddings -> bidirectional LSTM (hidden_size // 2 units per direction) -> LayerNorm -> dropout
    -> BERT encoder layers (no position embeddings) -> BERT's MLM head tied to the input embeddings

The recurrent layer gives an O(n) computation path between tokens, which is what lets the model carry rules such as
the carry of an addition to lengths it never saw. Everything above it is BERT, module for module, so parameter names
match `BertForMaskedLM`'s wherever the two architectures agree.

This file imports only torch, transformers and its own folder, so `save_pretrained` can ship it with a checkpoint and
`AutoModel*.from_pretrained(..., trust_remote_code=True)` loads it without lengthgen installed.
"""

import os

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPooling, MaskedLMOutput, SequenceClassifierOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.utils import can_return_tuple
from transformers.utils.output_capturing import capture_outputs

from .configuration_ibert import IBertConfig


def reverse_padded(hidden_states: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse the first `lengths[b]` positions of each row b in place; the padding after them stays where it is."""
    positions = torch.arange(hidden_states.shape[1], device=hidden_states.device)[None, :]
    source = lengths[:, None] - 1 - positions
    source = torch.where(source >= 0, source, positions)
    return hidden_states.gather(1, source[..., None].expand_as(hidden_states))


class IBertRecurrentLayer(nn.Module):
    """Bidirectional LSTM (or GRU) with `hidden_size // 2` units per direction, exact under right padding.

    The forward direction reads each row left to right, so padding after a row's end never reaches its real tokens.
    The backward direction reads each row's real tokens reversed in place (padding kept at the end), and its outputs
    are put back in order. A sequence's output thus does not depend on how far its batch is padded, without packing
    the batch (`pack_padded_sequence` runs the LSTM step by step at shrinking batch sizes, which is much slower on
    CPU).
    `output[:, :, :hidden//2]` is the forward direction, `output[:, :, hidden//2:]` the backward one, as in
    `nn.LSTM(bidirectional=True)`.
    """

    def __init__(self, config: IBertConfig):
        super().__init__()
        cell = nn.LSTM if config.recurrent_cell == "lstm" else nn.GRU
        self.forward_rnn = cell(config.hidden_size, config.hidden_size // 2, batch_first=True)
        self.backward_rnn = cell(config.hidden_size, config.hidden_size // 2, batch_first=True)

    def forward(self, hidden_states: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if hidden_states.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # oneDNN has no bf16 LSTM/GRU on CPUs without native bf16 (it fails to build the primitive): under CPU
            # autocast the recurrence runs in fp32, the attention layers above it in bf16.
            with torch.autocast("cpu", enabled=False):
                return self.forward(hidden_states.float(), lengths)
        forward = self.forward_rnn(hidden_states)[0]
        backward = reverse_padded(self.backward_rnn(reverse_padded(hidden_states, lengths))[0], lengths)
        return torch.cat([forward, backward], dim=-1)


class IBertEmbeddings(nn.Module):
    """Token embeddings -> recurrent layer (-> + absolute position embeddings, ablation only) -> LayerNorm
    -> dropout."""

    def __init__(self, config: IBertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.recurrent_layer = IBertRecurrentLayer(config)
        if config.position_embedding_type == "absolute":
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        else:
            self.position_embeddings = None
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids=None, inputs_embeds=None, lengths=None) -> torch.Tensor:
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        embeddings = self.recurrent_layer(inputs_embeds, lengths)
        if self.position_embeddings is not None:
            positions = torch.arange(embeddings.shape[1], device=embeddings.device)
            embeddings = embeddings + self.position_embeddings(positions)
        return self.dropout(self.LayerNorm(embeddings))


def eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Softmax attention written out, returning the output `(batch, length, heads, head_size)`, as transformers'
    attention interface returns it, and the weights. `attention_mask` is an additive bias (padding, and whatever else a
    model adds to the scores) or boolean, True where a key is seen (sdpa's mask, when the weights are asked of an sdpa
    model); `dropout` applies to the weights in training."""
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        attn_weights = attn_weights.masked_fill(~attention_mask, torch.finfo(attn_weights.dtype).min)
    elif attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value).transpose(1, 2).contiguous()
    return attn_output, attn_weights


class IBertSelfAttention(nn.Module):
    def __init__(self, config: IBertConfig):
        super().__init__()
        self.config = config
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.scaling = self.attention_head_size**-0.5
        self.is_causal = False
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.attention_head_size)
        query = self.query(hidden_states).view(hidden_shape).transpose(1, 2)
        key = self.key(hidden_states).view(hidden_shape).transpose(1, 2)
        value = self.value(hidden_states).view(hidden_shape).transpose(1, 2)

        # Fused kernels do not return the attention probabilities: fall back to eager when they are asked for.
        attention_interface = eager_attention_forward
        if not output_attentions:
            attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation,
                                                                        eager_attention_forward)
        attn_output, attn_weights = attention_interface(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=self.dropout.p if self.training else 0.0,
            scaling=self.scaling,
            is_causal=False,
        )
        return attn_output.reshape(*input_shape, -1).contiguous(), attn_weights


class IBertSelfOutput(nn.Module):
    def __init__(self, config: IBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class IBertAttention(nn.Module):
    def __init__(self, config: IBertConfig):
        super().__init__()
        self.self = IBertSelfAttention(config)
        self.output = IBertSelfOutput(config)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False):
        attn_output, attn_weights = self.self(hidden_states, attention_mask, output_attentions)
        return self.output(attn_output, hidden_states), attn_weights


class IBertIntermediate(nn.Module):
    def __init__(self, config: IBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class IBertOutput(nn.Module):
    def __init__(self, config: IBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class IBertRecurrentFeedForward(nn.Module):
    """I-BERT2's replacement of the feed-forward block: LayerNorm(h + dropout(biRNN(h)))."""

    def __init__(self, config: IBertConfig):
        super().__init__()
        self.recurrent_layer = IBertRecurrentLayer(config)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, lengths):
        return self.LayerNorm(self.dropout(self.recurrent_layer(hidden_states, lengths)) + hidden_states)


class IBertLayer(GradientCheckpointingLayer):
    """A post-LayerNorm BERT encoder layer; with `recurrence_in_every_layer` its feed-forward block is recurrent."""

    def __init__(self, config: IBertConfig):
        super().__init__()
        self.attention = IBertAttention(config)
        if config.recurrence_in_every_layer:
            self.recurrent_feed_forward = IBertRecurrentFeedForward(config)
        else:
            self.intermediate = IBertIntermediate(config)
            self.output = IBertOutput(config)

    def forward(self, hidden_states, attention_mask=None, lengths=None, output_attentions=False):
        attention_output, _ = self.attention(hidden_states, attention_mask, output_attentions)
        if hasattr(self, "recurrent_feed_forward"):
            return self.recurrent_feed_forward(attention_output, lengths)
        return self.output(self.intermediate(attention_output), attention_output)


class IBertEncoder(nn.Module):
    def __init__(self, config: IBertConfig):
        super().__init__()
        self.layer = nn.ModuleList([IBertLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask, lengths, output_attentions=False):
        for layer in self.layer:
            hidden_states = layer(hidden_states, attention_mask, lengths=lengths, output_attentions=output_attentions)
        return hidden_states


class IBertPooler(nn.Module):
    """BERT's pooler: dense + tanh on the first token."""

    def __init__(self, config: IBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


class IBertLMPredictionHead(nn.Module):
    """BERT's MLM head: dense + activation + LayerNorm, then a decoder tied to the input embeddings."""

    def __init__(self, config: IBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = ACT2FN[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, hidden_states):
        return self.decoder(self.LayerNorm(self.transform_act_fn(self.dense(hidden_states))))


class IBertPreTrainedModel(PreTrainedModel):
    config_class = IBertConfig
    base_model_prefix = "ibert"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _no_split_modules = ["IBertEmbeddings", "IBertLayer"]
    # recorded by transformers' output capturing: the embeddings and every layer's output, every layer's weights
    _can_record_outputs = {"hidden_states": IBertLayer, "attentions": IBertSelfAttention}

    @torch.no_grad()
    def _init_weights(self, module):
        """Linear and embedding weights ~ N(0, initializer_range) as in BERT; LSTM/GRU weights Xavier-uniform,
        biases 0."""
        super()._init_weights(module)
        if isinstance(module, nn.GRU):
            for name, param in module.named_parameters():
                if "weight" in name:
                    init.xavier_uniform_(param)
                else:
                    init.zeros_(param)


# what Trainer and tokenizers may pass that these models do not use, and the recorded outputs' flag (read by
# `capture_outputs`): accepted; anything else is an error
_ACCEPTED_KWARGS = {"num_items_in_batch", "token_type_ids", "output_hidden_states"}


def _check_kwargs(kwargs: dict, method: str):
    unknown = sorted(set(kwargs) - _ACCEPTED_KWARGS)
    if unknown:
        raise TypeError(f"{method}() got unexpected keyword argument(s) {', '.join(unknown)}.")


def _values_are_free(tensor: torch.Tensor) -> bool:
    """Whether the checks that read a tensor's values (token ids in the vocabulary, right padding, labels in range)
    run: on the CPU they cost nothing; on an accelerator each would stall it with a host-device sync, so they run only
    with LENGTHGEN_CHECK_INPUTS=1 (the errors are the same); never while torch.compile traces."""
    if torch.compiler.is_compiling():
        return False
    return tensor.device.type == "cpu" or os.environ.get("LENGTHGEN_CHECK_INPUTS", "") == "1"


def _check_input_ids(config, input_ids, inputs_embeds) -> tuple[int, int]:
    """Check that exactly one of `input_ids` and `inputs_embeds` is given, with a (batch_size, sequence_length) shape
    that has no empty axis, and that `input_ids` holds integer ids in the vocabulary (read where `_values_are_free`).
    Returns that shape; raises ValueError naming the problem."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("Pass exactly one of `input_ids` or `inputs_embeds`.")
    shape = tuple(input_ids.shape) if input_ids is not None else tuple(inputs_embeds.shape[:-1])
    if len(shape) != 2:
        raise ValueError(f"Expected inputs of shape (batch_size, sequence_length), got {shape}.")
    batch_size, seq_len = shape
    if batch_size == 0:
        raise ValueError("Empty batch: the inputs have batch_size 0.")
    if seq_len == 0:
        raise ValueError("Empty sequence: the inputs have sequence_length 0.")
    if input_ids is not None and (input_ids.is_floating_point() or input_ids.dtype == torch.bool):
        raise ValueError(f"input_ids must be integer token ids, got dtype {input_ids.dtype}.")
    if input_ids is not None and _values_are_free(input_ids):
        low, high = int(input_ids.min()), int(input_ids.max())
        if low < 0 or high >= config.vocab_size:
            raise ValueError(f"Token id {low if low < 0 else high} is outside the vocabulary [0, {config.vocab_size}).")
    return batch_size, seq_len


def _check_attention_mask(attention_mask: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """Check that `attention_mask` has the inputs' `shape` and (where `_values_are_free`) is right padding with a real
    token in every row. Returns the lengths, real tokens per row; raises ValueError naming the problem."""
    if tuple(attention_mask.shape) != shape:
        raise ValueError(f"attention_mask has shape {tuple(attention_mask.shape)}, expected {shape}.")
    lengths = attention_mask.long().sum(-1)
    if not _values_are_free(attention_mask):
        return lengths
    right_padded = torch.arange(shape[1], device=attention_mask.device)[None, :] < lengths[:, None]
    if not torch.equal(attention_mask.bool(), right_padded):
        raise ValueError("attention_mask must be 1 on a prefix of each row and 0 after it (right padding).")
    if int(lengths.min()) == 0:
        raise ValueError("Empty sequence: a row of attention_mask has no real token.")
    return lengths


def _check_inputs(config, input_ids, inputs_embeds, attention_mask):
    """Validate the inputs and return (batch_size, seq_len, lengths). Raises ValueError naming the problem."""
    batch_size, seq_len = _check_input_ids(config, input_ids, inputs_embeds)
    if config.position_embedding_type == "absolute" and seq_len > config.max_position_embeddings:
        raise ValueError(
            f"Sequence length {seq_len} exceeds max_position_embeddings={config.max_position_embeddings} of this "
            "model with absolute position embeddings."
        )
    if attention_mask is None:
        device = input_ids.device if input_ids is not None else inputs_embeds.device
        return batch_size, seq_len, torch.full((batch_size,), seq_len, dtype=torch.long, device=device)
    return batch_size, seq_len, _check_attention_mask(attention_mask, (batch_size, seq_len))


class IBertModel(IBertPreTrainedModel):
    """The bare I-BERT encoder: recurrent embedding layer, BERT encoder and (optionally) BERT's pooler."""

    def __init__(self, config: IBertConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = IBertEmbeddings(config)
        self.encoder = IBertEncoder(config)
        self.pooler = IBertPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPooling | tuple:
        r"""
        input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): token ids, right-padded.
        attention_mask (`torch.Tensor` of shape `(batch_size, sequence_length)`): 1 for real tokens, 0 for padding.
            It sets the lengths the recurrent layer runs over and masks padded keys in every attention layer.
        output_attentions, output_hidden_states (`bool`, *optional*): return every layer's attention weights (computed
            by the eager path) and the embeddings and every layer's output (default: the config's).
        """
        _check_kwargs(kwargs, "IBertModel.forward")
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
        _, _, lengths = _check_inputs(self.config, input_ids, inputs_embeds, attention_mask)

        hidden_states = self.embeddings(input_ids=input_ids, inputs_embeds=inputs_embeds, lengths=lengths)
        mask = create_bidirectional_mask(config=self.config, inputs_embeds=hidden_states, attention_mask=attention_mask)
        sequence_output = self.encoder(hidden_states, mask, lengths, output_attentions)
        pooled_output = self.pooler(sequence_output) if self.pooler is not None else None
        return BaseModelOutputWithPooling(last_hidden_state=sequence_output, pooler_output=pooled_output)


class IBertForMaskedLM(IBertPreTrainedModel):
    _tied_weights_keys = {"cls.decoder.weight": "ibert.embeddings.word_embeddings.weight"}

    def __init__(self, config: IBertConfig):
        super().__init__(config)
        self.ibert = IBertModel(config, add_pooling_layer=False)
        self.cls = IBertLMPredictionHead(config)
        self.post_init()

    def get_output_embeddings(self):
        return self.cls.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.decoder = new_embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> MaskedLMOutput | tuple:
        r"""
        labels (`torch.LongTensor` of shape `(batch_size, sequence_length)`): the token to restore at each position,
            -100 where no loss is taken (unmasked tokens, padding).
        num_items_in_batch (`int`, *optional*, passed by `Trainer`): labelled tokens in the whole accumulated batch;
            the loss is then the sum over this micro-batch divided by it, so gradient accumulation weighs every
            labelled token alike.
        """
        _check_kwargs(kwargs, "IBertForMaskedLM.forward")
        num_items_in_batch = kwargs.get("num_items_in_batch")
        if labels is not None:
            expected = tuple(input_ids.shape) if input_ids is not None else tuple(inputs_embeds.shape[:-1])
            if tuple(labels.shape) != expected:
                raise ValueError(f"labels have shape {tuple(labels.shape)}, expected the input shape {expected}.")
            if _values_are_free(labels):
                outside = labels[(labels != -100) & ((labels < 0) | (labels >= self.config.vocab_size))]
                if outside.numel():
                    raise ValueError(f"Label {int(outside[0])} is outside the vocabulary [0, {self.config.vocab_size}) "
                                     "(-100 marks a position without loss).")
        flags = {"output_attentions": output_attentions, "output_hidden_states": output_hidden_states}
        outputs = self.ibert(  # unset flags: the config's, as capture_outputs reads it
            input_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **{flag: value for flag, value in flags.items() if value is not None},
        )
        logits = self.cls(outputs.last_hidden_state)
        loss = None
        if labels is not None:
            flat_logits, flat_labels = logits.view(-1, self.config.vocab_size).float(), labels.view(-1)
            if num_items_in_batch is None:
                loss = nn.functional.cross_entropy(flat_logits, flat_labels)
            else:
                loss = nn.functional.cross_entropy(flat_logits, flat_labels, reduction="sum") / num_items_in_batch
        output = MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )
        return output


# Copied from lengthgen.modeling.ndr.modeling_ndr._classification_loss
def _classification_loss(logits: torch.Tensor, labels: torch.Tensor, problem_type: str | None) -> torch.Tensor:
    """The loss of a sequence classifier's `logits` `(batch, num_labels)` by the config's `problem_type`, as
    transformers' classifiers (BertForSequenceClassification) take it, which choose it when it is None: "regression"
    for one label, "single_label_classification" for integer labels, else "multi_label_classification". Mean squared
    error against float targets `(batch,)` (`(batch, num_labels)` for several), cross-entropy against class ids
    `(batch,)` (a row labelled -100 left out, as torch's cross-entropy does), binary cross-entropy with logits against
    `(batch, num_labels)` targets. Raises ValueError for labels of another shape, float class ids, or (where
    `_values_are_free`) a class outside `[0, num_labels)` but -100."""
    batch_size, num_labels = logits.shape
    if problem_type is None:
        if num_labels == 1:
            problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            problem_type = "single_label_classification"
        else:
            problem_type = "multi_label_classification"
    one_per_row = problem_type == "single_label_classification" or (problem_type == "regression" and num_labels == 1)
    expected = (batch_size,) if one_per_row else (batch_size, num_labels)
    if tuple(labels.shape) != expected:
        raise ValueError(f"labels have shape {tuple(labels.shape)}, expected {expected} for {problem_type}.")
    if problem_type == "regression":
        return F.mse_loss(logits.squeeze(-1) if num_labels == 1 else logits, labels.to(logits.dtype))
    if problem_type == "multi_label_classification":
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
    if labels.is_floating_point() or labels.dtype == torch.bool:
        raise ValueError(f"labels of single_label_classification are class ids (integers), got dtype {labels.dtype}.")
    if _values_are_free(labels) and (((labels < 0) & (labels != -100)).any() or int(labels.max()) >= num_labels):
        raise ValueError(f"Class labels must lie in [0, {num_labels}) (or be -100, left out of the loss).")
    return F.cross_entropy(logits, labels.long())


class IBertForSequenceClassification(IBertPreTrainedModel):
    """I-BERT with BERT's classification head (pooled first token -> dropout -> linear)."""

    accepts_loss_kwargs = False  # the loss is a per-batch mean: Trainer scales it for gradient accumulation

    def __init__(self, config: IBertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.ibert = IBertModel(config)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput | tuple:
        r"""
        labels (`torch.Tensor`): class ids of shape `(batch_size,)`; float targets of shape `(batch_size,)` when
            `num_labels == 1` (regression) or `(batch_size, num_labels)` for
            `problem_type="multi_label_classification"`.
        """
        _check_kwargs(kwargs, "IBertForSequenceClassification.forward")
        flags = {"output_attentions": output_attentions, "output_hidden_states": output_hidden_states}
        outputs = self.ibert(  # unset flags: the config's, as capture_outputs reads it
            input_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **{flag: value for flag, value in flags.items() if value is not None},
        )
        logits = self.classifier(self.dropout(outputs.pooler_output))
        loss = _classification_loss(logits, labels, self.config.problem_type) if labels is not None else None
        output = SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )
        return output


__all__ = [
    "IBertForMaskedLM",
    "IBertForSequenceClassification",
    "IBertModel",
    "IBertPreTrainedModel",
]
