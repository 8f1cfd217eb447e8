"""Files the product keeps in a folder other users may reach (the Jupyter runtime folder: often /tmp, by
``JUPYTER_RUNTIME_DIR``): a folder of the user's own, mode 0700, and files in it opened without following a
link and without blocking, used only when they are regular files of the user's.

Another user who can write the parent (a shared /tmp) can make the folder first, and put in it links to the
user's files, FIFOs that block a reader and lock files with made-up contents. So the folder must be a real
folder the user owns (``lstat``: a link to one is refused too), and every file is checked after it is opened
(``fstat`` on the descriptor, so nothing can swap it between the check and the use). A refusal is a ValueError
whose message is one line naming the path and why.

No IPython and nothing heavy: the claims of ``waiting.py`` use it, and so can anything else the product keeps
beside them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from .inputs import printable

FOLDER_MODE = 0o700
FILE_MODE = 0o600


class PrivateFolderError(ValueError):
    """The folder cannot be made or is not the user's own; the message is one line naming it and why."""


class PrivateFileError(ValueError):
    """A file in the private folder that is not a regular file of the user's; it was not used."""


def runtime_folder() -> Path:
    """The user's Jupyter runtime folder, as jupyter_core finds it (JUPYTER_RUNTIME_DIR first)."""
    try:
        from jupyter_core.paths import jupyter_runtime_dir

        return Path(jupyter_runtime_dir())
    except ImportError:  # a Python without Jupyter: the same place jupyter_core would pick on Linux
        base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        return Path(os.environ.get("JUPYTER_RUNTIME_DIR") or os.path.join(base, "jupyter", "runtime"))


def private_folder(path: str | os.PathLike) -> Path:
    """``path`` as a folder only this user can reach: made with mode 0700 when missing (missing parents with
    the default mode, as ``mkdir -p`` would), refused when it is a link, not a folder, or another user's.

    An own folder with a wider mode (a hand-made ``mkdir``, an old umask) is tightened to 0700 rather than
    refused: only its owner (or root) can change its mode, so the fix a refusal would ask for is this very chmod;
    and anything another user put in it while it was open is still refused file by file by ``open_private``
    (not a regular file of ours, or a hard link)."""
    path = Path(path)
    where = printable(path)
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # missing, or under a file: mkdir says why it cannot be made
        info = _make(path)
    except OSError as err:
        raise PrivateFolderError(f"{where} cannot be used: {_why(err)}") from None
    _check_folder(where, info)
    if stat.S_IMODE(info.st_mode) != FOLDER_MODE:
        _tighten(path, where, info)
    return path


def open_private(path: str | os.PathLike, flags: int, *, create: bool = False) -> int:
    """An open file descriptor on ``path``, a regular file this user owns with no other hard link: opened
    without following a link (O_NOFOLLOW), without waiting on a FIFO or a device (O_NONBLOCK; a FIFO or a
    device is refused before it is opened whenever it is there to be seen) and closed on exec; ``create``: made
    with mode 0600 when missing. Raises PrivateFileError for anything else (the descriptor closed) and OSError
    when it cannot be opened at all (FileNotFoundError when it is missing and not to be created)."""
    where = printable(path)
    flags |= os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    if create:
        flags |= os.O_CREAT
    try:  # refuse what is plainly no regular file before opening it: opening a device node can do things
        _check_file(where, os.lstat(path))
    except FileNotFoundError:
        if not create:
            raise
    try:
        fd = os.open(path, flags, FILE_MODE)
    except OSError as err:
        if err.errno == errno.ELOOP:  # O_NOFOLLOW met a symbolic link: one made after the look above
            raise PrivateFileError(f"{where} is a symbolic link, not a regular file of yours") from None
        raise
    try:
        _check_file(where, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _make(path: Path) -> os.stat_result:
    where = printable(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # made meanwhile (by another kernel, or user): checked next
            os.mkdir(path, FOLDER_MODE)
    except FileExistsError:  # one of the parents is a file
        raise PrivateFolderError(f"{where} cannot be created: {_why(OSError(errno.ENOTDIR, ''))}") from None
    except OSError as err:
        raise PrivateFolderError(f"{where} cannot be created: {_why(err)}") from None
    try:
        return os.lstat(path)
    except OSError as err:
        raise PrivateFolderError(f"{where} cannot be used: {_why(err)}") from None


def _check_folder(where: str, info: os.stat_result) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise PrivateFolderError(f"{where} is a symbolic link, not a folder of your own")
    if not stat.S_ISDIR(info.st_mode):
        raise PrivateFolderError(f"{where} is {_kind(info.st_mode)}, not a folder")
    if info.st_uid != os.geteuid():
        raise PrivateFolderError(f"{where} belongs to {_user(info.st_uid)}, not to you")


def _tighten(path: Path, where: str, seen: os.stat_result) -> None:
    """chmod 0700 through a descriptor of the very folder that was checked (not a link put there since)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        raise PrivateFolderError(f"{where} cannot be used: {_why(err)}") from None
    try:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != (seen.st_dev, seen.st_ino):
            raise PrivateFolderError(f"{where} was replaced while it was checked")
        _check_folder(where, info)
        os.fchmod(fd, FOLDER_MODE)
    except OSError as err:
        raise PrivateFolderError(f"{where} allows other users in (mode {stat.S_IMODE(seen.st_mode):o}) and cannot be "
                                 f"made private: {_why(err)}") from None
    finally:
        os.close(fd)


def _check_file(where: str, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise PrivateFileError(f"{where} is {_kind(info.st_mode)}, not a regular file of yours")
    if info.st_uid != os.geteuid():
        raise PrivateFileError(f"{where} belongs to {_user(info.st_uid)}, not to you")
    if info.st_nlink != 1:  # a hard link to a file of ours elsewhere: writing here would change that file
        raise PrivateFileError(f"{where} has {info.st_nlink} hard links (it is another name for a file elsewhere)")


_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISREG, "a regular file"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def _user(uid: int) -> str:
    try:
        import pwd

        return f"{printable(pwd.getpwuid(uid).pw_name)} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _why(err: OSError) -> str:
    return os.strerror(err.errno).lower() if err.errno else printable(err)


__all__ = ["FILE_MODE", "FOLDER_MODE", "PrivateFileError", "PrivateFolderError", "open_private", "private_folder",
           "runtime_folder"]
