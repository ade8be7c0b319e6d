"""PyTorch Universal Transformer (Dehghani, Gouws, Vinyals, Uszkoreit and Kaiser, "Universal Transformers", ICLR 2019)
and its causal variant, the Sequential Universal Transformer of Abnar, Dehghani and Zuidema ("Transferring Inductive
Biases through Knowledge Distillation", 2020).

The token embeddings, scaled by sqrt(d) as in Vaswani et al. (`scale_embedding`), are H^0. One post-LayerNorm
transformer layer is applied T times with shared weights (Eq. 1-4). Before step t the coordinate embedding P^t
(sinusoidal position i plus sinusoidal step t) is added to every state:

    A^t = LayerNorm(H^{t-1} + P^t + MultiHeadSelfAttention(H^{t-1} + P^t))
    H^t = LayerNorm(A^t + Transition(A^t))

With adaptive computation time (§2.2; Graves 2016) each position has a sigmoid halting unit and stops updating once
its cumulative halting probability reaches 1 - epsilon; its output is the halting-probability-weighted sum of its
steps' states, and the ponder cost N + R joins the loss. The Neural Data Router (`modeling_ndr.py`) is this model with
a copy gate and geometric attention.

This file imports only torch, transformers and its own folder, so checkpoints load with `trust_remote_code=True`.
"""

import os
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.utils import ModelOutput, can_return_tuple
from transformers.utils.output_capturing import capture_outputs

from .configuration_universal_transformer import UniversalTransformerConfig


@dataclass
class UniversalTransformerModelOutput(ModelOutput):
    """
    last_hidden_state: `(batch, length, hidden)`: the state after the last step, or with ACT each position's
        halting-weighted sum of its states.
    hidden_states: with `output_hidden_states`, the input of the first step (embeddings + P^1) and every step's
        output.
    attentions: with `output_attentions`, per step the `(batch, heads, length, length)` attention weights.
    ponder_cost: with ACT, N + R averaged over the real positions (a scalar).
    ponder_times: with ACT, `(batch, length)`: N + R of every position (N steps taken, R the remainder).
    """

    last_hidden_state: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    ponder_cost: torch.Tensor | None = None
    ponder_times: torch.Tensor | None = None


@dataclass
class UniversalTransformerSequenceClassifierOutput(ModelOutput):
    """
    loss: with `labels`, the cross-entropy of the logits (+ `act_loss_weight` x ponder cost with ACT).
    logits: `(batch, num_labels)`, read from one column (`config.classifier_position`).
    hidden_states, attentions, ponder_cost, ponder_times: as in UniversalTransformerModelOutput.
    """

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    ponder_cost: torch.Tensor | None = None
    ponder_times: torch.Tensor | None = None


def timing_signal(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """Vaswani et al.'s sinusoid of `positions` as Eq. 4 writes it: `(..., dim)`, sin at even and cos at odd
    coordinates, wavelength 10000^(2j/d) for the pair j."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32) / dim))
    angles = positions.float()[..., None] * inv_freq
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)[..., :dim]


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


class UniversalTransformerAttention(nn.Module):
    """Multi-head self-attention through transformers' attention interface (eager, sdpa)."""

    def __init__(self, config: UniversalTransformerConfig):
        super().__init__()
        self.config = config
        self.is_causal = False  # causality is in the mask, with the padding and the relative bias
        self.head_size = config.hidden_size // config.num_attention_heads
        self.scaling = self.head_size**-0.5
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.output = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states, attention_bias=None, output_attentions=False):
        shape = (*hidden_states.shape[:-1], -1, self.head_size)
        query = self.query(hidden_states).view(shape).transpose(1, 2)
        key = self.key(hidden_states).view(shape).transpose(1, 2)
        value = self.value(hidden_states).view(shape).transpose(1, 2)
        attention_interface = eager_attention_forward
        if not output_attentions:  # fused kernels do not return the weights
            attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation,
                                                                        eager_attention_forward)
        context, weights = attention_interface(
            self, query, key, value, attention_bias, scaling=self.scaling, is_causal=False,
            dropout=self.config.attention_probs_dropout_prob if self.training else 0.0,
        )
        return self.output(context.reshape(hidden_states.shape)), weights


class UniversalTransformerLayer(GradientCheckpointingLayer):
    """The shared layer (Eq. 2-3): post-LayerNorm self-attention and a two-layer ReLU transition function."""

    def __init__(self, config: UniversalTransformerConfig):
        super().__init__()
        self.attention = UniversalTransformerAttention(config)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.transition_in = nn.Linear(config.hidden_size, config.intermediate_size)
        self.transition_out = nn.Linear(config.intermediate_size, config.hidden_size)
        self.transition_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, attention_bias=None, output_attentions=False):
        attention_output, _ = self.attention(hidden_states, attention_bias, output_attentions)
        a = self.attention_norm(hidden_states + self.dropout(attention_output))
        transition = self.transition_out(self.dropout(F.relu(self.transition_in(a))))
        return self.transition_norm(a + self.dropout(transition))


class UniversalTransformerPreTrainedModel(PreTrainedModel):
    config_class = UniversalTransformerConfig
    base_model_prefix = "universal_transformer"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _no_split_modules = ["UniversalTransformerLayer"]
    # recorded at every call of the shared layer: its input the first time, then each step's output; its weights
    _can_record_outputs = {"hidden_states": UniversalTransformerLayer, "attentions": UniversalTransformerAttention}

    @torch.no_grad()
    def _init_weights(self, module):
        """BERT's initialisation (normal(0, initializer_range) weights, zero biases, unit LayerNorms); the halting
        unit's bias at `act_bias_init`; scaled token embeddings (`scale_embedding`) at normal(0, hidden_size^-1/2)."""
        super()._init_weights(module)
        if isinstance(module, nn.Linear) and hasattr(module, "initial_bias"):
            init.constant_(module.bias, module.initial_bias)
        if isinstance(module, nn.Embedding) and getattr(module, "scaled", False):
            init.normal_(module.weight, mean=0.0, std=module.embedding_dim**-0.5)
            if module.padding_idx is not None:
                init.zeros_(module.weight[module.padding_idx])


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


def _check_inputs(config, input_ids, inputs_embeds, attention_mask):
    """Validate the inputs. Raises ValueError naming the problem."""
    batch_size, seq_len = _check_input_ids(config, input_ids, inputs_embeds)
    if seq_len > config.max_position_embeddings:
        raise ValueError(f"Sequence length {seq_len} exceeds max_position_embeddings={config.max_position_embeddings}.")
    if attention_mask is not None:
        _check_attention_mask(attention_mask, (batch_size, seq_len))


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


def _causal(batch_idx, head_idx, q_idx, kv_idx):
    return kv_idx <= q_idx


class UniversalTransformerModel(UniversalTransformerPreTrainedModel):
    """Token embeddings, the shared layer applied step by step (with ACT when `use_act`)."""

    def __init__(self, config: UniversalTransformerConfig):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.embeddings.scaled = config.scale_embedding
        self.embedding_scale = config.hidden_size**0.5 if config.scale_embedding else 1.0
        self.layer = UniversalTransformerLayer(config)
        self.relative_bias = None
        if config.position_encoding == "relative":  # one scalar per head and clipped offset j - i
            self.relative_bias = nn.Embedding(2 * config.max_relative_position + 1, config.num_attention_heads)
        self.halting_unit = None
        if config.use_act:
            self.halting_unit = nn.Linear(config.hidden_size, 1)
            self.halting_unit.initial_bias = config.act_bias_init
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings

    def set_input_embeddings(self, value):
        self.embeddings = value

    def coordinate_embedding(self, length: int, step: int, device) -> torch.Tensor:
        """P^t of Eq. 4 for steps t = 1, 2, ...: `(length, hidden)`; with relative positions the step signal alone."""
        d = self.config.hidden_size
        step_signal = timing_signal(torch.tensor(step, device=device), d)
        if self.config.position_encoding == "relative":
            return step_signal.expand(length, d)
        return timing_signal(torch.arange(length, device=device), d) + step_signal

    def attention_bias(self, hidden_states, attention_mask):
        """The additive `(batch, 1 or heads, length, length)` bias of every step: padded keys and (causal) later
        positions at the dtype's minimum, plus the relative position bias; None when there is nothing to add."""
        mask = create_bidirectional_mask(
            config=self.config, inputs_embeds=hidden_states, attention_mask=attention_mask,
            and_mask_function=_causal if self.config.is_causal else None,
        )
        if mask is not None and mask.dtype == torch.bool:  # sdpa's form: True where a key is seen
            mask = torch.zeros(mask.shape, dtype=hidden_states.dtype, device=hidden_states.device).masked_fill(
                ~mask, torch.finfo(hidden_states.dtype).min
            )
        if self.relative_bias is None:
            return mask
        n, k = hidden_states.shape[1], self.config.max_relative_position
        positions = torch.arange(n, device=hidden_states.device)
        offsets = (positions[None, :] - positions[:, None]).clamp(-k, k) + k  # j - i
        bias = self.relative_bias(offsets).permute(2, 0, 1)[None].to(hidden_states.dtype)  # (1, heads, n, n)
        return bias if mask is None else mask + bias

    @capture_outputs(tie_last_hidden_states=False)
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        num_steps: int | None = None,
        output_attentions: bool | None = None,
        **kwargs,
    ) -> UniversalTransformerModelOutput | tuple:
        r"""
        num_steps (`int`, *optional*): steps of the shared layer for this call (with ACT, the most a position may
            take); default `config.num_steps`, else `config.num_layers`.
        output_attentions, output_hidden_states (`bool`, *optional*): return every step's attention weights and
            states (default: the config's).
        """
        _check_kwargs(kwargs, "UniversalTransformerModel.forward")
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
        steps = num_steps if num_steps is not None else (self.config.num_steps or self.config.num_layers)
        if steps < 1:
            raise ValueError(f"num_steps must be >= 1, got {steps}")
        _check_inputs(self.config, input_ids, inputs_embeds, attention_mask)
        # token embeddings times sqrt(d) (`scale_embedding`); `inputs_embeds` are taken as they are
        state = self.embeddings(input_ids) * self.embedding_scale if inputs_embeds is None else inputs_embeds
        bias = self.attention_bias(state, attention_mask)

        def step(state, t):
            if self.config.position_encoding != "none":
                state = state + self.coordinate_embedding(state.shape[1], t, state.device).to(state.dtype)
            return state, self.layer(state, bias, output_attentions=bool(output_attentions))

        if self.halting_unit is None:
            for t in range(1, steps + 1):
                state = step(state, t)[1]
            return UniversalTransformerModelOutput(last_hidden_state=state)

        # ACT (Graves 2016, Eq. 5-14; Dehghani et al. §2.2): per position, halting probabilities p^t accumulate
        # until they reach the threshold (or the last step); step t's state is weighted by p^t, the halting step's by
        # the remainder R = 1 - (the sum before it)
        threshold, interpolate = self.config.act_threshold, self.config.act_accumulation == "interpolate"
        shape = state.shape[:2]
        halting = state.new_zeros(shape)  # sum of the p^t of the steps taken so far
        running = state.new_ones(shape)
        remainders, updates = state.new_zeros(shape), state.new_zeros(shape)
        output = torch.zeros_like(state)
        for t in range(1, steps + 1):
            state_in, state = step(state, t)
            p = torch.sigmoid(self.halting_unit(state_in)).squeeze(-1)
            halts = running if t == steps else (halting + p * running >= threshold).to(state.dtype) * running
            continues = running - halts
            remainders = remainders + halts * (1 - halting)
            weight = p * continues + halts * (1 - halting)
            halting = halting + weight
            updates = updates + running
            running = continues
            if interpolate:  # tensor2tensor's form: a running mix, not a sum
                output = weight[..., None] * state + (1 - weight[..., None]) * output
            else:
                output = output + weight[..., None] * state
        ponder_times = updates + remainders  # N + R per position
        real = attention_mask.to(state.dtype) if attention_mask is not None else torch.ones_like(ponder_times)
        ponder_cost = (ponder_times * real).sum() / real.sum()
        return UniversalTransformerModelOutput(last_hidden_state=output, ponder_cost=ponder_cost,
                                               ponder_times=ponder_times)


class UniversalTransformerForSequenceClassification(UniversalTransformerPreTrainedModel):
    """A Universal Transformer with a linear classifier on one column: [CLS] (bidirectional) or the last real token
    (causal, the Sequential Universal Transformer)."""

    accepts_loss_kwargs = False

    def __init__(self, config: UniversalTransformerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.universal_transformer = UniversalTransformerModel(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        num_steps: int | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> UniversalTransformerSequenceClassifierOutput | tuple:
        r"""
        labels (`torch.Tensor`, *optional*): class ids `(batch_size,)` in `[0, num_labels)`; float targets
            `(batch_size,)` when `num_labels == 1` (regression) or `(batch_size, num_labels)` for
            `problem_type="multi_label_classification"`, as transformers' classifiers take them.
        num_steps (`int`, *optional*): as in `UniversalTransformerModel.forward`.
        """
        _check_kwargs(kwargs, "UniversalTransformerForSequenceClassification.forward")
        flags = {"output_attentions": output_attentions, "output_hidden_states": output_hidden_states}
        outputs = self.universal_transformer(  # unset flags: the config's, as capture_outputs reads it
            input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds, num_steps=num_steps,
            return_dict=True, **{flag: value for flag, value in flags.items() if value is not None},
        )
        hidden_states = outputs.last_hidden_state
        rows, column = _readout_column(hidden_states, attention_mask, self.config.classifier_position)
        logits = self.classifier(hidden_states[rows, column])
        loss = None
        if labels is not None:
            loss = _classification_loss(logits, labels, self.config.problem_type)
            if outputs.ponder_cost is not None:
                loss = loss + self.config.act_loss_weight * outputs.ponder_cost
        return UniversalTransformerSequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions,
            ponder_cost=outputs.ponder_cost, ponder_times=outputs.ponder_times,
        )


__all__ = [
    "UniversalTransformerForSequenceClassification",
    "UniversalTransformerModel",
    "UniversalTransformerPreTrainedModel",
    "timing_signal",
]
