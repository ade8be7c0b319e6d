"""PyTorch Stack-RNN: a recurrent controller with a differentiable stack (Joulin and Mikolov, "Inferring Algorithmic
Patterns with Stack-Augmented Recurrent Nets", NeurIPS 2015, arXiv:1503.01007), in the form of Delétang, Ruoss,
Grau-Moya, Genewein, Wenliang, Catt, Cundy, Hutter, Legg, Veness and Ortega, "Neural Networks and the Chomsky
Hierarchy", ICLR 2023, arXiv:2207.02098.

The stack s holds N = `stack_size` cells of c = `stack_cell_size` values, s[0] its top; it starts empty (zeros), as
does the controller's state. At every token x_t (one-hot) the controller reads the top k = `stack_read_depth` cells,
then chooses PUSH, POP or NO-OP with a softmax, and the new stack is the three outcomes mixed by their probabilities:

    r_t    = (s_{t-1}[0], ..., s_{t-1}[k-1])                       the read, k = 1 in Delétang et al.
    h_t    = tanh(W_x x_t + W_r r_t + W_h h_{t-1} + b)               controller="rnn" (an LSTM cell with "lstm")
    a_t    = softmax(A h_t + b_a) = (a_push, a_pop, a_noop)
    v_t    = D h_t + b_d                                            sigmoid(D h_t + b_d) with push_activation="sigmoid"
    s_t[0] = a_push v_t          + a_pop s_{t-1}[1]   + a_noop s_{t-1}[0]
    s_t[i] = a_push s_{t-1}[i-1] + a_pop s_{t-1}[i+1] + a_noop s_{t-1}[i]        0 < i < N, with s_{t-1}[N] = 0
    y_t    = h_t                                                   the output at position t (`last_hidden_state`)

With controller="lstm" the pre-activation z_t = W_x x_t + W_r r_t + W_h h_{t-1} + b has four parts (i, f, g, o) and
c_t = sigmoid(f + 1) * c_{t-1} + sigmoid(i) * tanh(g), h_t = sigmoid(o) * tanh(c_t): the +1 on the forget gate is
Haiku's LSTM's, which Delétang et al.'s Stack-LSTM uses.

With saturated actions this is a discrete stack: a POP leaves a zero cell at the bottom (popping an empty stack
reads zeros), and with a fixed depth N a PUSH on a full stack drops the bottom cell. By default (`stack_size=None`)
the stack never overflows: Delétang et al.'s Stack-RNN reverses strings of up to 500 tokens, which takes a stack as
deep as the string (their code's default is N = 30: `stack_size=30`). It is then the stack as deep as the sequence
is long, kept only as deep as can matter: before step t at most t cells hold anything, and a cell deeper than k - 1
plus the updates left never reaches a read, so the outputs are those of any deeper stack.

Delétang et al. use k = 1, a linear push value, c = 8 and 256 units; Joulin and Mikolov read the top k = 2 cells,
push sigmoid(D h_t), use scalar cells and a sigmoid controller (`stack_read_depth=2, push_activation="sigmoid",
stack_cell_size=1` gives their stack on Delétang et al.'s tanh controller).

The model reads left to right, so right padding never reaches a real position. The time loop costs a few batched
operations per token and no host synchronisation.

This file imports only torch, transformers and its own folder, so checkpoints load with `trust_remote_code=True`.
"""

import os
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import SequenceClassifierOutput
from transformers.utils import ModelOutput, can_return_tuple

from .configuration_stack_rnn import StackRNNConfig

PUSH, POP, NO_OP = 0, 1, 2  # the order of the actions in `actions` and in A's rows


@dataclass
class StackRNNModelOutput(ModelOutput):
    """
    last_hidden_state: `(batch, length, hidden_size)`: the controller's output h_t at every position.
    actions: `(batch, length, 3)`: the probabilities a_t of PUSH, POP and NO-OP chosen at every position.
    stack_reads: `(batch, length, stack_read_depth * stack_cell_size)`: r_t, the top of the stack the controller read
        at every position (the stack before that position's action).
    hidden_states: with `output_hidden_states`, `(last_hidden_state,)` (the controller is one layer).
    """

    last_hidden_state: torch.Tensor | None = None
    actions: torch.Tensor | None = None
    stack_reads: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None


def update_stack(stack: torch.Tensor, actions: torch.Tensor, push_value: torch.Tensor) -> torch.Tensor:
    """One step of the differentiable stack: `stack` `(batch, N, c)` (cell 0 the top), `actions` `(batch, 3)` the
    probabilities of PUSH, POP and NO-OP, `push_value` `(batch, c)`. Returns the mixture of the three outcomes:
    pushed (v on top, every cell one down, the bottom one dropped), popped (every cell one up, a zero cell at the
    bottom) and unchanged."""
    size = stack.shape[1]
    # [v, s[0], ..., s[N-1], 0]: its N cells from 0, 1 and 2 are the pushed, kept and popped stacks
    cells = torch.cat([push_value[:, None], stack, torch.zeros_like(push_value)[:, None]], dim=1)
    pushed, kept, popped = cells[:, :size], cells[:, 1 : size + 1], cells[:, 2:]
    weights = actions[:, :, None, None]
    return weights[:, PUSH] * pushed + weights[:, POP] * popped + weights[:, NO_OP] * kept


class StackRNNController(nn.Module):
    """The controller's cell. The one-hot token's weights W_x (with the bias b) are a table read once for the whole
    sequence (`input_projection`); each step adds W_h h_{t-1} and W_r r_t. Each weight carries the fan-in of the layer
    it belongs to in Haiku's cores (Delétang et al.'s), which sets its initialisation: a simple RNN has one layer on
    [x_t, r_t] and one on h_{t-1}, an LSTM one layer on [x_t, r_t, h_{t-1}]."""

    def __init__(self, config, read_size: int):
        super().__init__()
        self.is_lstm = config.controller == "lstm"
        width = (4 if self.is_lstm else 1) * config.hidden_size  # an LSTM's i, f, g, o
        self.input_weights = nn.Embedding(config.vocab_size, width)  # the columns of W_x
        self.read_weights = nn.Linear(read_size, width)  # W_r and b
        self.recurrent_weights = nn.Linear(config.hidden_size, width, bias=False)  # W_h
        input_size = config.vocab_size + read_size
        self.input_weights.fan_in = self.read_weights.fan_in = input_size + (config.hidden_size if self.is_lstm else 0)
        self.recurrent_weights.fan_in = config.hidden_size + (input_size if self.is_lstm else 0)

    def input_projection(self, input_ids: torch.Tensor) -> torch.Tensor:
        """W_x x_t + b for every position: `(batch, length, width)`; an LSTM's forget gate gets its +1 here."""
        projection = self.input_weights(input_ids) + self.read_weights.bias
        if self.is_lstm:
            forget_bias = torch.zeros_like(self.read_weights.bias).view(4, -1)
            forget_bias[1] = 1.0
            projection = projection + forget_bias.flatten()
        return projection

    def forward(self, projected_input, h_prev, c_prev, read):
        """One step: h_t (and the LSTM's cell state c_t) from W_x x_t + b, h_{t-1} (c_{t-1}) and the read r_t."""
        pre = torch.addmm(projected_input, h_prev, self.recurrent_weights.weight.t())
        pre = torch.addmm(pre, read, self.read_weights.weight.t())
        if not self.is_lstm:
            return torch.tanh(pre), None
        i, f, g, o = pre.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class StackRNNPreTrainedModel(PreTrainedModel):
    config_class = StackRNNConfig
    base_model_prefix = "stack_rnn"

    @torch.no_grad()
    def _init_weights(self, module):
        """Haiku's initialisation, which Delétang et al.'s models get: every weight ~ N(0, 1/fan_in) truncated at two
        standard deviations (fan_in: the input width of the layer it belongs to), zero biases; the sequence classifier
        ~ N(0, initializer_range) with a zero bias."""
        if isinstance(module, nn.Linear) and getattr(module, "is_classifier", False):
            init.normal_(module.weight, mean=0.0, std=self.config.initializer_range)
            init.zeros_(module.bias)
        elif isinstance(module, (nn.Linear, nn.Embedding)):
            std = getattr(module, "fan_in", module.weight.shape[-1]) ** -0.5
            init.trunc_normal_(module.weight, mean=0.0, std=std, a=-2 * std, b=2 * std)
            if getattr(module, "bias", None) is not None:
                init.zeros_(module.bias)


# what Trainer and tokenizers may pass that these models do not use: accepted; anything else is an error
_ACCEPTED_KWARGS = {"num_items_in_batch", "token_type_ids"}


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


class StackRNNModel(StackRNNPreTrainedModel):
    """The Stack-RNN: the controller and its stack read left to right; the output is h_t at every position."""

    def __init__(self, config: StackRNNConfig):
        super().__init__(config)
        self.read_size = config.stack_read_depth * config.stack_cell_size
        self.controller = StackRNNController(config, self.read_size)
        self.stack_head = nn.Linear(config.hidden_size, 3 + config.stack_cell_size)  # [A; D] and [b_a; b_d]
        self.post_init()

    def get_input_embeddings(self):
        return self.controller.input_weights

    def set_input_embeddings(self, value):
        self.controller.input_weights = value

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> StackRNNModelOutput | tuple:
        r"""
        input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): token ids, right-padded.
        attention_mask (`torch.Tensor` of the same shape, *optional*): 1 for real tokens, 0 for padding (checked;
            the states of the real positions never depend on the padding).
        output_hidden_states (`bool`, *optional*): also return `hidden_states` (default: the config's).
        """
        _check_kwargs(kwargs, "StackRNNModel.forward")
        batch_size, length = _check_input_ids(self.config, input_ids, None)
        if attention_mask is not None:
            _check_attention_mask(attention_mask, (batch_size, length))
        config = self.config
        projected = self.controller.input_projection(input_ids)  # W_x x_t + b, (batch, length, width)
        h = projected.new_zeros(batch_size, config.hidden_size)
        c = torch.zeros_like(h) if self.controller.is_lstm else None
        k, cell = config.stack_read_depth, config.stack_cell_size
        stack = projected.new_zeros(batch_size, config.stack_size or k, cell)
        outputs, actions, reads = [], [], []
        for t, projected_t in enumerate(projected.unbind(1)):  # one tensor per position: no slice's gradient per step
            read = stack[:, :k].flatten(1)  # r_t
            h, c = self.controller(projected_t, h, c, read)
            logits, push_value = self.stack_head(h).split([3, cell], dim=-1)
            if config.push_activation == "sigmoid":
                push_value = torch.sigmoid(push_value)
            action = torch.softmax(logits, dim=-1)
            if config.stack_size is None:
                # the stack of the whole sequence's depth, kept only as deep as can matter: after step t at most t + 1
                # cells hold anything, and a cell deeper than k - 1 + the updates left never reaches the read
                depth = max(k, min(t + 1, length - t - 2 + k))
                if depth > stack.shape[1]:
                    stack = torch.cat([stack, stack.new_zeros(batch_size, depth - stack.shape[1], cell)], dim=1)
                stack = update_stack(stack, action, push_value)[:, :depth]
            else:
                stack = update_stack(stack, action, push_value)
            outputs.append(h)
            actions.append(action)
            reads.append(read)
        last_hidden_state = torch.stack(outputs, dim=1)
        output_hidden_states = (output_hidden_states if output_hidden_states is not None
                                else config.output_hidden_states)
        return StackRNNModelOutput(
            last_hidden_state=last_hidden_state,
            actions=torch.stack(actions, dim=1),
            stack_reads=torch.stack(reads, dim=1),
            hidden_states=(last_hidden_state,) if output_hidden_states else None,
        )


class StackRNNForSequenceClassification(StackRNNPreTrainedModel):
    """A Stack-RNN with a linear classifier on its output at the last real token."""

    accepts_loss_kwargs = False

    def __init__(self, config: StackRNNConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.stack_rnn = StackRNNModel(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.classifier.is_classifier = True
        self.post_init()

    def get_input_embeddings(self):
        return self.stack_rnn.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.stack_rnn.set_input_embeddings(value)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput | tuple:
        r"""
        labels (`torch.Tensor`, *optional*): class ids `(batch_size,)` in `[0, num_labels)`; float targets
            `(batch_size,)` when `num_labels == 1` (regression) or `(batch_size, num_labels)` for
            `problem_type="multi_label_classification"`, as transformers' classifiers take them.
        """
        _check_kwargs(kwargs, "StackRNNForSequenceClassification.forward")
        outputs = self.stack_rnn(input_ids, attention_mask=attention_mask, output_hidden_states=output_hidden_states,
                                 return_dict=True)
        rows, column = _readout_column(outputs.last_hidden_state, attention_mask, "last")
        logits = self.classifier(outputs.last_hidden_state[rows, column])
        loss = _classification_loss(logits, labels, self.config.problem_type) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states)


__all__ = [
    "StackRNNController",
    "StackRNNForSequenceClassification",
    "StackRNNModel",
    "StackRNNModelOutput",
    "StackRNNPreTrainedModel",
    "update_stack",
]
