"""Training in pieces: a wall-clock budget for Trainer, and checkpoints packed into files that move between machines."""
