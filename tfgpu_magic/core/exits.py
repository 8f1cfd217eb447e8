"""How a kernel's process ended, from its exit status, in words a user can act on.

A process's exit status as ``subprocess.Popen.returncode`` has it: negative, the signal that ended it (-9 is SIGKILL);
from 0 up, the code it exited with. A kernel started through a shell or a wrapper (``conda run``, a script) reports
its child's death by a signal as 128 + the signal, as shells do: said so, as a likely signal. Pure: no process is
looked at here (server/deaths.py reads the status when jupyter_client's restarter finds the kernel gone).
"""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass

# What each signal most often means for a notebook's kernel.
_CAUSES = {
    "SIGKILL": "killed by SIGKILL: most often the system's out-of-memory killer (host memory), or someone ended it",
    "SIGSEGV": "crashed (SIGSEGV): a fault in native code (TensorFlow, CUDA or another compiled module), not in "
               "Python; the server's log has the kernel's last output",
    "SIGABRT": "crashed (SIGABRT): native code aborted (a failed check in TensorFlow or CUDA, or an uncaught C++ "
               "exception); the server's log has the kernel's last output",
    "SIGBUS": "crashed (SIGBUS): a bad memory access in native code, often shared memory (/dev/shm) full in a "
              "container",
    "SIGILL": "crashed (SIGILL): an instruction this CPU lacks, most often a TensorFlow build for newer CPUs (AVX)",
    "SIGFPE": "crashed (SIGFPE): an arithmetic fault in native code",
    "SIGTERM": "ended by SIGTERM: someone or something (a scheduler, a system shutdown) asked it to stop",
}


@dataclass(frozen=True)
class Ending:
    """How a process ended: ``signal`` (its number and name) or ``exit_code``, and ``cause``, one sentence."""

    signal: int | None
    signal_name: str | None
    exit_code: int | None
    cause: str

    def to_dict(self) -> dict:
        return {"signal": self.signal, "signal_name": self.signal_name, "exit_code": self.exit_code,
                "cause": self.cause}


def signal_name(number: int) -> str | None:
    try:
        return _signal.Signals(number).name
    except ValueError:
        return None


def _by_signal(number: int) -> str:
    name = signal_name(number)
    if name in _CAUSES:
        return _CAUSES[name]
    return f"ended by {name} (signal {number})" if name else f"ended by signal {number}"


def ending(returncode: int | None) -> Ending:
    """The ``Ending`` of a process whose ``Popen.returncode`` is ``returncode`` (None: not known)."""
    if not isinstance(returncode, int) or isinstance(returncode, bool):
        return Ending(None, None, None, "ended; its exit status is not known (its provisioner did not say)")
    if returncode < 0:
        return Ending(-returncode, signal_name(-returncode), None, _by_signal(-returncode))
    if returncode == 0:
        return Ending(None, None, 0, "exited with code 0: it ended itself (exit() or sys.exit() in a cell)")
    name = signal_name(returncode - 128) if 128 < returncode < 160 else None
    if name is not None:  # a wrapper's report of its child's signal
        cause = _by_signal(returncode - 128)
        return Ending(None, None, returncode, f"exited with code {returncode} ({returncode} = 128 + "
                                              f"{returncode - 128}: {name} as a shell reports it): {cause}")
    return Ending(None, None, returncode, f"exited with code {returncode}")
