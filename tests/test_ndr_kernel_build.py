"""How the NDR's fused CPU kernel (geometric_attention_cpu.py) is built: one line on stderr when it compiles, a build
folder per installation, and a build killed midway that leaves no later call waiting on its lock file.

The tests that build run the real kernel's build in subprocesses, in a fresh TORCH_EXTENSIONS_DIR: one compilation
for the whole file, shared through a module-scoped fixture."""

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from torch.utils import cpp_extension

from lengthgen.modeling.ndr import geometric_attention_cpu

try:
    import fcntl
except ImportError:
    fcntl = None

COMPILING = "lengthgen: compiling the fused geometric-attention kernel"
WAITING = "lengthgen: waiting for another process building the kernel in"
LEFTOVER = "lengthgen: removing the lock file of an interrupted build"

# what a user's first NDR call does: load (build if needed) the kernel, then run geometric attention through it;
# the result is checked against the PyTorch path
CHECK = """
import torch
from lengthgen.modeling.ndr import geometric_attention_cpu
from lengthgen.modeling.ndr.geometric_attention import (
    geometric_attention, geometric_attention_weights, geometric_logits,
)
assert geometric_attention_cpu.load() is not None, "the kernel was not built"
g = torch.Generator().manual_seed(0)
q, k, v, bias = (torch.randn(2, 3, 70, d, generator=g, dtype=torch.float64) for d in (8, 8, 5, 2))
mask = (torch.arange(70) < torch.tensor([[70], [61]]))[:, None, :]
fused = geometric_attention(q, k, v, mask, True, bias)
exact = geometric_attention_weights(geometric_logits(q, k, bias, 8 ** -0.5), mask, True) @ v
assert (fused - exact).abs().max() < 1e-10, (fused - exact).abs().max()
print("matches the PyTorch path")
"""
TIMEOUT = 480  # seconds for one build or load, far beyond a build's time: a call stuck on a lock file fails


def _load_copy(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_installation_builds_in_a_folder_of_its_own(tmp_path, monkeypatch):
    """Another virtual environment (its own sys.prefix and interpreter) builds in another folder; a copy of the module
    (the code a checkpoint carries) in the same environment shares the environment's build. All under
    TORCH_EXTENSIONS_DIR when it is set, under torch's per-user extensions folder otherwise."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    (tmp_path / "checkpoint").mkdir()
    shutil.copy(geometric_attention_cpu.__file__, tmp_path / "checkpoint" / "geometric_attention_cpu.py")
    copy = _load_copy(tmp_path / "checkpoint" / "geometric_attention_cpu.py", "geometric_attention_cpu_copy")
    name = "lengthgen_geometric_attention_portable_0123456789ab"
    here = geometric_attention_cpu.build_directory(name)
    assert here == geometric_attention_cpu.build_directory(name) == copy.build_directory(name)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "venv" / "bin" / "python"))
    elsewhere = geometric_attention_cpu.build_directory(name)
    assert elsewhere != here
    for folder in (here, elsewhere):
        assert os.path.dirname(folder) == str(tmp_path / "extensions")
        assert os.path.basename(folder).startswith(name + "_")
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR")
    assert os.path.dirname(geometric_attention_cpu.build_directory(name)) == cpp_extension.get_default_build_root()


def _kill_session(process):
    """SIGKILL to every process of `process`'s session (it was started in a new one): the interpreter first, so that
    it runs no cleanup on seeing its build fail, then, until none is left, ninja and the compilers, which ninja runs
    in process groups of their own."""
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    for _ in range(100):
        members = [pid for pid in _session(process.pid) if pid != process.pid]
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def _session(session):
    """The processes of a session (Linux's /proc; none elsewhere)."""
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()  # after the command: state, ppid, pgrp, session
        except (OSError, IndexError):
            continue
        if entry.isdigit() and int(fields[3]) == session and fields[0] != "Z":
            found.append(int(entry))
    return found


def _wait_for(condition, what, process=None, timeout=TIMEOUT):
    start = time.monotonic()
    while not condition():
        if process is not None and process.poll() is not None:
            pytest.fail(f"the process ended (status {process.returncode}) before {what}")
        if time.monotonic() - start > timeout:
            pytest.fail(f"no {what} after {timeout} s")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """A build killed midway, then a process that builds and one started during that build, then a cached load; each
    process's stderr, stdout and exit status, by name."""
    if fcntl is None:
        pytest.skip("no fcntl (Windows): builds are guarded by torch's lock file alone")
    if os.environ.get("LENGTHGEN_FUSED_GEOMETRIC") == "0" or shutil.which(os.environ.get("CXX", "c++")) is None:
        pytest.skip("fast path switched off or no compiler")
    if not cpp_extension.is_ninja_available():
        pytest.skip("no ninja: the kernel cannot be built")
    tmp = tmp_path_factory.mktemp("kernel_build")
    root = tmp / "extensions"
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(root), "OMP_NUM_THREADS": "1"}
    started = []

    def start(name, code=CHECK):
        with open(tmp / f"{name}.out", "w") as out, open(tmp / f"{name}.err", "w") as err:
            process = subprocess.Popen(
                [sys.executable, "-c", code], env=env, stdout=out, stderr=err, start_new_session=True
            )
        started.append(process)
        return process

    def result(name, process):
        process.wait(timeout=TIMEOUT)
        return {
            "status": process.returncode,
            "stdout": (tmp / f"{name}.out").read_text(),
            "stderr": (tmp / f"{name}.err").read_text(),
        }

    try:
        killed = start("killed", "from lengthgen.modeling.ndr import geometric_attention_cpu as m\nm.load()")
        leftover = lambda: list(root.glob("*/lock"))  # noqa: E731
        _wait_for(leftover, "lock file of torch's build", killed)
        time.sleep(2)  # into the compilation
        _kill_session(killed)
        results = {"killed": {"status": killed.returncode, "leftover": [str(p) for p in leftover()]}}
        builder = start("builder")
        _wait_for(lambda: COMPILING in (tmp / "builder.err").read_text(), "compile message", builder)
        waiter = start("waiter")  # the builder holds the build lock while it compiles
        results["builder"] = result("builder", builder)
        results["waiter"] = result("waiter", waiter)
        results["cached"] = result("cached", start("cached"))
        return results
    finally:
        for process in started:
            if process.poll() is None:
                _kill_session(process)


def test_a_build_killed_midway_leaves_no_later_call_waiting(builds):
    """A process killed (SIGKILL) while it builds leaves torch's lock file behind; the next call removes it, says so,
    builds the kernel and gets one that computes what the PyTorch path does, instead of waiting on the lock forever."""
    assert builds["killed"]["status"] == -signal.SIGKILL
    assert builds["killed"]["leftover"], "the killed build left no lock file: nothing was tested"
    builder = builds["builder"]
    assert builder["status"] == 0, builder["stderr"][-3000:]
    assert "matches the PyTorch path" in builder["stdout"]
    assert builder["stderr"].count(LEFTOVER) == 1


def test_one_line_says_when_the_kernel_is_compiled(builds):
    """The process that builds says so in one line on stderr before compiling; loading the cached build says
    nothing."""
    assert builds["builder"]["stderr"].count(COMPILING) == 1
    assert "about a minute" in builds["builder"]["stderr"]
    cached = builds["cached"]
    assert cached["status"] == 0, cached["stderr"][-3000:]
    assert "matches the PyTorch path" in cached["stdout"]
    assert "lengthgen:" not in cached["stderr"]


def test_a_process_started_during_a_build_waits_for_it_then_loads_it(builds):
    """A second process that wants the kernel while another builds it says it waits, then loads that build: it
    neither compiles nor takes the builder's torch lock file for a leftover."""
    waiter = builds["waiter"]
    assert waiter["status"] == 0, waiter["stderr"][-3000:]
    assert "matches the PyTorch path" in waiter["stdout"]
    assert waiter["stderr"].count(WAITING) == 1
    assert COMPILING not in waiter["stderr"] and LEFTOVER not in waiter["stderr"]
