"""PyTorch Neural Data Router (Csordás et al.; thesis chapter 5, appendix D).

One transformer layer is applied `num_layers` times with shared weights (§5.1). Each step t computes, per column i,

    a = LayerNorm(h + Attention(h))                  (Eq. 5.1)
    u = LayerNorm(FFN_data(a))        no residual    (Eq. 5.2)
    g = sigmoid(FFN_gate(a))          the copy gate  (Eq. 5.3)
    h' = g * u + (1 - g) * h                         (Eq. 5.4)

so a column can keep its state unchanged until its inputs are ready. Attention is geometric (Eq. 5.6-5.10): each
target attends to its closest matching source, with a learned left/right preference from the target state. Config
fields switch to softmax attention, to absolute, relative or gated absolute/relative positions (appendix D.2) and off
the copy gate, which gives the baselines of Tables 5.1, 5.3 and 5.4 from the same code.

This file imports only torch, transformers and its own folder, so checkpoints load with `trust_remote_code=True`.
"""

import os
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.utils import ModelOutput, can_return_tuple
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .configuration_ndr import NDRConfig
from .geometric_attention import geometric_attention, geometric_attention_weights, geometric_logits


@dataclass
class NDRModelOutput(ModelOutput):
    """
    last_hidden_state: `(batch, length, hidden)` states after the last step.
    hidden_states: with `output_hidden_states`, the embeddings and the state after every step.
    attentions: with `output_attentions`, per step the `(batch, heads, length, length)` attention weights.
    gates: with `output_gates`, per step the `(batch, length, hidden)` copy-gate activations g (Eq. 5.3); empty
        without the copy gate.

    The three tuples are recorded by transformers' output capturing (`_can_record_outputs`) from the shared layer's
    calls, one entry per step.
    """

    last_hidden_state: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    gates: tuple[torch.Tensor, ...] | None = None


@dataclass
class NDRSequenceClassifierOutput(ModelOutput):
    """
    loss: with `labels`, the cross-entropy of the logits.
    logits: `(batch, num_labels)`, read from one column (the last real one by default) after the last step.
    hidden_states, attentions, gates: as in NDRModelOutput, when asked for (the state after the last step, which
        NDRModelOutput calls last_hidden_state, is the last entry of hidden_states).
    """

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    gates: tuple[torch.Tensor, ...] | None = None


def sinusoidal_embeddings(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """Vaswani et al.'s sinusoidal embedding of (possibly negative) positions: `(..., dim)`, sines then cosines."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32) / dim))
    angles = positions.float()[..., None] * inv_freq
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


# Copied from lengthgen.modeling.ibert.modeling_ibert.eager_attention_forward
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


class NDRAttention(nn.Module):
    """Multi-head attention: geometric (Eq. 5.10) or softmax, with none, relative or gated abs/rel positions (D.7)."""

    def __init__(self, config: NDRConfig):
        super().__init__()
        self.is_causal = False  # read by transformers' attention interface
        self.config = config
        self.num_heads = config.num_attention_heads
        self.head_size = config.hidden_size // config.num_attention_heads
        d = config.hidden_size
        self.query = nn.Linear(d, d, bias=False)  # W_q
        self.query_bias = nn.Parameter(torch.zeros(self.num_heads, self.head_size))  # b_q (Eq. 5.10), b_{q,E} (D.7)
        self.key = nn.Linear(d, d, bias=False)  # W_{k,E}
        self.value = nn.Linear(d, d, bias=False)
        self.output = nn.Linear(d, d)
        self.query_dropout = nn.Dropout(config.attention_query_dropout)
        self.key_dropout = nn.Dropout(config.attention_key_dropout)
        if config.attention_type == "geometric":
            # directional encoding (Eq. 5.9): per head, W_LR h + b_LR for sources at or right of the target,
            # W_RL h + b_RL left
            self.direction = nn.Linear(d, 2 * self.num_heads)
            self.alpha = nn.Parameter(torch.tensor(self.head_size**-0.5))
            self.beta = nn.Parameter(torch.tensor(1.0))
            self.gamma = nn.Parameter(torch.tensor(0.0))
        if config.position_encoding in ("relative", "abs_rel_gated"):
            self.position_key = nn.Linear(d, d, bias=False)  # W_{k,P}
            self.position_query_bias = nn.Parameter(torch.zeros(self.num_heads, self.head_size))  # b_{q,P}
        if config.position_encoding == "abs_rel_gated":
            # W_ar, b_ar (Eq. D.6): one gate per position, or (abs_rel_gate_per_head) one per head and position
            self.abs_rel_gate = nn.Linear(d, self.num_heads if config.abs_rel_gate_per_head else 1)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:-1], self.num_heads, self.head_size).transpose(-3, -2)

    def _heads_direction(self, hidden_states):
        # (B, N, 2H) -> (B, H, N, 2): [..., 0] = left-to-right (sources j >= i), [..., 1] = right-to-left (j < i)
        batch, n, _ = hidden_states.shape
        return self.direction(hidden_states).view(batch, n, self.num_heads, 2).permute(0, 2, 1, 3)

    def position_scores(self, hidden_states: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """Terms (b) + (d) of Eq. D.7: (W_q h_i + b_{q,P}) . W_{k,P} p, with p = p_{i-j} (relative) or, gated,
        r_i p_{i-j} + (1 - r_i) p_j. Returns `(batch, heads, N, N)`."""
        n = hidden_states.shape[1]
        position_query = self.query_dropout(query + self.position_query_bias[:, None, :])
        offsets = torch.arange(n - 1, -n, -1, device=hidden_states.device)  # i - j = n-1 ... -(n-1)
        relative_keys = self._heads(self.position_key(
            sinusoidal_embeddings(offsets, self.config.hidden_size).to(hidden_states.dtype)))
        by_offset = position_query @ relative_keys.transpose(-1, -2)  # (B, H, N, 2N-1); column c holds offset n-1-c
        i = torch.arange(n, device=hidden_states.device)[:, None]
        j = torch.arange(n, device=hidden_states.device)[None, :]
        scores = torch.take_along_dim(by_offset, (n - 1 - (i - j))[None, None], dim=-1)
        if self.config.position_encoding == "abs_rel_gated":
            absolute_keys = self._heads(self.position_key(
                sinusoidal_embeddings(j[0], self.config.hidden_size).to(hidden_states.dtype)))
            absolute = position_query @ absolute_keys.transpose(-1, -2)
            r = torch.sigmoid(self.abs_rel_gate(hidden_states)).transpose(1, 2)[..., None]  # (B, H or 1, N, 1)
            scores = r * scores + (1 - r) * absolute
        return scores

    def forward(self, hidden_states, key_padding_mask=None, output_attentions=False):
        query = self._heads(self.query(hidden_states))
        content_query = self.query_dropout(query + self.query_bias[:, None, :])
        key = self.key_dropout(self._heads(self.key(hidden_states)))
        value = self._heads(self.value(hidden_states))

        if self.config.attention_type == "geometric":
            # Eq. 5.10: alpha q_i . k_j + beta (directional term, Eq. 5.9: W_LR h_i + b_LR at j >= i, else W_RL) + gamma
            direction_bias = self.beta * self._heads_direction(hidden_states) + self.gamma  # (B, H, N, 2)
            mask = key_padding_mask[:, None, :] if key_padding_mask is not None else None
            normalize = self.config.normalize_geometric_attention
            if output_attentions:  # the weights themselves are wanted: build the (B, H, N, N) logits
                logits = geometric_logits(self.alpha * content_query, key, direction_bias)
                weights = geometric_attention_weights(logits, mask, normalize=normalize).to(value.dtype)
                context = (weights @ value).transpose(1, 2)
            else:  # fused: no (B, H, N, N) tensor is kept
                context = geometric_attention(
                    self.alpha * content_query, key, value, mask, normalize, direction_bias, scale=1.0
                ).transpose(1, 2)
        else:
            scale = self.head_size**-0.5
            bias = None
            if self.config.position_encoding in ("relative", "abs_rel_gated"):
                bias = self.position_scores(hidden_states, query) * scale
            if key_padding_mask is not None:
                padding = torch.zeros(key_padding_mask.shape, dtype=content_query.dtype, device=hidden_states.device)
                padding = padding.masked_fill(~key_padding_mask, torch.finfo(content_query.dtype).min)[:, None, None, :]
                bias = padding if bias is None else bias + padding
            # transformers' attention interface ("sdpa" by default); the weights themselves need the eager path
            attention_interface = eager_attention_forward
            if not output_attentions:
                attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation,
                                                                            eager_attention_forward)
            context, weights = attention_interface(
                self, content_query, key, value, bias, dropout=0.0, scaling=scale, is_causal=False
            )
        context = context.reshape(hidden_states.shape)  # (B, N, H, D) -> (B, N, H * D)
        return self.output(context), (weights if output_attentions else None)


class NDRLayer(GradientCheckpointingLayer):
    """The shared layer: Eq. 5.1-5.4 with the copy gate, or a post-LayerNorm transformer layer without it."""

    def __init__(self, config: NDRConfig):
        super().__init__()
        self.config = config
        d = config.hidden_size
        self.attention = NDRAttention(config)
        self.attention_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.data_ffn_in = nn.Linear(d, config.intermediate_size)  # FFN^data (Eq. 5.5)
        self.data_ffn_out = nn.Linear(config.intermediate_size, d)
        if config.copy_gate:
            self.update_norm = (
                nn.LayerNorm(d, eps=config.layer_norm_eps) if config.update_normalization == "layernorm" else None
            )
            self.gate_ffn_in = nn.Linear(d, d)  # FFN^gate, d x d
            self.gate_ffn_out = nn.Linear(d, d)
            self.gate_ffn_out.initial_bias = config.gate_bias_init  # gates start nearly closed (§5.1.1)
        else:
            self.output_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)

    def forward(self, hidden_states, key_padding_mask=None, output_attentions=False):
        attention_output, weights = self.attention(hidden_states, key_padding_mask, output_attentions)
        a = self.attention_norm(hidden_states + self.dropout(attention_output))  # Eq. 5.1
        update = self.data_ffn_out(self.dropout(F.relu(self.data_ffn_in(a))))
        if not self.config.copy_gate:
            return self.output_norm(a + self.dropout(update)), weights, None
        u = self.update_norm(update) if self.update_norm is not None else torch.tanh(update)  # Eq. 5.2
        g = torch.sigmoid(self.gate_ffn_out(self.dropout(F.relu(self.gate_ffn_in(a)))))  # Eq. 5.3
        if self.training and self.config.gate_dropout > 0:  # authors' code: sometimes copy a whole column
            closed = torch.rand(*g.shape[:-1], 1, device=g.device) < self.config.gate_dropout
            g = g.masked_fill(closed, 0.0)
        return g * u + (1 - g) * hidden_states, weights, g  # Eq. 5.4


class NDRPreTrainedModel(PreTrainedModel):
    config_class = NDRConfig
    base_model_prefix = "ndr"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _no_split_modules = ["NDRLayer"]
    # recorded at every call of the shared layer: its input the first time, then each step's output (hidden states),
    # its attention weights when asked for, and its copy gates
    _can_record_outputs = {
        "hidden_states": NDRLayer,
        "attentions": NDRAttention,
        "gates": OutputRecorder(NDRLayer, index=2),
    }

    @torch.no_grad()
    def _init_weights(self, module):
        """Xavier-uniform linear weights and zero biases as in the authors' code; FFN^gate's output bias at
        `gate_bias_init` (-3, §5.1.1); alpha = 1/sqrt(d_head), beta = 1, gamma = 0 (Eq. 5.10)."""
        if isinstance(module, nn.Linear):
            init.xavier_uniform_(module.weight)
            if module.bias is not None:
                init.constant_(module.bias, getattr(module, "initial_bias", 0.0))
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=self.config.initializer_range)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        if isinstance(module, NDRAttention):
            init.zeros_(module.query_bias)
            if hasattr(module, "alpha"):
                init.constant_(module.alpha, module.head_size**-0.5)
                init.constant_(module.beta, 1.0)
                init.constant_(module.gamma, 0.0)
            if hasattr(module, "position_query_bias"):
                init.zeros_(module.position_query_bias)


# what Trainer and tokenizers may pass that these models do not use, and the recorded outputs' flags (read by
# `capture_outputs`): accepted; anything else is an error
_ACCEPTED_KWARGS = {"num_items_in_batch", "token_type_ids", "output_hidden_states", "output_gates"}


# Copied from lengthgen.modeling.ibert.modeling_ibert._check_kwargs
def _check_kwargs(kwargs: dict, method: str):
    unknown = sorted(set(kwargs) - _ACCEPTED_KWARGS)
    if unknown:
        raise TypeError(f"{method}() got unexpected keyword argument(s) {', '.join(unknown)}.")


# Copied from lengthgen.modeling.ibert.modeling_ibert._values_are_free
def _values_are_free(tensor: torch.Tensor) -> bool:
    """Whether the checks that read a tensor's values (token ids in the vocabulary, right padding, labels in range)
    run: on the CPU they cost nothing; on an accelerator each would stall it with a host-device sync, so they run only
    with LENGTHGEN_CHECK_INPUTS=1 (the errors are the same); never while torch.compile traces."""
    if torch.compiler.is_compiling():
        return False
    return tensor.device.type == "cpu" or os.environ.get("LENGTHGEN_CHECK_INPUTS", "") == "1"


# Copied from lengthgen.modeling.ibert.modeling_ibert._check_input_ids
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


# Copied from lengthgen.modeling.ibert.modeling_ibert._check_attention_mask
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
    """Validate the inputs. Raises ValueError naming the problem."""
    batch_size, seq_len = _check_input_ids(config, input_ids, inputs_embeds)
    if attention_mask is not None:
        _check_attention_mask(attention_mask, (batch_size, seq_len))


def _readout_column(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, classifier_position: str):
    """(rows, columns): the column of each row that the classifier reads, the first one or the last real one (the last
    one without an attention mask)."""
    rows = torch.arange(hidden_states.shape[0], device=hidden_states.device)
    if classifier_position == "first":
        return rows, torch.zeros_like(rows)
    if attention_mask is None:
        return rows, torch.full_like(rows, hidden_states.shape[1] - 1)
    return rows, attention_mask.long().sum(-1) - 1


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


class NDRModel(NDRPreTrainedModel):
    """Token embeddings (+ sinusoidal positions when `position_encoding="absolute"`) and the shared NDR layer."""

    def __init__(self, config: NDRConfig):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.layer = NDRLayer(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings

    def set_input_embeddings(self, value):
        self.embeddings = value

    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        num_steps: int | None = None,
        output_attentions: bool | None = None,
        **kwargs,
    ) -> NDRModelOutput | tuple:
        r"""
        num_steps (`int`, *optional*): steps of the shared layer for this call; default `config.num_steps`, else
            `config.num_layers`. More steps than in training let a model go deeper at test time (appendix D.3.1).
        output_attentions, output_hidden_states, output_gates (`bool`, *optional*): return the attention weights,
            the states and the copy-gate activations of every step (default: the config's `output_*`).
        """
        _check_kwargs(kwargs, "NDRModel.forward")
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
        steps = num_steps if num_steps is not None else (self.config.num_steps or self.config.num_layers)
        if steps < 1:
            raise ValueError(f"num_steps must be >= 1, got {steps}")
        _check_inputs(self.config, input_ids, inputs_embeds, attention_mask)
        key_padding_mask = attention_mask.bool() if attention_mask is not None else None

        hidden_states = self.embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        if self.config.position_encoding == "absolute":
            positions = torch.arange(hidden_states.shape[1], device=hidden_states.device)
            hidden_states = (
                hidden_states + sinusoidal_embeddings(positions, self.config.hidden_size).to(hidden_states.dtype)
            )
        for _ in range(steps):
            hidden_states = self.layer(
                hidden_states, key_padding_mask=key_padding_mask, output_attentions=bool(output_attentions)
            )[0]
        return NDRModelOutput(last_hidden_state=hidden_states)


class NDRForSequenceClassification(NDRPreTrainedModel):
    """NDR with a linear classifier on one column of the final step: the last real one (the end token) by default."""

    accepts_loss_kwargs = False

    def __init__(self, config: NDRConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.ndr = NDRModel(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def _check_readout_token(self, read_ids: torch.Tensor):
        """The classifier reads the end token's column (or the begin token's): raise if a row has another token
        there."""
        last = self.config.classifier_position == "last"
        expected = self.config.eos_token_id if last else self.config.bos_token_id
        if expected is None or not _values_are_free(read_ids):
            return
        wrong = (read_ids != expected).nonzero()
        if len(wrong):
            row = int(wrong[0])
            raise ValueError(
                f"Row {row} has token id {int(read_ids[row])} in its {'last real' if last else 'first'} column, "
                f"where the classifier reads the {'end' if last else 'begin'} token (id {expected}): frame every "
                f"input with the begin and end tokens (the tokenizer's [CLS] ... [SEP])."
            )

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        num_steps: int | None = None,
        output_attentions: bool | None = None,
        output_gates: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> NDRSequenceClassifierOutput | tuple:
        r"""
        labels (`torch.Tensor`, *optional*): class ids `(batch_size,)` in `[0, num_labels)`; float targets
            `(batch_size,)` when `num_labels == 1` (regression) or `(batch_size, num_labels)` for
            `problem_type="multi_label_classification"`, as transformers' classifiers take them.
        """
        _check_kwargs(kwargs, "NDRForSequenceClassification.forward")
        flags = {"output_attentions": output_attentions, "output_gates": output_gates,
                 "output_hidden_states": output_hidden_states}  # unset ones: the config's, as capture_outputs reads it
        outputs = self.ndr(
            input_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            num_steps=num_steps,
            return_dict=True,
            **{flag: value for flag, value in flags.items() if value is not None},
        )
        hidden_states = outputs.last_hidden_state
        rows, column = _readout_column(hidden_states, attention_mask, self.config.classifier_position)
        if input_ids is not None:
            self._check_readout_token(input_ids[rows, column])
        logits = self.classifier(hidden_states[rows, column])
        loss = _classification_loss(logits, labels, self.config.problem_type) if labels is not None else None
        output = NDRSequenceClassifierOutput(
            loss=loss,
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            gates=outputs.gates,
        )
        return output


__all__ = ["NDRForSequenceClassification", "NDRModel", "NDRPreTrainedModel", "sinusoidal_embeddings"]
