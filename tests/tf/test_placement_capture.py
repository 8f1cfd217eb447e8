"""Per-cell capture: descriptors, Python streams, threads, and the controller in terminal IPython.

Most descriptor tests redirect a spare descriptor whose original destination is a pipe the test reads,
so they see exactly what passes through. The terminal tests run a real ``InteractiveShell`` with real
TensorFlow in fresh subprocesses (TensorFlow's placement log is fixed when its runtime starts).
"""

from __future__ import annotations

import ctypes
import io
import os
import re
import select
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from IPython.core.error import UsageError

from tfgpu_magic.core.placement import Capture, LineFields, drain_orphans, flush_c_stdio

DEV0 = "/job:localhost/replica:0/task:0/device:CPU:0"
PRINTF = f"MatMul: (MatMul): {DEV0}\n".encode()
LOGGED = f"I0000 00:00:1796011003.390736    2910 placer.cc:162] MatMul: (MatMul): {DEV0}\n".encode()
EAGER = f"Executing op MatMul in device {DEV0}\n"
RAW = re.compile(r"placer\.cc|Executing op|: \(\w+\): /job:")


class Target:
    """A spare descriptor ``fd`` whose original destination is a pipe we read back."""

    def __init__(self):
        self.read, write = os.pipe()
        self.fd = os.dup(write)
        os.close(write)
        os.set_blocking(self.read, False)
        self.chunks: list[bytes] = []

    def drain(self, wait: float = 0.0, until: int | None = None) -> bytes:
        deadline = time.monotonic() + wait
        while until is None or sum(map(len, self.chunks)) < until:
            ready, _, _ = select.select([self.read], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            data = os.read(self.read, 1 << 20)
            if not data:
                break
            self.chunks.append(data)
        return b"".join(self.chunks)

    def close(self):
        os.close(self.fd)
        os.close(self.read)


@pytest.fixture
def target():
    t = Target()
    yield t
    t.close()


@pytest.fixture
def sink():
    seen: list[LineFields] = []
    lock = threading.Lock()

    def add(fields):
        with lock:
            seen.append(fields)

    add.seen = seen
    return add


def test_placement_lines_consumed_everything_else_passes(target, sink):
    with Capture(sink, fds=(target.fd,), streams=()):
        os.write(target.fd, b"keep 1\n" + PRINTF + b"keep 2\n" + LOGGED + b"no newline at the end")
    assert target.drain() == b"keep 1\nkeep 2\nno newline at the end"
    assert [(f.channel, f.op, f.logged) for f in sink.seen] == [("placer", "MatMul", False),
                                                                ("placer", "MatMul", True)]


def test_one_mib_is_drained_while_written_exactly_once_in_order(target, sink):
    data = b"".join(b"line %07d %s\n" % (i, b"x" * 40) for i in range(20_000))
    assert len(data) > 1 << 20
    reader = threading.Thread(target=target.drain, args=(10.0, len(data)))  # the original destination is a pipe too
    reader.start()
    start = time.monotonic()
    with Capture(sink, fds=(target.fd,), streams=()):
        os.write(target.fd, data)  # one write, 16 times a pipe's capacity: blocks unless drained meanwhile
    reader.join()
    assert time.monotonic() - start < 5
    assert target.drain() == data
    assert sink.seen == []


def test_a_cut_line_is_joined_before_parsing(target, sink):
    with Capture(sink, fds=(target.fd,), streams=()):
        os.write(target.fd, PRINTF[:11])  # C stdio flushes in blocks: a line can be cut anywhere
        time.sleep(0.05)
        os.write(target.fd, PRINTF[11:] + b"after\n")
    assert target.drain() == b"after\n"
    assert len(sink.seen) == 1


def test_a_partial_line_that_is_not_placement_passes_at_once(target, sink):
    with Capture(sink, fds=(target.fd,), streams=()):
        os.write(target.fd, b"Enter a value: ")
        assert target.drain(wait=1.0) == b"Enter a value: "  # a prompt is not held back
        os.write(target.fd, b"Name:")  # could start a placement line: held a moment, then passed
        time.sleep(0.6)
        assert target.drain(wait=0.5).endswith(b"Name:")


def test_no_threads_outside_a_capture_and_stop_is_idempotent(target, sink):
    before = threading.active_count()
    capture = Capture(sink, fds=(target.fd,), streams=())
    capture.start()
    assert threading.active_count() == before + 1
    capture.stop()
    capture.stop()
    assert threading.active_count() == before
    os.write(target.fd, b"direct\n")
    assert target.drain() == b"direct\n"


@pytest.mark.parametrize("error", [ValueError, KeyboardInterrupt])
def test_an_exception_inside_restores_the_descriptor(target, sink, error):
    before = os.fstat(target.fd)
    with pytest.raises(error), Capture(sink, fds=(target.fd,), streams=()):
        os.write(target.fd, b"before the error\n")
        raise error("boom")
    after = os.fstat(target.fd)
    assert (after.st_ino, after.st_dev) == (before.st_ino, before.st_dev)
    assert target.drain() == b"before the error\n"
    with Capture(sink, fds=(target.fd,), streams=()):  # and capture works again
        os.write(target.fd, PRINTF)
    assert len(sink.seen) == 1


def test_a_child_holding_the_pipe_does_not_block_the_cell_end(target, sink):
    capture = Capture(sink, fds=(target.fd,), streams=())
    capture.start()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5); print('late child')"],
                             stdout=target.fd)
    start = time.monotonic()
    capture.stop()
    assert time.monotonic() - start < 0.4
    child.wait()
    drain_orphans()
    assert b"late child\n" in target.drain(wait=1.0)


def test_real_fds_and_c_printf(capfd, sink):
    libc = ctypes.CDLL(None)
    libc.printf(b"buffered before\n")  # pytest's fd 1 is a file: C buffers this
    with Capture(sink):
        libc.printf(PRINTF)  # still in C's buffer when the cell ends: the stop flush brings it here
        os.write(2, LOGGED + b"stderr kept\n")
        print("python kept")
    flush_c_stdio()
    out, err = capfd.readouterr()
    assert out == "buffered before\npython kept\n"
    assert err == "stderr kept\n"
    assert [f.logged for f in sink.seen].count(False) == 1
    assert [f.logged for f in sink.seen].count(True) == 1


class PythonStream(io.StringIO):
    """A Python-level stream like ipykernel's OutStream: ``write`` can be patched on the instance."""


@pytest.mark.parametrize("kind", ["python", "textio"])
def test_python_stream_filter(monkeypatch, sink, kind):
    if kind == "python":
        stream = PythonStream()
        read_back = stream.getvalue
    else:
        buffer = io.BytesIO()
        stream = io.TextIOWrapper(buffer, encoding="utf-8", write_through=True)  # write is read-only
        def read_back():
            return buffer.getvalue().decode()
    monkeypatch.setattr(sys, "stdout", stream)
    with Capture(sink, fds=(), streams=("stdout",)):
        sys.stdout.write(EAGER)  # what TensorFlow's log listener does inside IPython
        print("kept", 1)
        sys.stdout.write("a\n" + EAGER + "b\n")
        assert sys.stdout.fileno if kind == "textio" else True  # other attributes still reach the stream
    assert sys.stdout is stream
    assert "write" not in vars(stream) if kind == "python" else True
    assert read_back() == "kept 1\na\nb\n"
    assert [f.channel for f in sink.seen] == ["eager", "eager"]


def test_python_stream_filter_restores_a_previous_instance_patch(monkeypatch, sink):
    stream = PythonStream()
    tee = []

    def tee_write(text):  # IPython's output tee patches write the same way
        tee.append(text)
        return PythonStream.write(stream, text)

    stream.write = tee_write
    monkeypatch.setattr(sys, "stdout", stream)
    with Capture(sink, fds=(), streams=("stdout",)):
        sys.stdout.write(EAGER + "seen\n")
    assert stream.write is tee_write
    assert tee == ["seen\n"]


# --- the controller in a real shell, without TensorFlow ------------------------------------------------


@pytest.fixture
def controller():
    from IPython.core.interactiveshell import InteractiveShell

    from tfgpu_magic.ipython.placement import PlacementController

    shell = InteractiveShell.instance()
    ctl = PlacementController(shell)
    ctl.register()
    yield ctl
    ctl.unregister()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bogus"], "tfgpu: unknown placement subcommand 'bogus'; valid: on, off, show, clear, status"),
        (["on", "now"], "tfgpu: placement on takes no arguments, got 'now'"),
        (["show", "--device", "TPUX"], "tfgpu: bad --device 'TPUX'; use a device like /CPU:1, /GPU:0"),
    ],
)
def test_command_errors(controller, argv, message):
    with pytest.raises(UsageError) as info:
        controller.command(argv)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("device", ["/XPU:0", "GPU", "/CPU:1 extra", "cpu-1"])
def test_device_cell_rejects_bad_devices(controller, device):
    with pytest.raises(UsageError) as info:
        controller.run_cell_on_device(device, "x = 1")
    assert str(info.value) == (f"tfgpu: bad device {device!r}; use a device like /CPU:1, /GPU:0, CPU:0 or "
                               "/job:localhost/replica:0/task:0/device:CPU:0")


def test_status_shape(controller):
    status = controller.status()
    assert {"on", "mode", "records", "dropped", "maxlen", "tf_log_at_init", "route", "notes"} <= set(status)
    assert status["on"] is False and status["records"] == 0


def test_register_and_unregister_leave_nothing_behind():
    from IPython.core.interactiveshell import InteractiveShell

    from tfgpu_magic.ipython.placement import PlacementController

    shell = InteractiveShell.instance()
    before_threads = threading.active_count()
    before_idents = {t.ident for t in threading.enumerate()}
    before_pre = list(shell.events.callbacks["pre_run_cell"])
    before_meta = list(sys.meta_path)
    ctl = PlacementController(shell)
    ctl.register()
    assert threading.active_count() == before_threads  # loading starts no thread
    ctl.command(["on"])
    for _ in range(3):
        shell.run_cell("x = 1")
        # between cells: the one fd-2 reader, kept for the shell's life, and no per-cell thread left over
        assert threading.active_count() == before_threads + 1
        assert [t.name for t in threading.enumerate() if t.ident not in before_idents] == ["tfgpu-stderr"]
    fd2 = os.readlink("/proc/self/fd/2")
    ctl.unregister()
    assert threading.active_count() == before_threads  # unloading ends it
    assert os.readlink("/proc/self/fd/2") != fd2  # and fd 2 points where it did before
    assert shell.events.callbacks["pre_run_cell"] == before_pre
    assert sys.meta_path == before_meta


# --- terminal IPython with TensorFlow, in fresh processes ----------------------------------------------------

DRIVER = """
import os, sys, threading
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
def cell(n, source):
    sys.stdout.flush()
    os.write(1, f"<<cell {n} start>>\\n".encode())
    result = shell.run_cell(source, store_history=True)
    sys.stdout.flush()
    os.write(1, f"<<cell {n} end ok={result.success} threads={threading.active_count()}>>\\n".encode())
"""


def run_driver(body: str, env_extra: dict[str, str] | None = None, timeout: int = 120) -> tuple[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "PYTEST_CURRENT_TEST")}
    env.update(env_extra or {})
    script = DRIVER + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout, proc.stderr


def cells(out: str) -> dict[int, str]:
    found = re.findall(r"<<cell (\d+) start>>\n(.*?)<<cell \1 end(.*?)>>", out, re.S)
    return {int(n): body + "|" + tail for n, body, tail in found}


@pytest.mark.tf
def test_terminal_ipython_full_log():
    out, err = run_driver("""
        cell(1, "%load_ext tfgpu_magic")
        cell(2, "%tfgpu placement on")
        cell(3, "import tensorflow as tf\\n"
                "cpus = tf.config.list_physical_devices('CPU')\\n"
                "tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 3)")
        cell(4, "a = tf.constant([[1.0, 2.0], [3.0, 4.0]])\\nwith tf.device('/CPU:2'):\\n    b = tf.matmul(a, a)\\n"
                "print('cell 4 body')")
        cell(5, "raise ValueError('on purpose')")
        cell(6, "c = tf.nn.relu(a)")
        cell(7, "raise KeyboardInterrupt")
        cell(8, "@tf.function\\ndef f(x):\\n    return tf.sin(x) * 2.0\\nwith tf.device('/CPU:1'):\\n    f(a)")
        cell(9, "with tf.device('/CPU:7'):\\n    d = tf.nn.sigmoid(a)")
        cell(10, "%%tfgpu device /CPU:1\\ne = tf.cos(a)\\ne.device")
        cell(11, "%%tfgpu device /GPU:1\\ntf.tan(a).device")
        cell(12, "%tfgpu placement show --device CPU:2 --op MatMul")
        cell(13, "%tfgpu placement off")
        cell(14, "g = tf.nn.softplus(a)\\nprint('quiet')")
        cell(15, "%tfgpu placement show --cell 14")
        cell(16, "%unload_ext tfgpu_magic")
        print("fds", os.readlink('/proc/self/fd/1') == os.readlink('/proc/self/fd/1'), threading.active_count())
    """)
    c = cells(out)
    assert len(c) == 16, out
    assert not RAW.search(out) and not RAW.search(err), (out, err)
    assert "cell 4 body" in c[4] and re.search(r"CPU:2\s+MatMul", c[4])
    assert "ok=False" in c[5] and re.search(r"CPU:0\s+Relu", c[6])
    assert "ok=False" in c[7]
    assert re.search(r"CPU:1\s+Sin", c[8]) and re.search(r"CPU:1\s+__inference_f_\d+", c[8])
    assert "fallback: asked /CPU:7, ran on CPU:0" in c[9]
    assert re.search(r"CPU:1\s+Cos", c[10]) and "fallback" not in c[10]
    assert "fallback: asked /GPU:1, ran on CPU:0 (Tan)" in c[11]
    assert "MatMul" in c[12] and "CPU:0" not in c[12].split("matching", 1)[1].split("\n", 1)[1]
    assert "hiding" in c[13]
    assert "quiet" in c[14] and "tfgpu placement" not in c[14]  # off: no summary and no raw line
    assert "0 matching" in c[15]
    loaded = int(c[1].rsplit("threads=", 1)[1])
    for n in range(2, 16):  # the one fd-2 reader from the first cell after loading, and no other left over
        assert c[n].endswith(f"threads={loaded + 1}"), (n, c[n])
    assert c[16].endswith(f"threads={loaded}"), c[16]  # unloading ends it


@pytest.mark.tf
def test_terminal_ipython_on_after_runtime_start_uses_run_metadata():
    out, err = run_driver("""
        from tfgpu_magic.ipython.placement import PlacementController
        ctl = PlacementController(shell, maxlen=4)
        ctl.register()
        cell(1, "import tensorflow as tf\\na = tf.constant([1.0, 2.0])\\nb = tf.sin(a)")
        ctl.command(["on"])
        cell(2, "c = tf.sin(a)\\nd = tf.nn.elu(a)")
        cell(3, "@tf.function\\ndef f(x):\\n    return tf.cos(x) + 1.0\\nf(a)")
        print("status", ctl.status()["route"], ctl.status()["dropped"] > 0, len(ctl.log))
        ctl.unregister()
    """)
    c = cells(out)
    assert "cannot turn it on any more" in out and "%tfgpu placement on" in out
    assert "Sin" not in c[2] and "Elu" in c[2]  # Sin's kernel was compiled before: invisible; Elu is new
    assert re.search(r"CPU:0\s+Cos", c[3]) and re.search(r"CPU:0\s+AddV2", c[3])
    assert "status run_metadata True 4" in out
    assert not RAW.search(out) and not RAW.search(err)


@pytest.mark.tf
def test_terminal_ipython_with_tf_cpp_min_log_level():
    out, err = run_driver("""
        cell(1, "%load_ext tfgpu_magic")
        cell(2, "%tfgpu placement on")
        cell(3, "import tensorflow as tf\\na = tf.constant([1.0, 2.0])\\nb = tf.square(a)")
        cell(4, "%tfgpu placement status")
        cell(5, "print('after')")
    """, env_extra={"TF_CPP_MIN_LOG_LEVEL": "2"})
    c = cells(out)
    # "placed" comes from the printf channel alone here, "executed" from the eager listener
    assert re.search(r"CPU:0\s+Square\s+1\s+1", c[3]), c[3]
    assert "TF_CPP_MIN_LOG_LEVEL=2 hides" in c[4]
    assert not RAW.search(out) and not RAW.search(err)
