"""The server's kernels as plain data: PID, state, last activity and the sessions (notebooks) attached to each."""

from __future__ import annotations

from typing import Any


def _kernel_pid(kernel: Any) -> int | None:
    pid = getattr(getattr(kernel, "provisioner", None), "pid", None)
    if pid is None:  # jupyter_client before provisioners: the Popen is the manager's `kernel`
        pid = getattr(getattr(kernel, "kernel", None), "pid", None)
    return pid if isinstance(pid, int) and not isinstance(pid, bool) else None


def _timestamp(value: Any) -> float | None:
    """A kernel's ``last_activity`` (an aware datetime) as Unix time."""
    try:
        return round(value.timestamp(), 3)
    except (AttributeError, TypeError, ValueError, OverflowError):
        return None


async def kernels_of(server_app: Any, log: Any) -> list[dict[str, Any]]:
    """Every kernel of the server with its PID and the sessions (notebooks, consoles) attached to it."""
    sessions: dict[str, list[dict[str, Any]]] = {}
    try:
        for session in await server_app.session_manager.list_sessions():
            kernel_id = (session.get("kernel") or {}).get("id")
            sessions.setdefault(kernel_id, []).append(
                {"path": session.get("path"), "name": session.get("name"), "type": session.get("type")})
    except Exception:  # the session database is a convenience here: kernels are still listed
        log.warning("tfgpu: could not list sessions; kernels are shown without their notebooks", exc_info=True)
    kernels = []
    manager = server_app.kernel_manager
    for kernel_id in list(manager.list_kernel_ids()):
        try:
            kernel = manager.get_kernel(kernel_id)
        except KeyError:  # shut down between the two calls
            continue
        kernels.append({
            "id": kernel_id,
            "name": getattr(kernel, "kernel_name", None),
            "pid": _kernel_pid(kernel),
            "execution_state": getattr(kernel, "execution_state", None),
            "last_activity": _timestamp(getattr(kernel, "last_activity", None)),
            "sessions": sessions.get(kernel_id, []),
        })
    return kernels
