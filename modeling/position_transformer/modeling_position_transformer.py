"""PyTorch Position Transformer: one pre-LayerNorm transformer with a choice of position signal, so that the position
encodings compared in the length-generalization literature run on one identical backbone (Kazemnejad, Padhi, Natesan
Ramamurthy, Das and Reddy, "The Impact of Positional Encoding on Length Generalization in Transformers", NeurIPS 2023,
arXiv:2305.19466).

With token embeddings E, L blocks and a final LayerNorm (pre-LayerNorm blocks, as GPT-2):

    H^0 = E[x] (+ P, for `"absolute"` and `"abacus"`)
    A^l = H^(l-1) + Attention(LayerNorm(H^(l-1)))
    H^l = A^l + W_2 GELU(W_1 LayerNorm(A^l))
    output = LayerNorm(H^L)
    Attention: softmax(q_i . k_j / sqrt(d_head) + b_h(i, j) + mask(i, j)) v_j, head by head

where mask(i, j) is -inf for padded keys and, with `is_causal`, for j > i. p_i is position_ids[i] (0, 1, ..., n - 1
unless the forward call gives position_ids), and `position_encoding` chooses the position signal:

* `"none"` (NoPE): P = 0, b = 0. With causal attention the model can still infer positions (Kazemnejad et al.).
* `"absolute"`: P_i = W_pos[p_i], a learned row per position.
* `"rope"` (Su et al., arXiv:2104.09864): q_i and k_j rotated by the angles p_i theta_k and p_j theta_k,
  theta_k = rope_theta^(-2k / d_head), as Llama rotates them, so q_i . k_j depends on p_i - p_j only.
* `"t5_bias"` (Raffel et al., arXiv:1910.10683): b_h(i, j) = w_h[bucket(p_j - p_i)], one learned scalar per head and
  bucket, shared by all layers. T5's buckets: of B buckets, the first B/2 hold one distance each, the others
  log-spaced ranges of distances up to `relative_attention_max_distance`, beyond which all fall in the last;
  bidirectional models give half the buckets to keys after the query, causal ones bucket max(p_i - p_j, 0).
* `"fire"` (Li et al., arXiv:2310.04418): b_h(i, j) = f_theta(psi(p_i - p_j) / psi(max(L, p_i)))_h with
  psi(x) = log(|c| x + 1), learnable c and L = |s| L_0 (s learned, L_0 = `fire_init_threshold`), and f_theta a
  one-hidden-layer ReLU MLP (width `fire_mlp_width`) with one output per head, shared by all layers. The input of
  f_theta lies in [0, 1]: for a query past L it is the distance relative to the query's own position ("progressive
  interpolation"), for one below L it depends on p_i - p_j only.
* `"alibi"` (Press, Smith and Lewis, arXiv:2108.12409): b_h(i, j) = -m_h (p_i - p_j), fixed slopes m_h: for H heads
  a power of two, m_h = 2^(-8h/H), h = 1 ... H; otherwise those of the power of two below H, then every other slope of
  twice that power (the paper's recipe, as BLOOM's). A bidirectional model takes -m_h |p_i - p_j|.
* `"abacus"` (McLeish et al., arXiv:2405.17399): P_i = W_abacus[a_i + k] for digit tokens, where a_i is the place of
  token i in its number (1 for the first digit, 2 for the next, ...), k a random offset in [0, abacus_max_offset]
  drawn per sequence in training (0 at evaluation); P_i = 0 for other tokens. b = 0.

The bias b and the mask are added to the logits as one float tensor, so the eager path and SDPA compute the same
attention. This file imports only torch, transformers and its own folder, so checkpoints load with
`trust_remote_code=True`.
"""

import math
import os

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.masking_utils import create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutput, SequenceClassifierOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
from transformers.utils import can_return_tuple
from transformers.utils.output_capturing import capture_outputs

from .configuration_position_transformer import PositionTransformerConfig

FIRE_EPS = 1e-6  # added to FIRE's normaliser psi(max(L, i)), as in the paper's implementation


def relative_position_bucket(relative_position: torch.Tensor, bidirectional: bool, num_buckets: int,
                             max_distance: int) -> torch.Tensor:
    """T5's bucket of each relative position j - i (Raffel et al. 2020): integer tensor of the same shape.

    Bidirectional: half the buckets for j - i > 0, half for j - i <= 0. Within a half of B buckets, distances
    below B / 2 have one bucket each; a longer distance d has bucket B/2 + floor(log(d / (B/2)) / log(D / (B/2)) *
    (B - B/2)), capped at B - 1 (D = max_distance). Causal: one half only, of the distance max(i - j, 0)."""
    if bidirectional:
        num_buckets //= 2
        base = (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        base = torch.zeros_like(relative_position)
        distance = (-relative_position).clamp(min=0)
    exact = num_buckets // 2
    # the log-spaced buckets, computed for every distance (those below `exact` are replaced below)
    ratio = distance.float().clamp(min=exact) / exact
    log_spaced = exact + (torch.log(ratio) / math.log(max_distance / exact) * (num_buckets - exact)).long()
    log_spaced = log_spaced.clamp(max=num_buckets - 1)
    return base + torch.where(distance < exact, distance, log_spaced)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's slope m_h of each head, `(num_heads,)`: 2^(-8h/H) for h = 1 ... H when H is a power of two; otherwise
    the slopes of the largest power of two below H, then every other slope of twice that power, as many as needed."""
    power = 2 ** math.floor(math.log2(num_heads))
    slopes = [2 ** (-8 * h / power) for h in range(1, power + 1)]
    slopes += [2 ** (-8 * h / (2 * power)) for h in range(1, 2 * power + 1, 2)][: num_heads - power]
    return torch.tensor(slopes)


def abacus_positions(input_ids: torch.Tensor, digit_ids: torch.Tensor) -> torch.Tensor:
    """The place of every token in its number (McLeish et al. 2024): `(batch, length)`, 1 for a number's first digit,
    2 for the next, ..., 0 for every token that is not a digit. A number is a run of consecutive digit tokens: the
    tokens `1 2 3 + 4 5 =` have places `1 2 3 0 1 2 0`."""
    is_digit = torch.isin(input_ids, digit_ids)
    index = torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)
    # the index of the last token at or before i that is not a digit (-1 if there is none)
    last_other = torch.where(is_digit, torch.full_like(index, -1), index).cummax(dim=1).values
    return (index - last_other) * is_digit


def rotary_cos_sin(positions: torch.Tensor, head_size: int, theta: float, dtype: torch.dtype):
    """cos and sin `(batch, length, head_size)` of the angles p theta_k, theta_k = theta^(-2k / head_size), in the
    layout of transformers' `apply_rotary_pos_emb` (each angle twice: first half, second half)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_size, 2, device=positions.device, dtype=torch.float) / head_size))
    angles = positions.float()[..., None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


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


class PositionTransformerFIRE(nn.Module):
    """FIRE's bias (Li et al. 2024): b_h(i, j) = f_theta(psi(p_i - p_j) / psi(max(L, p_i)))_h, psi(x) = log(|c| x + 1),
    L = |s| L_0, f_theta: Linear(1, width) -> ReLU -> Linear(width, heads). One module for all layers."""

    def __init__(self, config: PositionTransformerConfig):
        super().__init__()
        self.mlp_in = nn.Linear(1, config.fire_mlp_width)
        self.mlp_out = nn.Linear(config.fire_mlp_width, config.num_attention_heads)
        self.mlp_in.torch_default_init = self.mlp_out.torch_default_init = True
        self.c = nn.Parameter(torch.tensor(config.fire_init_c))
        self.threshold_scale = nn.Parameter(torch.tensor(1.0))  # s: L = |s| L_0
        self.init_threshold = config.fire_init_threshold  # L_0

    def psi(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(torch.abs(self.c * x) + 1)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        """`positions` `(batch or 1, length)` -> the bias `(batch or 1, heads, length, length)` (query i, key j)."""
        p = positions.float()
        threshold = torch.abs(self.threshold_scale * self.init_threshold)  # L
        distance = self.psi(p[:, :, None] - p[:, None, :])  # psi(i - j); j > i is masked by the causal mask
        normaliser = self.psi(torch.maximum(p, threshold))[:, :, None] + FIRE_EPS  # psi(max(L, i))
        x = (distance / normaliser)[..., None].to(self.mlp_in.weight.dtype)  # psi in fp32, f_theta in its own dtype
        bias = self.mlp_out(F.relu(self.mlp_in(x)))  # (batch, n, n, heads)
        return bias.permute(0, 3, 1, 2)


class PositionTransformerAttention(nn.Module):
    """Multi-head self-attention through transformers' attention interface (eager, sdpa); queries and keys rotated by
    `position_embeddings` (cos, sin) with `"rope"`; the position bias arrives inside the additive mask."""

    def __init__(self, config: PositionTransformerConfig):
        super().__init__()
        self.config = config
        self.is_causal = False  # causality is in the mask (or in is_causal below when there is no mask)
        self.head_size = config.hidden_size // config.num_attention_heads
        self.scaling = self.head_size**-0.5
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.output = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states, attention_mask=None, position_embeddings=None, output_attentions=False):
        shape = (*hidden_states.shape[:-1], -1, self.head_size)
        query = self.query(hidden_states).view(shape).transpose(1, 2)
        key = self.key(hidden_states).view(shape).transpose(1, 2)
        value = self.value(hidden_states).view(shape).transpose(1, 2)
        if position_embeddings is not None:
            query, key = apply_rotary_pos_emb(query, key, *position_embeddings)
        attention_interface = eager_attention_forward
        if not output_attentions:  # fused kernels do not return the weights
            attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation,
                                                                        eager_attention_forward)
        context, weights = attention_interface(
            self, query, key, value, attention_mask, scaling=self.scaling,
            is_causal=self.config.is_causal and attention_mask is None,  # no mask: sdpa's causal kernel
            dropout=self.config.attention_probs_dropout_prob if self.training else 0.0,
        )
        return self.output(context.reshape(hidden_states.shape)), weights


class PositionTransformerLayer(GradientCheckpointingLayer):
    """A pre-LayerNorm block: A = H + Attention(LayerNorm(H)), H' = A + W_2 GELU(W_1 LayerNorm(A))."""

    def __init__(self, config: PositionTransformerConfig):
        super().__init__()
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = PositionTransformerAttention(config)
        self.mlp_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.mlp_in = nn.Linear(config.hidden_size, config.intermediate_size)
        self.mlp_out = nn.Linear(config.intermediate_size, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, attention_mask=None, position_embeddings=None, output_attentions=False):
        attention_output, _ = self.attention(self.attention_norm(hidden_states), attention_mask, position_embeddings,
                                             output_attentions)
        hidden_states = hidden_states + self.dropout(attention_output)
        mlp_output = self.mlp_out(F.gelu(self.mlp_in(self.mlp_norm(hidden_states))))
        return hidden_states + self.dropout(mlp_output)


class PositionTransformerPreTrainedModel(PreTrainedModel):
    config_class = PositionTransformerConfig
    base_model_prefix = "position_transformer"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _no_split_modules = ["PositionTransformerLayer"]
    # recorded by transformers' output capturing: the embeddings and every block's output (the last one after the
    # final LayerNorm), every block's attention weights
    _can_record_outputs = {"hidden_states": PositionTransformerLayer, "attentions": PositionTransformerAttention}

    @torch.no_grad()
    def _init_weights(self, module):
        """BERT's initialisation (normal(0, initializer_range) weights and embeddings, zero biases, unit LayerNorms);
        FIRE's MLP keeps torch's default initialisation and its c and L start at `fire_init_c` and
        `fire_init_threshold`, as in the paper's implementation."""
        if getattr(module, "torch_default_init", False):  # nn.Linear's own reset_parameters, through `init`
            init.kaiming_uniform_(module.weight, a=math.sqrt(5))
            bound = 1 / math.sqrt(module.in_features)
            init.uniform_(module.bias, -bound, bound)
            return
        super()._init_weights(module)
        if isinstance(module, PositionTransformerFIRE):
            init.constant_(module.c, self.config.fire_init_c)
            init.ones_(module.threshold_scale)


# what Trainer and tokenizers may pass that these models do not use, and the recorded outputs' flag (read by
# `capture_outputs`): accepted; anything else is an error
_ACCEPTED_KWARGS = {"num_items_in_batch", "token_type_ids", "output_hidden_states"}


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


def _check_inputs(config, input_ids, inputs_embeds, attention_mask, position_ids) -> torch.Tensor:
    """Validate the inputs and return the positions p `(batch or 1, length)`: `position_ids` or 0 ... n - 1. Raises
    ValueError naming the problem."""
    batch_size, seq_len = _check_input_ids(config, input_ids, inputs_embeds)
    if attention_mask is not None:
        _check_attention_mask(attention_mask, (batch_size, seq_len))
    if config.position_encoding == "abacus" and input_ids is None:
        raise ValueError("position_encoding='abacus' reads the digits from input_ids: pass input_ids, not "
                         "inputs_embeds.")
    device = input_ids.device if input_ids is not None else inputs_embeds.device
    if position_ids is None:
        positions = torch.arange(seq_len, device=device)[None, :]
    else:
        if position_ids.is_floating_point() or position_ids.dtype == torch.bool:
            raise ValueError(f"position_ids must be integer positions, got dtype {position_ids.dtype}.")
        positions = position_ids[None, :] if position_ids.dim() == 1 else position_ids
        if positions.dim() != 2 or positions.shape[1] != seq_len or positions.shape[0] not in (1, batch_size):
            raise ValueError(f"position_ids have shape {tuple(position_ids.shape)}, expected ({batch_size}, {seq_len}) "
                             f"or ({seq_len},).")
        if _values_are_free(positions) and int(positions.min()) < 0:
            raise ValueError(f"position_ids must be >= 0, got {int(positions.min())}.")
    if config.position_encoding == "absolute" and _values_are_free(positions):
        top = int(positions.max())
        if top >= config.max_position_embeddings:
            raise ValueError(f"Position {top} (sequence length {seq_len} or a position id) is beyond the absolute "
                             f"position table: max_position_embeddings={config.max_position_embeddings}.")
    return positions


# Copied from lengthgen.modeling.ndr.modeling_ndr._readout_column
def _readout_column(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, classifier_position: str):
    """(rows, columns): the column of each row that the classifier reads, the first one or the last real one (the last
    one without an attention mask)."""
    rows = torch.arange(hidden_states.shape[0], device=hidden_states.device)
    if classifier_position == "first":
        return rows, torch.zeros_like(rows)
    if attention_mask is None:
        return rows, torch.full_like(rows, hidden_states.shape[1] - 1)
    return rows, attention_mask.long().sum(-1) - 1


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


class PositionTransformerModel(PositionTransformerPreTrainedModel):
    """Token embeddings (plus the absolute or Abacus embeddings), the pre-LayerNorm blocks with the rotary or bias
    position signal in their attention, and a final LayerNorm."""

    def __init__(self, config: PositionTransformerConfig):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        encoding = config.position_encoding
        if encoding == "absolute":
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        elif encoding == "abacus":
            if max(config.abacus_digit_token_ids) >= config.vocab_size:
                raise ValueError(f"abacus_digit_token_ids {config.abacus_digit_token_ids} are not all in the "
                                 f"vocabulary [0, {config.vocab_size}).")
            rows = config.abacus_max_offset + config.abacus_max_digits + 1
            self.abacus_embeddings = nn.Embedding(rows, config.hidden_size, padding_idx=0)  # row 0: not a digit
        elif encoding == "t5_bias":  # T5's name for its table: (buckets, heads)
            self.relative_attention_bias = nn.Embedding(config.relative_attention_num_buckets,
                                                        config.num_attention_heads)
        elif encoding == "fire":
            self.fire = PositionTransformerFIRE(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.layers = nn.ModuleList([PositionTransformerLayer(config) for _ in range(config.num_hidden_layers)])
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings

    def set_input_embeddings(self, value):
        self.embeddings = value

    def digit_places(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The Abacus embedding rows of `input_ids` `(batch, length)`: each digit's place in its number, plus (in
        training) a random offset in [0, abacus_max_offset] per sequence; 0 for every other token."""
        digit_ids = torch.tensor(self.config.abacus_digit_token_ids, device=input_ids.device)
        places = abacus_positions(input_ids, digit_ids)
        if self.training and self.config.abacus_max_offset > 0:
            offsets = torch.randint(0, self.config.abacus_max_offset + 1, (input_ids.shape[0], 1),
                                    device=input_ids.device)
            places = torch.where(places > 0, places + offsets, places)
        rows = self.abacus_embeddings.num_embeddings
        if _values_are_free(places) and int(places.max()) >= rows:
            raise ValueError(f"Abacus place {int(places.max())} is beyond the table's {rows - 1} places "
                             f"(abacus_max_offset + abacus_max_digits = {self.config.abacus_max_offset} + "
                             f"{self.config.abacus_max_digits}): a number is longer than the table holds.")
        return places.clamp(max=rows - 1)

    def position_bias(self, positions: torch.Tensor) -> torch.Tensor | None:
        """b `(batch or 1, heads, length, length)` of `"t5_bias"`, `"fire"` and `"alibi"` for the positions p; None
        otherwise."""
        if self.config.position_encoding == "alibi":
            distance = (positions[:, :, None] - positions[:, None, :]).float()  # p_i - p_j, (batch, query i, key j)
            if not self.config.is_causal:
                distance = distance.abs()
            slopes = alibi_slopes(self.config.num_attention_heads).to(distance.device)
            return -slopes[None, :, None, None] * distance[:, None]
        if self.config.position_encoding == "t5_bias":
            relative = positions[:, None, :] - positions[:, :, None]  # p_j - p_i, (batch, query i, key j)
            buckets = relative_position_bucket(relative, not self.config.is_causal,
                                               self.config.relative_attention_num_buckets,
                                               self.config.relative_attention_max_distance)
            return self.relative_attention_bias(buckets).permute(0, 3, 1, 2)
        if self.config.position_encoding == "fire":
            return self.fire(positions)
        return None

    def attention_mask_with_bias(self, hidden_states, attention_mask, bias, output_attentions=False):
        """The mask every block adds to its attention logits. Causal, with the padding checked (no attention_mask, or
        one whose values were read: on a CPU, or with LENGTHGEN_CHECK_INPUTS=1, the inputs are right-padded), the
        causal mask alone, for under it a real token's query sees only real keys: `None` for sdpa's causal kernel
        (boolean `(1, 1, length, length)` on the eager path, which returns the weights), or with a position bias one
        float tensor `(batch or 1, heads, length, length)` holding the bias on and below the diagonal and the dtype's
        minimum above it. (Padded positions then attend to the padding before them, not only to real tokens; nothing
        reads their outputs.) Otherwise (bidirectional, or a padding not read on the host): transformers' mask of the
        padding, with a position bias one float tensor `(batch or 1, heads, length, length)`."""
        if self.config.is_causal and (attention_mask is None or _values_are_free(attention_mask)):
            if bias is None and not output_attentions and self.config._attn_implementation == "sdpa":
                return None
            length = hidden_states.shape[1]
            causal = torch.ones(length, length, dtype=torch.bool, device=hidden_states.device).tril()[None, None]
            if bias is None:
                return causal
            # contiguous: sdpa would copy a mask of the bias's permuted layout in every block
            return torch.where(causal, bias.to(hidden_states.dtype), torch.finfo(hidden_states.dtype).min).contiguous()
        # the position ids are not passed: sorted random positions are not packed sequences
        mask = create_causal_mask(self.config, hidden_states, attention_mask, None, allow_is_causal_skip=bias is None)
        if bias is None:
            return mask
        bias = bias.to(hidden_states.dtype)
        if mask is None:  # no padding
            return bias.contiguous()
        seen = mask if mask.dtype == torch.bool else mask == 0
        return torch.where(seen, bias, torch.finfo(hidden_states.dtype).min).contiguous()

    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        **kwargs,
    ) -> BaseModelOutput | tuple:
        r"""
        input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): token ids, right-padded.
        attention_mask (`torch.Tensor` of shape `(batch_size, sequence_length)`): 1 for real tokens, 0 for padding.
        position_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)` or `(sequence_length,)`, *optional*):
            the positions p_i that `"absolute"`, `"rope"`, `"t5_bias"`, `"fire"` and `"alibi"` read instead of
            0 ... n - 1 (for instance sorted positions drawn from a larger range, Ruoss et al.'s randomized positional
            encodings); the relative encodings take p_i - p_j as the distance of query i and key j.
        output_attentions, output_hidden_states (`bool`, *optional*): return every block's attention weights
            (computed by the eager path) and the embeddings and every block's output (default: the config's).
        """
        _check_kwargs(kwargs, "PositionTransformerModel.forward")
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
        positions = _check_inputs(self.config, input_ids, inputs_embeds, attention_mask, position_ids)
        hidden_states = self.embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        encoding = self.config.position_encoding
        if encoding == "absolute":
            hidden_states = hidden_states + self.position_embeddings(positions)
        elif encoding == "abacus":
            hidden_states = hidden_states + self.abacus_embeddings(self.digit_places(input_ids))
        hidden_states = self.dropout(hidden_states)
        mask = self.attention_mask_with_bias(hidden_states, attention_mask, self.position_bias(positions),
                                             bool(output_attentions))
        rotary = None
        if encoding == "rope":
            head_size = self.config.hidden_size // self.config.num_attention_heads
            rotary = rotary_cos_sin(positions, head_size, self.config.rope_theta, hidden_states.dtype)
        for layer in self.layers:
            hidden_states = layer(hidden_states, mask, rotary, output_attentions=bool(output_attentions))
        return BaseModelOutput(last_hidden_state=self.norm(hidden_states))


class PositionTransformerForSequenceClassification(PositionTransformerPreTrainedModel):
    """A Position Transformer with a linear classifier on one column: the last real token (causal) or the first
    (bidirectional), `config.classifier_position`."""

    accepts_loss_kwargs = False  # the loss is a per-batch mean: Trainer scales it for gradient accumulation

    def __init__(self, config: PositionTransformerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.position_transformer = PositionTransformerModel(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput | tuple:
        r"""
        labels (`torch.Tensor`, *optional*): class ids `(batch_size,)` in `[0, num_labels)`; float targets
            `(batch_size,)` when `num_labels == 1` (regression) or `(batch_size, num_labels)` for
            `problem_type="multi_label_classification"`, as transformers' classifiers take them.
        position_ids: as in `PositionTransformerModel.forward`.
        """
        _check_kwargs(kwargs, "PositionTransformerForSequenceClassification.forward")
        flags = {"output_attentions": output_attentions, "output_hidden_states": output_hidden_states}
        outputs = self.position_transformer(  # unset flags: the config's, as capture_outputs reads it
            input_ids, attention_mask=attention_mask, position_ids=position_ids, inputs_embeds=inputs_embeds,
            return_dict=True, **{flag: value for flag, value in flags.items() if value is not None},
        )
        hidden_states = outputs.last_hidden_state
        rows, column = _readout_column(hidden_states, attention_mask, self.config.classifier_position)
        logits = self.classifier(hidden_states[rows, column])
        loss = _classification_loss(logits, labels, self.config.problem_type) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states,
                                        attentions=outputs.attentions)


__all__ = [
    "PositionTransformerForSequenceClassification",
    "PositionTransformerModel",
    "PositionTransformerPreTrainedModel",
    "abacus_positions",
    "relative_position_bucket",
]
