"""Configuration of the Stack-RNN (Joulin and Mikolov, "Inferring Algorithmic Patterns with Stack-Augmented Recurrent
Nets", NeurIPS 2015, arXiv:1503.01007) in the form of Delétang et al., "Neural Networks and the Chomsky Hierarchy",
ICLR 2023, arXiv:2207.02098."""

from transformers import PretrainedConfig

CONTROLLERS = ("rnn", "lstm")
PUSH_ACTIVATIONS = ("none", "sigmoid")


class StackRNNConfig(PretrainedConfig):
    r"""
    A recurrent controller with a differentiable stack: at every token the controller reads the top of the stack
    with its input, then a softmax over PUSH, POP and NO-OP decides how the stack moves, and the new stack is the
    mixture of the three outcomes weighted by their probabilities. Delétang et al.'s Stack-RNN (a simple RNN
    controller of 256 units, stack cells of 8 values) and Stack-LSTM (`controller="lstm"`). The equations are
    in `modeling_stack_rnn.py`.

    Args:
        vocab_size (`int`, defaults to 32): number of token ids; the controller reads one-hot tokens.
        hidden_size (`int`, defaults to 256): units of the controller, and the width of `last_hidden_state`.
        controller (`str`, defaults to `"rnn"`): `"rnn"`, the simple (Elman) RNN h = tanh(W z + b) of the
            Stack-RNN; `"lstm"`, an LSTM (Hochreiter and Schmidhuber 1997), Delétang et al.'s Stack-LSTM.
        stack_cell_size (`int`, defaults to 8): values in one stack cell (Joulin and Mikolov's cells hold one).
        stack_size (`int`, *optional*): cells in the stack. None (the default): one cell per position of the input,
            so the stack never overflows: Delétang et al.'s Stack-RNN reverses strings of up to 500 tokens, which
            needs a stack as deep as the string, so their stack outgrows every input. An int: a fixed depth (30 in the
            authors' code); a PUSH on a full stack then drops the bottom cell. A POP fills the bottom cell with
            zeros.
        stack_read_depth (`int`, defaults to 1): cells from the top that the controller reads at each step
            (Delétang et al.: the top one; Joulin and Mikolov read the top k = 2).
        push_activation (`str`, defaults to `"none"`): the value pushed is `D h_t + b` (`"none"`, Delétang et al.)
            or `sigmoid(D h_t + b)` (`"sigmoid"`, Joulin and Mikolov).
        initializer_range (`float`, defaults to 0.02): standard deviation of the sequence classifier's weights at
            initialisation. The controller and the stack's layers start as Delétang et al.'s (Haiku's defaults):
            weights ~ N(0, 1/fan_in) truncated at two standard deviations, zero biases.
        pad_token_id (`int`, defaults to 0): the padding id (inputs are right-padded; padding never changes the
            states of the real positions).
    """

    model_type = "stack_rnn"

    def __init__(
        self,
        vocab_size=32,
        hidden_size=256,
        controller="rnn",
        stack_cell_size=8,
        stack_size=None,
        stack_read_depth=1,
        push_activation="none",
        initializer_range=0.02,
        pad_token_id=0,
        **kwargs,
    ):
        for name, value in (("vocab_size", vocab_size), ("hidden_size", hidden_size),
                            ("stack_cell_size", stack_cell_size)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if stack_size is not None and (not isinstance(stack_size, int) or stack_size < 1):
            raise ValueError(f"stack_size must be None or an integer >= 1, got {stack_size!r}")
        if controller not in CONTROLLERS:
            raise ValueError(f"controller must be one of {CONTROLLERS}, got {controller!r}")
        if not isinstance(stack_read_depth, int) or not 1 <= stack_read_depth <= (stack_size or stack_read_depth):
            raise ValueError(f"stack_read_depth must be an integer in [1, stack_size={stack_size}], "
                             f"got {stack_read_depth!r}")
        if push_activation not in PUSH_ACTIVATIONS:
            raise ValueError(f"push_activation must be one of {PUSH_ACTIVATIONS}, got {push_activation!r}")
        if not initializer_range > 0:
            raise ValueError(f"initializer_range must be > 0, got {initializer_range!r}")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.controller = controller
        self.stack_cell_size = stack_cell_size
        self.stack_size = stack_size
        self.stack_read_depth = stack_read_depth
        self.push_activation = push_activation
        self.initializer_range = initializer_range
        super().__init__(pad_token_id=pad_token_id, **kwargs)


__all__ = ["StackRNNConfig"]
