"""``tfgpu status|devices [--json]`` (also ``python -m tfgpu_magic``): the same snapshot the magics
show, for a terminal or a script."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile

# 128 + SIGPIPE: the status a shell reports for any tool whose reader went away (`yes | head`).
EXIT_BROKEN_PIPE = 141
# 128 + SIGINT: what a shell reports for a tool stopped with Ctrl-C.
EXIT_INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C, maybe while a slow driver answered: one line, no traceback
        with contextlib.suppress(OSError, ValueError):
            print("tfgpu: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="tfgpu", description="TensorFlow's devices and this machine's GPUs.")
    parser.add_argument("command", nargs="?", default="status", choices=("status", "devices"),
                        help="status: GPUs and settings, without importing TensorFlow; "
                             "devices: also TensorFlow's physical devices (imports it, never starts its runtime)")
    parser.add_argument("--json", action="store_true", help="print the snapshot as JSON (shape: see README)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help (0) or a bad command line (2): argparse has written its text
        return _write("", int(done.code or 0))

    from .core.runtime import TFState, probe
    from .render.snapshot import take

    if args.command == "devices":
        with _without_tensorflow_log():
            if probe().state is TFState.NOT_IMPORTED:
                import tensorflow  # noqa: F401
            snap = take(list_devices=True)
    else:
        snap = take()
    if args.json:
        text = json.dumps(snap.to_dict(), indent=2)
    elif args.command == "devices":
        text = snap.devices_text()
    else:
        text = snap.to_text()
    return _write(text + "\n")


@contextlib.contextmanager
def _without_tensorflow_log():
    """TensorFlow's C++ start-up lines (absl's notice, oneDNN's) go to fd 2 before TF_CPP_MIN_LOG_LEVEL counts:
    fd 2 is caught while TensorFlow is imported and lists its devices, its log lines (core/tflog.py knows them)
    are dropped, and anything else written there passes on, in order."""
    from .core.tflog import classify

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            previous = None
            for line in caught.read().decode(errors="replace").splitlines(keepends=True):
                previous = classify(line.rstrip("\n"), previous)
                if previous is None:
                    sys.stderr.write(line)
            sys.stderr.flush()


def _write(text: str, status: int = 0) -> int:
    """Write ``text`` to stdout and flush it now, while a failure can still end as one line and an exit
    status (at interpreter exit it would print "Exception ignored ..."). Returns ``status`` or the failure's."""
    if sys.stdout is None:  # started with stdout closed (`tfgpu status >&-`)
        return _cannot_write("standard output is closed")
    try:
        # A GPU or process name the terminal's encoding cannot show is escaped, not a crash.
        with contextlib.suppress(AttributeError):
            sys.stdout.reconfigure(errors="backslashreplace")
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader stopped early (`| head`): said nothing, as any tool in a pipe.
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as exc:  # a full disk (ENOSPC), a quota, an I/O error
        _discard_stdout()
        return _cannot_write(exc.strerror or str(exc))
    return status


def _discard_stdout() -> None:
    # What stdout still buffers would be flushed again at interpreter exit, fail again, and print
    # "Exception ignored ...": point the descriptor at /dev/null so that last flush succeeds.
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _cannot_write(why: str) -> int:
    with contextlib.suppress(OSError):  # stderr on the same full disk: the exit status still tells
        print(f"tfgpu: cannot write the output: {why}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
