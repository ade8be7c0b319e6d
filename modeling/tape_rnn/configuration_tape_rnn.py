"""Configuration of the Tape-RNN of Delétang et al., "Neural Networks and the Chomsky Hierarchy", ICLR 2023,
arXiv:2207.02098."""

from transformers import PretrainedConfig

CONTROLLERS = ("rnn", "lstm")


class TapeRNNConfig(PretrainedConfig):
    r"""
    A recurrent controller with a differentiable tape, after a Turing machine: at every token the controller reads the
    cell under the head with its input, then a softmax over five actions (WRITE-STAY, WRITE-LEFT, WRITE-RIGHT,
    JUMP-LEFT, JUMP-RIGHT) decides what happens, and the new tape is the mixture of the five outcomes weighted by
    their probabilities. A write puts a value computed from the controller's state into the cell under the head; a
    move shifts the head one cell, a jump shifts it by the length of the input. Delétang et al.'s Tape-RNN (a simple
    RNN controller of 256 units). The equations are in `modeling_tape_rnn.py`.

    Args:
        vocab_size (`int`, defaults to 32): number of token ids; the controller reads one-hot tokens.
        hidden_size (`int`, defaults to 256): units of the controller, and the width of `last_hidden_state`.
        controller (`str`, defaults to `"rnn"`): `"rnn"`, the simple (Elman) RNN h = tanh(W z + b) of the Tape-RNN;
            `"lstm"`, an LSTM controller.
        tape_cell_size (`int`, defaults to 8): values in one tape cell (`memory_cell_size` in the authors' code).
        tape_size (`int`, *optional*): cells on the tape, which is circular: moving past one end reaches the other.
            None (the default): per row, one cell per real token of the row, so a head that writes one cell per step
            meets its own writing round the circle only after going further than the row is long. Delétang et al.'s
            Tape-RNN duplicates strings of up to 500 tokens, which needs a tape as long as the string, so their tape
            outgrows every input. An int: a fixed length for every row (`memory_size` in the authors' code, 40 in
            their example script).
        jump_writes (`bool`, defaults to `False`): False, the paper's actions: a JUMP moves the head without
            writing (as in the code released with the paper); True, the authors' later code: every action, the jumps
            included, writes first.
        write_mlp_sizes (`list[int]`, defaults to `[]`): hidden layers (ReLU) of the network computing the value
            written from h_t; empty, a linear layer (the paper's code). The authors' later code uses `[64, 64]`.
        input_end_token_id (`int`, *optional*): the token that ends the input, so that the jump length |x| is the
            number of tokens up to and including its first occurrence in the row (with lengthgen's answer-slots
            layout `[CLS] input [SEP] [MASK]...`, the id of `[SEP]`: 3 in lengthgen's word-level tokenizers, so the
            jump is the input's length plus 2 for [CLS] and [SEP], where Delétang et al.'s rows hold the input alone
            and jump its length). None: |x| is the row's number of real tokens. The forward argument `input_length`
            overrides both.
        initializer_range (`float`, defaults to 0.02): standard deviation of the sequence classifier's weights at
            initialisation. The controller and the tape's layers start as Delétang et al.'s (Haiku's defaults):
            weights ~ N(0, 1/fan_in) truncated at two standard deviations, zero biases.
        pad_token_id (`int`, defaults to 0): the padding id (inputs are right-padded; padding never changes the
            states of the real positions).
    """

    model_type = "tape_rnn"

    def __init__(
        self,
        vocab_size=32,
        hidden_size=256,
        controller="rnn",
        tape_cell_size=8,
        tape_size=None,
        jump_writes=False,
        write_mlp_sizes=None,
        input_end_token_id=None,
        initializer_range=0.02,
        pad_token_id=0,
        **kwargs,
    ):
        for name, value in (("vocab_size", vocab_size), ("hidden_size", hidden_size),
                            ("tape_cell_size", tape_cell_size)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if tape_size is not None and (not isinstance(tape_size, int) or tape_size < 1):
            raise ValueError(f"tape_size must be None or an integer >= 1, got {tape_size!r}")
        if controller not in CONTROLLERS:
            raise ValueError(f"controller must be one of {CONTROLLERS}, got {controller!r}")
        if jump_writes not in (True, False):
            raise ValueError(f"jump_writes must be True or False, got {jump_writes!r}")
        write_mlp_sizes = [] if write_mlp_sizes is None else list(write_mlp_sizes)
        if any(not isinstance(size, int) or size < 1 for size in write_mlp_sizes):
            raise ValueError(f"write_mlp_sizes must be integers >= 1, got {write_mlp_sizes!r}")
        if input_end_token_id is not None and (not isinstance(input_end_token_id, int)
                                               or not 0 <= input_end_token_id < vocab_size):
            raise ValueError(f"input_end_token_id must be None or a token id in [0, {vocab_size}), "
                             f"got {input_end_token_id!r}")
        if not initializer_range > 0:
            raise ValueError(f"initializer_range must be > 0, got {initializer_range!r}")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.controller = controller
        self.tape_cell_size = tape_cell_size
        self.tape_size = tape_size
        self.jump_writes = bool(jump_writes)
        self.write_mlp_sizes = write_mlp_sizes
        self.input_end_token_id = input_end_token_id
        self.initializer_range = initializer_range
        super().__init__(pad_token_id=pad_token_id, **kwargs)


__all__ = ["TapeRNNConfig"]
