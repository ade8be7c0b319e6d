import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
if "PYTEST_XDIST_WORKER" in os.environ:
    # several test processes share the machine's cores: one torch thread each (and in the processes a test starts),
    # since processes with several threads each on too few cores run many times slower
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pathlib  # noqa: E402

import pytest  # noqa: E402

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture
def repo_root():
    return REPO_ROOT
