"""How a kernel's process ended, in words (core/exits.py): each exit status's sentence pinned."""

from __future__ import annotations

import pytest

from tfgpu_magic.core.exits import ending


@pytest.mark.parametrize(("returncode", "signal", "name", "code", "cause"), [
    (-9, 9, "SIGKILL", None,
     "killed by SIGKILL: most often the system's out-of-memory killer (host memory), or someone ended it"),
    (-11, 11, "SIGSEGV", None, "crashed (SIGSEGV): a fault in native code (TensorFlow, CUDA or another compiled "
                               "module), not in Python; the server's log has the kernel's last output"),
    (-6, 6, "SIGABRT", None, "crashed (SIGABRT): native code aborted (a failed check in TensorFlow or CUDA, or an "
                             "uncaught C++ exception); the server's log has the kernel's last output"),
    (-15, 15, "SIGTERM", None,
     "ended by SIGTERM: someone or something (a scheduler, a system shutdown) asked it to stop"),
    (-1, 1, "SIGHUP", None, "ended by SIGHUP (signal 1)"),
    (-77, 77, None, None, "ended by signal 77"),
    (0, None, None, 0, "exited with code 0: it ended itself (exit() or sys.exit() in a cell)"),
    (3, None, None, 3, "exited with code 3"),
    (137, None, None, 137, "exited with code 137 (137 = 128 + 9: SIGKILL as a shell reports it): killed by SIGKILL: "
                           "most often the system's out-of-memory killer (host memory), or someone ended it"),
    (None, None, None, None, "ended; its exit status is not known (its provisioner did not say)"),
])
def test_each_exit_status_has_its_sentence(returncode, signal, name, code, cause):
    end = ending(returncode)
    assert (end.signal, end.signal_name, end.exit_code, end.cause) == (signal, name, code, cause)
    assert end.to_dict() == {"signal": signal, "signal_name": name, "exit_code": code, "cause": cause}
