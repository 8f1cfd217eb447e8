"""Which notebook a GPU process belongs to, as a running Jupyter server with tfgpu's extension knows it: for the
command line, which sees NVML's processes but not the kernels behind them.

jupyter_server writes a ``jpserver-<pid>.json`` (url, token, pid) into the user's runtime folder for every server it
runs; each live one is asked for its GPU document (``GET <url>tfgpu/api/gpus``), whose process rows name their kernel
and whose kernels name their notebook. A server that is gone, slow, without the extension or refusing the token is
skipped without a word: the program's name then stands, as nvidia-smi shows it.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import time
from dataclasses import dataclass, field

# The whole look-up, every server together: a shell command must not wait on a server that does not answer.
TIMEOUT_S = 0.5
API = "tfgpu/api/gpus"


@dataclass(frozen=True)
class Seen:
    server: str  # the URL of the server that answered (the first, when several did)
    by_pid: dict[int, str] = field(default_factory=dict)  # NVML's PID -> the notebook's path ("(child)" if a child)


def notebooks(pids: set[int], runtime_dir: str | None = None, timeout_s: float = TIMEOUT_S) -> Seen | None:
    """The notebooks of those of ``pids`` a running server attributes to its kernels; None when no server answered."""
    deadline = time.monotonic() + timeout_s
    found: Seen | None = None
    for info in _servers(runtime_dir):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        document = _ask(info, left)
        if document is None:
            continue
        named = {pid: path for pid, path in _attributed(document).items() if pid in pids}
        if found is None:
            found = Seen(str(info["url"]), named)
        else:
            found.by_pid.update({pid: path for pid, path in named.items() if pid not in found.by_pid})
    return found


def _servers(runtime_dir: str | None) -> list[dict]:
    """The servers of this user that still run, newest first."""
    if runtime_dir is None:
        try:
            from jupyter_core.paths import jupyter_runtime_dir
        except ImportError:  # no Jupyter installed: no server to ask
            return []
        runtime_dir = jupyter_runtime_dir()
    servers = []
    for path in glob.glob(os.path.join(runtime_dir, "jpserver-*.json")):
        try:
            with open(path, encoding="utf-8") as file:
                info = json.load(file)
            started = os.stat(path).st_mtime
        except (OSError, ValueError):
            continue
        if not isinstance(info, dict) or not isinstance(info.get("url"), str) or not _alive(info.get("pid")):
            continue
        if not info["url"].startswith(("http://", "https://")) or info.get("sock"):
            continue  # a server on a Unix socket: not reached by URL
        servers.append((started, info))
    return [info for _, info in sorted(servers, key=lambda pair: -pair[0])]


def _alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def _ask(info: dict, timeout_s: float) -> dict | None:
    import urllib.request

    url = info["url"].rstrip("/") + "/" + API
    headers = {"Authorization": f"token {info['token']}"} if info.get("token") else {}
    request = urllib.request.Request(url, headers=headers)
    with contextlib.suppress(Exception):  # any failure of any server is the same: no names from it
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # http(s) only: _servers checked
            document = json.loads(response.read())
        return document if isinstance(document, dict) else None
    return None


def _attributed(document: dict) -> dict[int, str]:
    """PID -> notebook path for each process row the document attributes to a kernel with a notebook session."""
    paths = {}
    for kernel in document.get("kernels") or ():
        if not isinstance(kernel, dict):
            continue
        sessions = [s for s in kernel.get("sessions") or () if isinstance(s, dict) and isinstance(s.get("path"), str)]
        notebook = next((s["path"] for s in sessions if s.get("type") == "notebook"), None)
        if notebook is None and sessions:
            notebook = sessions[0]["path"]  # a console or a file's kernel: its session's path
        if notebook:
            paths[kernel.get("id")] = notebook
    found: dict[int, str] = {}
    for gpu in document.get("gpus") or ():
        rows = [*(gpu.get("processes") or ()), *(p for m in gpu.get("mig_devices") or ()
                                                 for p in m.get("processes") or ())]
        for proc in rows:
            owner = proc.get("kernel") if isinstance(proc, dict) else None
            if not isinstance(owner, dict) or owner.get("id") not in paths or not isinstance(proc.get("pid"), int):
                continue
            path = paths[owner["id"]]
            found[proc["pid"]] = path if owner.get("relation") != "child" else f"{path} (child)"
    return found


__all__ = ["Seen", "notebooks"]
