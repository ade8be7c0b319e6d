"""PyTorch Tape-RNN: a recurrent controller with a differentiable tape, after a Turing machine (Delétang, Ruoss,
Grau-Moya, Genewein, Wenliang, Catt, Cundy, Hutter, Legg, Veness and Ortega, "Neural Networks and the Chomsky
Hierarchy", ICLR 2023, arXiv:2207.02098; loosely based on the Baby-NTM of Suzgun, Gehrmann, Belinkov and Shieber,
"Memory-Augmented Recurrent Neural Networks Can Learn Generalized Dyck Languages", arXiv:1911.03329).

The tape T holds M cells of c = `tape_cell_size` values on a circle; it starts at zeros, as does the controller's
state. The head never moves: cell 0 is always under it, and the tape moves instead. At every token x_t (one-hot) the
controller reads the cell under the head, then chooses among five actions with a softmax, and the new tape is the five
outcomes mixed by their probabilities:

    r_t    = T_{t-1}[0]                                           the cell under the head
    h_t    = tanh(W_x x_t + W_r r_t + W_h h_{t-1} + b)              controller="rnn" (an LSTM cell with "lstm")
    a_t    = softmax(A h_t + b_a) = (a_ws, a_wl, a_wr, a_jl, a_jr)  WRITE-STAY, WRITE-LEFT, WRITE-RIGHT,
                                                                    JUMP-LEFT, JUMP-RIGHT
    w_t    = D h_t + b_d                                           an MLP with hidden layers `write_mlp_sizes`
    W      = T_{t-1} with W[0] = w_t                               the tape after writing under the head
    T_t[i] = a_ws W[i] + a_wl W[i+1] + a_wr W[i-1] + a_jl T_{t-1}[i+l] + a_jr T_{t-1}[i-l]     indices mod M
    y_t    = h_t                                                   the output at position t (`last_hidden_state`)

where l = |x| is the length of the input: a jump carries the head over the whole input, from where it wrote the
input to where it can write or read the answer. Which way is "left" is a convention (the authors' code's here: after
WRITE-LEFT the head reads what was the cell at index 1). With controller="lstm" the pre-activation
z_t = W_x x_t + W_r r_t + W_h h_{t-1} + b has four parts (i, f, g, o) and c_t = sigmoid(f + 1) * c_{t-1} +
sigmoid(i) * tanh(g), h_t = sigmoid(o) * tanh(c_t), as Haiku's LSTM.

The paper and the authors' code. The actions are the paper's: WRITE-* write w_t under the head, then stay or move one
cell; JUMP-* move the head by |x|. A jump does not write, as in the code released with the paper; the authors' later
code writes before every action, jumps included, and computes w_t with a two-layer ReLU network of 64 units:
`jump_writes=True, write_mlp_sizes=[64, 64]`. They use cells of c = 8 values and 256 units.

The tape's length M is `tape_size`, or by default (None) each row's number of real tokens: the paper's Tape-RNN
duplicates strings of up to 500 tokens, which needs a tape as long as the string (the authors' example script has a
fixed M = 40). With one cell per step, a head meets its own writing round the circle only after going further than
the row is long. |x|, the jump length, is per row too: the forward argument `input_length`, else the number of tokens
up to and including the first `config.input_end_token_id` (the separator that ends the input), else the row's number
of real tokens. As in the paper, where the input length comes with the initial state, the model knows |x| from the
first token on.

The model reads left to right, so right padding never reaches a real position (each row's circle and jump length are
its own). The time loop costs a few batched operations per token (one indexed copy makes all five outcomes) and no
host synchronisation.

This file imports only torch, transformers and its own folder, so checkpoints load with `trust_remote_code=True`.
"""

import itertools
import os
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import SequenceClassifierOutput
from transformers.utils import ModelOutput, can_return_tuple

from .configuration_tape_rnn import TapeRNNConfig

# the actions, in the order of `actions` and of A's rows
ACTIONS = ("write_stay", "write_left", "write_right", "jump_left", "jump_right")


@dataclass
class TapeRNNModelOutput(ModelOutput):
    """
    last_hidden_state: `(batch, length, hidden_size)`: the controller's output h_t at every position.
    actions: `(batch, length, 5)`: the probabilities a_t of WRITE-STAY, WRITE-LEFT, WRITE-RIGHT, JUMP-LEFT and
        JUMP-RIGHT chosen at every position.
    tape_reads: `(batch, length, tape_cell_size)`: r_t, the cell under the head that the controller read at every
        position (the tape before that position's action).
    hidden_states: with `output_hidden_states`, `(last_hidden_state,)` (the controller is one layer).
    """

    last_hidden_state: torch.Tensor | None = None
    actions: torch.Tensor | None = None
    tape_reads: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None


def tape_indices(jump_lengths: torch.Tensor, tape_size: int, jump_writes: bool,
                 row_sizes: torch.Tensor | None = None) -> torch.Tensor:
    """Where each cell of the five outcomes comes from, `(batch, 5, tape_size)`: indices into the rows of
    `update_tape`'s source flattened over the batch, where row b holds the cells of its W (b S .. b S + M - 1) then,
    unless `jump_writes`, those of its T_{t-1} (b S + M ..), with M = `tape_size` and S = 2M (M with `jump_writes`).
    `jump_lengths` `(batch,)` is l = |x|. With `row_sizes` `(batch,)`, row b's tape is a circle of its first
    row_sizes[b] cells and the cells after them stay as they are (zeros). Computed once per sequence."""
    cells = torch.arange(tape_size, device=jump_lengths.device)
    if row_sizes is None:
        sizes = torch.full_like(jump_lengths, tape_size, dtype=torch.long)[:, None]
    else:
        sizes = row_sizes.long().clamp(1, tape_size)[:, None]
    jump = jump_lengths.long()[:, None] % sizes
    jumped_from = 0 if jump_writes else tape_size  # a jump takes the tape before the write
    rows = torch.stack([
        cells.expand_as(jump + cells),  # WRITE-STAY: W[i]
        (cells + 1) % sizes,  # WRITE-LEFT: W[i+1]
        (cells - 1) % sizes,  # WRITE-RIGHT: W[i-1]
        jumped_from + (cells + jump) % sizes,  # JUMP-LEFT: T[i+l]
        jumped_from + (cells - jump) % sizes,  # JUMP-RIGHT: T[i-l]
    ], dim=1)
    rows = torch.where(cells < sizes[:, None], rows, cells)  # a cell off the row's circle keeps its W[i] = T[i]
    source_size = tape_size if jump_writes else 2 * tape_size
    return rows + source_size * torch.arange(len(rows), device=rows.device)[:, None, None]


def update_tape(tape: torch.Tensor, actions: torch.Tensor, write_value: torch.Tensor, indices: torch.Tensor,
                jump_writes: bool = False) -> torch.Tensor:
    """One step of the differentiable tape: `tape` `(batch, M, c)` (cell 0 under the head), `actions` `(batch, 5)`
    the probabilities of WRITE-STAY, WRITE-LEFT, WRITE-RIGHT, JUMP-LEFT and JUMP-RIGHT, `write_value` `(batch, c)`,
    `indices` from `tape_indices`. Returns the mixture of the five outcomes."""
    batch, size, cell = tape.shape
    pieces = [write_value[:, None], tape[:, 1:]]  # W: the tape after writing under the head
    if not jump_writes:
        pieces.append(tape)  # T_{t-1}, for the jumps
    source = torch.cat(pieces, dim=1).view(-1, cell)  # (batch x S, c)
    outcomes = source.index_select(0, indices.view(-1)).view(batch, 5, size * cell)
    return torch.bmm(actions[:, None, :], outcomes).view(batch, size, cell)


# Copied from lengthgen.modeling.stack_rnn.modeling_stack_rnn.StackRNNController with StackRNN->TapeRNN
class TapeRNNController(nn.Module):
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


class TapeRNNPreTrainedModel(PreTrainedModel):
    config_class = TapeRNNConfig
    base_model_prefix = "tape_rnn"

    # Copied from lengthgen.modeling.stack_rnn.modeling_stack_rnn.StackRNNPreTrainedModel._init_weights
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


def jump_lengths(config, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, input_length=None):
    """l = |x| per row, `(batch,)`: `input_length` (an int or one per row) when given; else the number of tokens up to
    and including the first `config.input_end_token_id` among the real ones; else (and in a row without it) the number
    of real tokens. Reads no value on the host."""
    batch_size, length = input_ids.shape
    if input_length is not None:
        if isinstance(input_length, int):
            if input_length < 0:
                raise ValueError(f"input_length must be >= 0, got {input_length}")
            return torch.full((batch_size,), input_length, dtype=torch.long, device=input_ids.device)
        input_length = torch.as_tensor(input_length, device=input_ids.device)
        if tuple(input_length.shape) != (batch_size,) or input_length.is_floating_point():
            raise ValueError(f"input_length must be an int or integers of shape ({batch_size},), got "
                             f"{input_length.dtype} of shape {tuple(input_length.shape)}")
        if _values_are_free(input_length) and int(input_length.min()) < 0:
            raise ValueError("input_length must be >= 0")
        return input_length.long()
    real = attention_mask.long().sum(-1) if attention_mask is not None else input_ids.new_full((batch_size,), length)
    if config.input_end_token_id is None:
        return real
    marks = input_ids == config.input_end_token_id
    if attention_mask is not None:
        marks = marks & attention_mask.bool()
    return torch.where(marks.any(-1), marks.int().argmax(-1) + 1, real)


class TapeRNNModel(TapeRNNPreTrainedModel):
    """The Tape-RNN: the controller and its tape read left to right; the output is h_t at every position."""

    def __init__(self, config: TapeRNNConfig):
        super().__init__(config)
        self.controller = TapeRNNController(config, config.tape_cell_size)
        sizes = list(config.write_mlp_sizes) + [config.tape_cell_size]
        self.tape_head = nn.Linear(config.hidden_size, len(ACTIONS) + sizes[0])  # [A; first layer of the writer]
        self.write_layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))
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
        input_length: int | torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> TapeRNNModelOutput | tuple:
        r"""
        input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): token ids, right-padded.
        attention_mask (`torch.Tensor` of the same shape, *optional*): 1 for real tokens, 0 for padding (checked;
            the states of the real positions never depend on the padding).
        input_length (`int` or `torch.LongTensor` of shape `(batch_size,)`, *optional*): |x|, the jump length, per
            row; by default from `config.input_end_token_id` or the real tokens (see `jump_lengths`).
        output_hidden_states (`bool`, *optional*): also return `hidden_states` (default: the config's).
        """
        _check_kwargs(kwargs, "TapeRNNModel.forward")
        batch_size, length = _check_input_ids(self.config, input_ids, None)
        if attention_mask is not None:
            _check_attention_mask(attention_mask, (batch_size, length))
        config = self.config
        if config.tape_size is not None:
            tape_size, row_sizes = config.tape_size, None
        else:  # one cell per real token of each row
            tape_size = length
            row_sizes = attention_mask.long().sum(-1) if attention_mask is not None else None
        jumps = jump_lengths(config, input_ids, attention_mask, input_length)
        indices = tape_indices(jumps, tape_size, config.jump_writes, row_sizes)
        projected = self.controller.input_projection(input_ids)  # W_x x_t + b, (batch, length, width)
        h = projected.new_zeros(batch_size, config.hidden_size)
        c = torch.zeros_like(h) if self.controller.is_lstm else None
        tape = projected.new_zeros(batch_size, tape_size, config.tape_cell_size)
        split = [len(ACTIONS), self.tape_head.out_features - len(ACTIONS)]
        outputs, actions, reads = [], [], []
        for projected_t in projected.unbind(1):  # one tensor per position: no gradient of a slice per step
            read = tape[:, 0]  # r_t
            h, c = self.controller(projected_t, h, c, read)
            logits, write_value = self.tape_head(h).split(split, dim=-1)
            for layer in self.write_layers:
                write_value = layer(torch.relu(write_value))
            action = torch.softmax(logits, dim=-1)
            tape = update_tape(tape, action, write_value, indices, config.jump_writes)
            outputs.append(h)
            actions.append(action)
            reads.append(read)
        last_hidden_state = torch.stack(outputs, dim=1)
        output_hidden_states = (output_hidden_states if output_hidden_states is not None
                                else config.output_hidden_states)
        return TapeRNNModelOutput(
            last_hidden_state=last_hidden_state,
            actions=torch.stack(actions, dim=1),
            tape_reads=torch.stack(reads, dim=1),
            hidden_states=(last_hidden_state,) if output_hidden_states else None,
        )


class TapeRNNForSequenceClassification(TapeRNNPreTrainedModel):
    """A Tape-RNN with a linear classifier on its output at the last real token."""

    accepts_loss_kwargs = False

    def __init__(self, config: TapeRNNConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.tape_rnn = TapeRNNModel(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.classifier.is_classifier = True
        self.post_init()

    def get_input_embeddings(self):
        return self.tape_rnn.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.tape_rnn.set_input_embeddings(value)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        input_length: int | torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput | tuple:
        r"""
        labels (`torch.Tensor`, *optional*): class ids `(batch_size,)` in `[0, num_labels)`; float targets
            `(batch_size,)` when `num_labels == 1` (regression) or `(batch_size, num_labels)` for
            `problem_type="multi_label_classification"`, as transformers' classifiers take them.
        input_length (*optional*): as in `TapeRNNModel.forward`.
        """
        _check_kwargs(kwargs, "TapeRNNForSequenceClassification.forward")
        outputs = self.tape_rnn(input_ids, attention_mask=attention_mask, input_length=input_length,
                                output_hidden_states=output_hidden_states, return_dict=True)
        rows, column = _readout_column(outputs.last_hidden_state, attention_mask, "last")
        logits = self.classifier(outputs.last_hidden_state[rows, column])
        loss = _classification_loss(logits, labels, self.config.problem_type) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states)


__all__ = [
    "ACTIONS",
    "TapeRNNController",
    "TapeRNNForSequenceClassification",
    "TapeRNNModel",
    "TapeRNNModelOutput",
    "TapeRNNPreTrainedModel",
    "jump_lengths",
    "tape_indices",
    "update_tape",
]
