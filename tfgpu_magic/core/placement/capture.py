"""Capture of the placement channels: fd 1 and fd 2 are dup2'd onto pipes drained by reader threads, C stdio
is flushed at cell boundaries so block-buffered ``printf`` output lands in the cell that caused it, and
``sys.stdout``/``sys.stderr`` get a filter for the eager lines. Placement lines become records (records.py);
every other byte goes, unchanged and in order per stream, where it would have gone.

:class:`Capture` brackets one cell (no thread exists outside :meth:`Capture.start` ... :meth:`Capture.stop`).
:class:`StderrTap` stays on fd 2 from a kernel's first cell to the extension's unload and marks cell
boundaries instead (:meth:`StderrTap.mark`): making and joining a pipe and a thread around every cell cost
more than the cell itself.


This module imports neither IPython nor TensorFlow.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .records import LineFields, maybe_placement_prefix, parse_line

# --- capture --------------------------------------------------------------------------------------------

_libc = None


def flush_c_stdio() -> None:
    """``fflush(NULL)``: push C stdio buffers (TensorFlow's printf) to their descriptors now."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None)
        _libc.fflush(None)
    except (OSError, AttributeError):  # no C library to talk to: nothing buffered we could reach
        pass


def _try_flush_c_stdout() -> bool:
    """From a reader thread: flush C's ``stdout`` only if no other thread holds its lock (a thread
    blocked in printf on a full pipe holds it, and we are the one who would drain that pipe)."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None)
        stream = ctypes.c_void_p.in_dll(_libc, "stdout")
        if _libc.ftrylockfile(stream) != 0:
            return False
        try:
            _libc.fflush_unlocked(stream)
        finally:
            _libc.funlockfile(stream)
        return True
    except (OSError, AttributeError, ValueError):  # not glibc: let the timeout pass the line through
        return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        except OSError as err:  # the destination went away (EPIPE, EBADF): nothing to deliver to
            if err.errno in (errno.EPIPE, errno.EBADF):
                return
            raise
        view = view[n:]


class _Orphan:
    """A capture pipe whose write end a child process still holds after its cell ended: kept open (so
    the child does not die of SIGPIPE) and drained into the original destination at each capture stop."""

    def __init__(self, read_fd: int, target_fd: int):
        self.read_fd = read_fd
        self.target_fd = target_fd

    def drain(self) -> bool:
        """Pass through what is waiting; True when the pipe reached EOF and was closed."""
        while True:
            try:
                ready, _, _ = select.select([self.read_fd], [], [], 0)
                if not ready:
                    return False
                data = os.read(self.read_fd, 65536)
            except OSError:
                data = b""
            if not data:
                self.close()
                return True
            _write_all(self.target_fd, data)

    def close(self) -> None:
        for fd in (self.read_fd, self.target_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


_orphans: list[_Orphan] = []


def drain_orphans(close: bool = False) -> None:
    for orphan in list(_orphans):
        if orphan.drain() or close:
            if close:
                orphan.close()
            _orphans.remove(orphan)


Sink = Callable[[LineFields], None]


class _FdRedirect:
    """fd ``fd`` dup2'd onto a pipe; a reader thread consumes placement lines and writes the rest to the
    saved original descriptor."""

    HOLD_S = 0.1  # how long a partial line that may be a placement line waits for its end
    # After a small read, let more lines gather before the next one: one wake-up (and one handoff of
    # the GIL) per batch instead of per line, which is what makes capture cheap for a log line per op.
    BATCH_S = 0.004
    CHUNK = 1 << 16

    def __init__(self, fd: int, sink: Sink | None, other_lines: Callable[[str], bool] | None = None,
                 name: str | None = None, hold: Callable[[bytes], bool] | None = None):
        self.fd = fd
        self.name = name or f"tfgpu-placement-fd{fd}"
        self.sink = sink  # None: placement lines are not parsed, they pass like any other line
        # Offered every whole line that is not a placement line; True keeps it off the output (the
        # TensorFlow log taming of tflog.py takes its own lines this way).
        self.other_lines = other_lines
        # True for a partial line that may be the start of one other_lines takes: it waits (HOLD_S at most)
        # for its end instead of passing at once, so a line cut by a read is still recognised whole.
        self.hold = hold
        self._saved: int | None = None
        self._read: int | None = None
        self._wake: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        self._eof = False
        # True from the moment the reader may hold bytes it has not passed on until it holds none: with
        # the pipe empty and this False, everything written to fd before now has been handled (mark()).
        self._busy = False
        self._marked = threading.Event()
        self.error: BaseException | None = None

    def start(self) -> None:
        saved = os.dup(self.fd)
        try:
            read, write = os.pipe()
            try:
                os.dup2(write, self.fd)
            finally:
                os.close(write)
        except BaseException:
            os.close(saved)
            raise
        self._saved, self._read = saved, read
        self._wake = os.pipe()
        self._eof = False
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    MARK_DRAIN_READS = 64  # a mark reads at most this many chunks: a child writing nonstop cannot hold it

    def mark(self, timeout: float = 5.0) -> bool:
        """Return once every byte written to the descriptor before this call has been handed on (sink,
        line taker or output); a partial line left then counts as a whole one. Cheap when the reader is
        idle with an empty pipe, which is the usual case between cells. False when the reader did not
        answer within ``timeout`` (it is stuck writing to a destination that does not read)."""
        if self._thread is None:
            return True
        # The pipe is read first: a byte the reader took out of it already has made it busy.
        if not select.select([self._read], [], [], 0)[0] and not self._busy:
            return True
        self._marked.clear()
        with contextlib.suppress(OSError):
            os.write(self._wake[1], b"m")
        return self._marked.wait(timeout)

    def restore(self) -> None:
        """Point the descriptor back at its original destination (the pipe's write end goes with it)."""
        if self._saved is not None:
            os.dup2(self._saved, self.fd)

    def finish(self) -> None:
        """After restore(): let the reader drain what is in the pipe, then end it and close the pipe."""
        if self._thread is None:
            return
        with contextlib.suppress(OSError):
            os.write(self._wake[1], b"x")
        self._thread.join()
        self._thread = None
        for fd in self._wake:
            os.close(fd)
        self._wake = None
        if self._eof:
            os.close(self._read)
            os.close(self._saved)
        else:  # a child still holds the write end
            _orphans.append(_Orphan(self._read, self._saved))
        self._read = self._saved = None

    # -- the reader thread --------------------------------------------------------------------------
    def _run(self) -> None:
        read, wake = self._read, self._wake[0]
        pending = b""
        flushed = False
        try:
            while True:
                self._busy = bool(pending)
                timeout = self.HOLD_S if pending else None
                ready, _, _ = select.select([read, wake], [], [], timeout)
                self._busy = True
                if wake in ready:
                    final = b"x" in os.read(wake, 64)
                    for _ in range(self.MARK_DRAIN_READS if not final else 1 << 62):
                        if not select.select([read], [], [], 0)[0]:
                            break
                        data = os.read(read, self.CHUNK)
                        if not data:
                            self._eof = True
                            break
                        pending = self._feed(pending + data)
                    if final or self._eof:
                        break
                    pending = self._flush_pending(pending)
                    self._marked.set()
                elif read in ready:
                    data = os.read(read, self.CHUNK)
                    if not data:
                        self._eof = True
                        break
                    pending = self._feed(pending + data)
                    flushed = False
                    if len(data) < self.CHUNK:
                        time.sleep(self.BATCH_S)
                elif self.fd == 1 and not flushed:
                    # maybe a cut printf line whose rest is still in C's buffer
                    flushed = True
                    _try_flush_c_stdout()
                else:
                    _write_all(self._saved, pending)
                    pending = b""
        except BaseException as err:  # never lose output because of us
            self.error = err
        finally:
            self._flush_pending(pending)
            self._busy = False
            self._marked.set()  # a mark waiting on a reader that ended has nothing more to wait for

    def _flush_pending(self, pending: bytes) -> bytes:
        """A partial line at a boundary counts as a whole one."""
        if pending:
            text = pending.decode("utf-8", "replace")
            sink = self.sink
            fields = parse_line(text) if sink is not None else None
            if fields is not None:
                sink(fields)
            elif not (self.other_lines is not None and self._taken(text)):
                _write_all(self._saved, pending)
        return b""

    def _taken(self, text: str) -> bool:
        try:
            return bool(self.other_lines(text))
        except Exception:  # a bug in a taker must not cost the user a line
            return False

    def _feed(self, data: bytes) -> bytes:
        *lines, tail = data.split(b"\n")
        out = []
        sink = self.sink
        for line in lines:
            if sink is not None and b"/device:" in line:
                fields = parse_line(line.decode("utf-8", "replace"))
                if fields is not None:
                    if out:
                        _write_all(self._saved, b"".join(out))
                        out = []
                    sink(fields)
                    continue
            if self.other_lines is not None and self._taken(line.decode("utf-8", "replace")):
                if out:  # what came before goes out first: order is kept
                    _write_all(self._saved, b"".join(out))
                    out = []
                continue
            out.append(line + b"\n")
        if tail and not maybe_placement_prefix(tail) and not (self.hold is not None and self.hold(tail)):
            out.append(tail)
            tail = b""
        if out:
            _write_all(self._saved, b"".join(out))
        return tail


class StderrTap:
    """fd 2 read for a kernel's life by one reader thread: TensorFlow's log lines go to ``lines`` (a taker,
    tflog.py), placement lines to ``sink`` while one is set, every other byte to where fd 2 pointed before.

    The kernel marks each cell's start and end (:meth:`mark`) instead of making a pipe and a thread per
    cell; a mark costs one ``select`` when nothing is in flight. Started by the first cell that needs it,
    never at import or ``%load_ext``; :meth:`stop` puts fd 2 back."""

    def __init__(self, lines: Callable[[str], bool] | None = None, hold: Callable[[bytes], bool] | None = None):
        self._lines = lines
        self._hold = hold
        self._redirect: _FdRedirect | None = None

    @property
    def active(self) -> bool:
        return self._redirect is not None

    def start(self) -> None:
        if self._redirect is None:
            redirect = _FdRedirect(2, None, self._lines, name="tfgpu-stderr", hold=self._hold)
            redirect.start()
            self._redirect = redirect

    def set_sink(self, sink: Sink | None) -> None:
        """Placement lines on fd 2 go to ``sink`` from now on (None: they pass through)."""
        if self._redirect is not None:
            self._redirect.sink = sink

    def set_lines(self, lines: Callable[[str], bool] | None, hold: Callable[[bytes], bool] | None = None) -> None:
        """Offer fd 2's other whole lines to ``lines`` (None: they pass); ``hold`` as for _FdRedirect."""
        self._lines, self._hold = lines, hold
        if self._redirect is not None:
            self._redirect.other_lines = lines
            self._redirect.hold = hold

    def mark(self) -> bool:
        """Every byte written to fd 2 before this call has been handed on when it returns (True)."""
        flush_c_stdio()  # what C buffered belongs to the side of the mark it was written on
        return self._redirect is None or self._redirect.mark()

    def stop(self) -> None:
        redirect, self._redirect = self._redirect, None
        if redirect is not None:
            flush_c_stdio()
            redirect.restore()
            redirect.finish()
            drain_orphans()

    @property
    def error(self) -> BaseException | None:
        return self._redirect.error if self._redirect is not None else None


_MISSING = object()


class _StreamFilter:
    """Drops the eager lines TensorFlow's IPython log listener writes to ``sys.stdout``.

    It patches ``write`` on the stream instance, as IPython's own output tee does (ipykernel checks the
    stream's class), or, for streams that refuse (``io.TextIOWrapper``), swaps in a proxy."""

    def __init__(self, name: str, sink: Sink):
        self.name = name
        self.sink = sink
        self.enabled = False
        self._stream: Any = None
        self._previous: Any = _MISSING
        self._proxy: _StreamProxy | None = None
        self._write: Callable | None = None

    def install(self) -> None:
        stream = getattr(sys, self.name, None)
        if stream is None:
            return
        original = stream.write
        self.enabled = True

        def write(text, *args, **kwargs):
            if self.enabled and isinstance(text, str) and "/device:" in text:
                if text.find("\n") in (-1, len(text) - 1):  # one line: what TensorFlow's listener writes
                    fields = parse_line(text)
                    if fields is None:
                        return original(text, *args, **kwargs)
                    self.sink(fields)
                    return len(text)
                kept = self._filter(text)
                if not kept:
                    return len(text)
                original(kept, *args, **kwargs)
                return len(text)
            return original(text, *args, **kwargs)

        self._stream = stream
        self._write = write
        try:
            self._previous = vars(stream).get("write", _MISSING)
            stream.write = write
        except (AttributeError, TypeError):
            self._previous = _MISSING
            self._proxy = _StreamProxy(stream, write)
            setattr(sys, self.name, self._proxy)

    def remove(self) -> None:
        self.enabled = False  # if someone wrapped us in turn, our wrapper stays but passes everything
        stream, self._stream = self._stream, None
        if stream is None:
            return
        if self._proxy is not None:
            if getattr(sys, self.name, None) is self._proxy:
                setattr(sys, self.name, stream)
            self._proxy = None
        elif vars(stream).get("write") is self._write:
            if self._previous is _MISSING:
                del stream.write
            else:
                stream.write = self._previous
        self._previous = _MISSING
        self._write = None

    def _filter(self, text: str) -> str:
        kept = []
        for line in text.splitlines(keepends=True):
            fields = parse_line(line.rstrip("\r\n")) if "/device:" in line else None
            if fields is None:
                kept.append(line)
            else:
                self.sink(fields)
        return "".join(kept)


class _StreamProxy:
    """Stands in for a stream whose ``write`` cannot be patched; everything else goes to the stream."""

    def __init__(self, stream: Any, write: Callable):
        object.__setattr__(self, "_stream", stream)
        object.__setattr__(self, "write", write)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._stream, name, value)

    def __iter__(self):
        return iter(self._stream)


class Capture:
    """Per-cell capture of the placement channels: fd 1, fd 2 and Python's sys.stdout/sys.stderr.

    ``sink(fields)`` is called for each placement line, from reader threads and the main thread. Every
    other byte is passed on. ``start()``/``stop()`` bracket one cell; ``stop()`` is safe to call twice
    and after a failed start, and always restores the descriptors and streams."""

    def __init__(self, sink: Sink, fds: Sequence[int] = (1, 2), streams: Sequence[str] = ("stdout", "stderr"),
                 stderr_lines: Callable[[str], bool] | None = None,
                 stderr_hold: Callable[[bytes], bool] | None = None):
        self.sink = sink
        self.stderr_lines = stderr_lines  # offered fd 2's other lines (TensorFlow's log taming)
        self.stderr_hold = stderr_hold
        self._fds = tuple(fds)
        self._stream_names = tuple(streams)
        self._redirects: list[_FdRedirect] = []
        self._filters: list[_StreamFilter] = []

    @property
    def active(self) -> bool:
        return bool(self._redirects or self._filters)

    @property
    def fds(self) -> tuple[int, ...]:
        return self._fds

    def start(self) -> None:
        if self.active:
            return
        self._flush_python()
        flush_c_stdio()  # what C buffered before the cell belongs before it
        try:
            for fd in self._fds:
                redirect = (_FdRedirect(2, self.sink, self.stderr_lines, hold=self.stderr_hold) if fd == 2
                            else _FdRedirect(fd, self.sink))
                redirect.start()
                self._redirects.append(redirect)
            for name in self._stream_names:
                stream_filter = _StreamFilter(name, self.sink)
                stream_filter.install()
                self._filters.append(stream_filter)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Flush, restore every descriptor and stream, drain the pipes and end the reader threads."""
        if not self.active:
            return
        try:
            self._flush_python()
            flush_c_stdio()
        finally:
            filters, self._filters = self._filters, []
            for stream_filter in reversed(filters):
                stream_filter.remove()
            redirects, self._redirects = self._redirects, []
            for redirect in redirects:
                redirect.restore()
            for redirect in redirects:
                redirect.finish()
            drain_orphans()

    def _flush_python(self) -> None:
        for name in self._stream_names:
            stream = getattr(sys, name, None)
            try:
                if stream is not None:
                    stream.flush()
            except Exception:  # a closed or odd stream: nothing to flush
                pass

    def __enter__(self) -> Capture:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


