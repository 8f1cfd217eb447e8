"""``tfgpu status|devices [--json] [--tensorflow]`` (also ``python -m tfgpu_magic``): the snapshot the magics show,
in a shell's words, for a terminal or a script. Nothing here imports TensorFlow unless ``--tensorflow`` asks for its
own view: its GPU names are predicted as CUDA will number them (core/numbering.py)."""

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
    parser = argparse.ArgumentParser(
        prog="tfgpu", description="This machine's GPUs and TensorFlow's names for them, from a shell.",
        epilog="In a notebook: %load_ext tfgpu_magic, then %tfgpu help.")
    parser.add_argument("command", nargs="?", default="status", choices=("status", "devices"),
                        help="status: GPUs, their processes (by notebook where a Jupyter server knows them) and the "
                             "environment's settings; devices: GPUs with TensorFlow's names, predicted without "
                             "importing it")
    parser.add_argument("--json", action="store_true", help="print the snapshot as JSON (shape: docs/reference.md)")
    parser.add_argument("--tensorflow", action="store_true",
                        help="devices: import TensorFlow (a few seconds) and show its own device list, not a "
                             "prediction; its runtime is never started")
    parser.add_argument("--version", action="store_true", help="print tfgpu's version and exit")
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help (0) or a bad command line (2): argparse has written its text
        return _write("", int(done.code or 0))
    if args.version:
        from .core.version import __version__

        return _write(f"tfgpu (tfgpu_magic) {__version__}\n")
    if args.tensorflow and args.command != "devices":
        return _usage(parser, "--tensorflow goes with devices: `tfgpu devices --tensorflow`")

    from .render.shell_words import ShellSnapshot
    from .render.snapshot import take

    # Without --tensorflow, TensorFlow is not imported: its GPU names are predicted.
    snap = _with_notebooks(_with_tensorflow(take) if args.tensorflow else take(kind=ShellSnapshot))
    if args.json:
        text = json.dumps(snap.to_dict(), indent=2)
    elif args.command == "devices":
        text = snap.devices_text()
    else:
        text = snap.to_text()
    return _write(text + "\n")


def _usage(parser: argparse.ArgumentParser, message: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        print(f"{parser.format_usage().strip()}\ntfgpu: {message}", file=sys.stderr)
    return 2


def _with_tensorflow(take):
    """TensorFlow's own view: imported here (never its runtime started), saying so first on a terminal, where
    someone waits; a script reading stderr gets nothing it did not ask for."""
    from .core.runtime import TFState, probe
    from .render.shell_words import ShellSnapshot

    if probe().state is TFState.NOT_IMPORTED:
        if _is_terminal(sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                print("tfgpu: importing TensorFlow (a few seconds)...", file=sys.stderr, flush=True)
        with _without_tensorflow_log():
            import tensorflow  # noqa: F401
    with _without_tensorflow_log():
        snap = take(list_devices=True, kind=ShellSnapshot)
    import dataclasses

    return dataclasses.replace(snap, predicted=False)


def _is_terminal(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False


def _with_notebooks(snap):
    """``snap`` with the notebooks a running Jupyter server knows its GPU processes by; unchanged when no process is
    listed or no server answers (silently: the program's name then stands, as nvidia-smi shows it)."""
    pids = {p.pid for procs in snap.nvml.listed_processes() for p in procs}
    if not pids:
        return snap
    from . import notebooks_seen

    found = notebooks_seen.notebooks(pids)
    if found is None:
        return snap
    import dataclasses

    return dataclasses.replace(snap, notebooks=found.by_pid, notebook_server=found.server)


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
