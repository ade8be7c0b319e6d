"""The `lengthgen` command: one subcommand per tool (`main` dispatches; each module parses its flags and calls the
library)."""
