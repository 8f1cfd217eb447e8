"""The user's consent to a notebook's saved settings, kept where a received notebook cannot forge it.

The sidebar applies a notebook's saved settings (its ``tfgpu`` metadata) at kernel start only when this user agreed
to those settings for that notebook, or wrote them through the sidebar. A notebook's trust signature does not
count: the server signs any notebook without rich outputs at its first save, received or not. Nor does an answer
kept in the JupyterLab workspace: another workspace, or ``/lab?reset``, starts without it.

So the agreement is kept on the server, for the user, as nbformat keeps notebook signatures: an HMAC-SHA256, with a
secret of the user's (32 random bytes, mode 0600, in the Jupyter data folder), of the notebook's path and its
settings. Only digests are stored, in a file of the user's (0600, replaced atomically, the newest
``MAX_DIGESTS`` kept); a notebook cannot carry one, and without the secret nobody can make one.

A secret file that is not the user's own regular file, or that others may read or write (a symlink planted in its
place, a mode of 0644), is not used: it is replaced by a new secret, which forgets every agreement made before
(the sidebar then asks again; asking is the safe side). The digests file is held to the same rule and read as
empty when it fails it.

Pure: no tornado, no jupyter_server (the server's handler calls ``ConsentStore`` in a worker thread).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .private_files import PrivateFileError, open_private

SECRET_NAME = "tfgpu_consent_secret"
DIGESTS_NAME = "tfgpu_consent.json"
SECRET_BYTES = 32
MAX_DIGESTS = 5000  # about 330 KB of file; the oldest agreements go first
MAX_PATH_CHARS = 4096
MAX_SETTINGS_CHARS = 16384  # the canonical JSON of one notebook's settings
DIGESTS_VERSION = 1

log = logging.getLogger("tfgpu_magic.consent")


class ConsentError(ValueError):
    """A path or settings that cannot be agreed to: one ``tfgpu:`` line that says what is wrong."""


def data_dir() -> Path:
    """The user's Jupyter data folder, as jupyter_core finds it (JUPYTER_DATA_DIR first)."""
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir())


def canonical(path: Any, settings: Any) -> bytes:
    """What is signed: ``[path, settings]`` as JSON with sorted keys and no spaces, each setting a list of its
    values with the spaces around each trimmed (``{"cpus": " 2"}`` and ``{"cpus": ["2"]}`` are the same settings,
    as the kernel reads them). Raises ConsentError for anything else."""
    if not isinstance(path, str) or not path.strip():
        raise ConsentError("tfgpu: the notebook's path must be a non-empty string, e.g. \"work/train.ipynb\"")
    if len(path) > MAX_PATH_CHARS:
        raise ConsentError(f"tfgpu: the notebook's path is longer than {MAX_PATH_CHARS} characters")
    if not isinstance(settings, Mapping):
        raise ConsentError("tfgpu: settings must be an object of saved settings, e.g. {\"cpus\": \"2\"}")
    values: dict[str, list[str]] = {}
    for name, value in settings.items():
        items = [value] if isinstance(value, str) else value
        if not isinstance(name, str) or not isinstance(items, list) or not all(isinstance(v, str) for v in items):
            raise ConsentError(f"tfgpu: setting {json.dumps(name)[:60]} must be a string or a list of strings, "
                               "as in the notebook's tfgpu metadata")
        values[name] = [v.strip() for v in items]
    text = json.dumps([path, values], sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    if len(text) > MAX_SETTINGS_CHARS + MAX_PATH_CHARS:
        raise ConsentError(f"tfgpu: these settings are longer than {MAX_SETTINGS_CHARS} characters")
    return text.encode("ascii")


def _read_own(path: Path) -> bytes | None:
    """The file's bytes when it is the user's own regular file that nobody else may read or write (opened as
    private_files does: never through a link, never blocking on a FIFO); None when it is missing or not so."""
    try:
        fd = open_private(path, os.O_RDONLY)
    except (OSError, PrivateFileError):  # missing, a link, a FIFO, another user's
        return None
    with os.fdopen(fd, "rb") as f:
        if os.fstat(f.fileno()).st_mode & 0o077:
            return None
        return f.read()  # only this user can have written it


class ConsentStore:
    """The agreed digests of one user, in ``folder`` (the Jupyter data folder by default)."""

    def __init__(self, folder: str | os.PathLike[str] | None = None, *, limit: int = MAX_DIGESTS):
        self.folder = Path(folder) if folder is not None else data_dir()
        self.limit = max(1, limit)
        self._lock = threading.Lock()
        self._secret: bytes | None = None

    @property
    def secret_path(self) -> Path:
        return self.folder / SECRET_NAME

    @property
    def digests_path(self) -> Path:
        return self.folder / DIGESTS_NAME

    def digest(self, path: str, settings: Mapping[str, Any]) -> str:
        """HMAC-SHA256 of the canonical ``[path, settings]`` with the user's secret (made on first use)."""
        message = canonical(path, settings)
        with self._lock:
            secret = self._load_secret()
        return hmac.new(secret, message, hashlib.sha256).hexdigest()

    def agreed(self, path: str, settings: Mapping[str, Any]) -> bool:
        """Whether the user agreed to (or wrote) these settings for the notebook at ``path``."""
        digest = self.digest(path, settings)
        with self._lock:
            return any(hmac.compare_digest(digest, d) for d in self._read_digests())

    def agree(self, path: str, settings: Mapping[str, Any]) -> None:
        """Record that the user agrees to these settings for the notebook at ``path`` (the newest kept first)."""
        digest = self.digest(path, settings)
        with self._lock:
            kept = [d for d in self._read_digests() if d != digest]
            self._write_digests([*kept, digest][-self.limit:])

    # -- the files ----------------------------------------------------------------------------------------------

    def _load_secret(self) -> bytes:
        if self._secret is not None:
            return self._secret
        path = self.secret_path
        for _ in range(3):  # another server of the user may make it at the same moment
            secret = _read_own(path)
            if secret is not None and len(secret) >= SECRET_BYTES:
                self._secret = secret
                return secret
            if secret is not None or os.path.lexists(path):
                # Not the user's own private regular file (or cut short): someone else may know it. A new secret
                # forgets every agreement made with the old one; the digests go too.
                log.warning("tfgpu: %s is not a private file of this user (mode 0600, not a link): replacing it; "
                            "saved GPU settings agreed to before are asked about again", path)
                for stale in (path, self.digests_path):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(stale)
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                             0o600)
            except FileExistsError:
                continue
            secret = secrets.token_bytes(SECRET_BYTES)
            with os.fdopen(fd, "wb") as f:
                f.write(secret)
                f.flush()
                os.fsync(f.fileno())
            self._secret = secret
            return secret
        raise OSError(f"tfgpu: cannot make a private consent secret at {path}")

    def _read_digests(self) -> list[str]:
        raw = _read_own(self.digests_path)
        if raw is None:
            return []
        try:
            document = json.loads(raw)
        except ValueError:
            return []
        if not isinstance(document, dict) or document.get("version") != DIGESTS_VERSION:
            return []
        digests = document.get("digests")
        if not isinstance(digests, list):
            return []
        return [d for d in digests if isinstance(d, str) and len(d) == 64][-self.limit:]

    def _write_digests(self, digests: list[str]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, temp = tempfile.mkstemp(prefix=f".{DIGESTS_NAME}.", dir=self.folder)  # 0600, O_EXCL
        try:
            with os.fdopen(fd, "w", encoding="ascii") as f:
                json.dump({"version": DIGESTS_VERSION, "digests": digests}, f, separators=(",", ":"))
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, self.digests_path)  # a link in its place is replaced, never followed
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise
