"""A real JupyterHub on loopback for the tests: PyPI's ``jupyterhub``, ``configurable-http-proxy`` from npm (the
Makefile installs it into the venv), the dummy authenticator and the simple local spawner (every user's server is
this OS user's process, as on many small Hubs), each user's single-user server the venv's
``jupyterhub-singleuser`` with tfgpu_magic as installed and the fake NVML library (../../shared/SERVER_FACTS.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from labsession import _NOT_A_USERS_ENV, free_port, write_settings

CHP = Path(sys.prefix) / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"


def hub_available() -> str | None:
    """Why a Hub test cannot run here, or None when it can."""
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        return "needs jupyterhub: pip install -e '.[test]'"
    if not CHP.exists():
        return f"needs configurable-http-proxy at {CHP}: make setup (npm install)"
    return None


def require_hub() -> None:
    import pytest

    reason = hub_available()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true, so the JupyterHub tests must run: {reason}", pytrace=False)
    pytest.skip(reason)


CONFIG = """
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.ConfigurableHTTPProxy.auth_token = {proxy_token!r}
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {home!r} + "/{{username}}"
c.Spawner.cmd = [{singleuser!r}]
c.Spawner.args = {args!r}
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
c.Spawner.environment = {environment!r}
c.JupyterHub.db_url = "sqlite:///{folder}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{folder}/jupyterhub_cookie_secret"
c.JupyterHub.pid_file = "{folder}/jupyterhub.pid"
c.JupyterHub.last_activity_interval = {activity_interval}
c.JupyterHub.services = [{{"name": "tester", "api_token": {token!r}}}, *{services!r}]
c.JupyterHub.load_roles = [{{"name": "tester-admin", "services": ["tester"], "scopes": [
    "admin:users", "admin:servers", "tokens", "access:servers", "list:users", "read:users"]}}, *{roles!r}]
{config}
"""


def _http(method: str, url: str, token: str | None, body: dict | None = None) -> tuple[int, bytes]:
    """(status, body) of one request, with ``Authorization: token ...`` when given and ``body`` as JSON."""
    headers = {"Authorization": f"token {token}"} if token else {}
    request = urllib.request.Request(url, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


class Hub:
    """``jupyterhub`` with its own folder, ports and service token; users' servers started through its REST API.

    ``services`` and ``roles`` (``c.JupyterHub.services`` and ``load_roles`` entries) come after the tester's own;
    ``config`` is more lines of ``jupyterhub_config.py``. The proxy's REST API is at ``proxy_api_url`` with
    ``proxy_token`` (the Hub's CONFIGPROXY_AUTH_TOKEN)."""

    def __init__(self, environment: dict[str, str], *, args: list[str] | None = None, activity_interval: int = 300,
                 services: list[dict] | None = None, roles: list[dict] | None = None, config: str = ""):
        self.environment = dict(environment)
        self.args = list(args or [])
        self.activity_interval = activity_interval
        self.services = list(services or [])
        self.roles = list(roles or [])
        self.config = config
        self.token = secrets.token_hex(16)
        self.proxy_token = secrets.token_hex(16)
        self.folder: Path | None = None
        self.port = 0
        self.hub_port = 0
        self.proxy_api_port = 0
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        """The Hub's own REST API, not through the proxy (what a managed service gets as JUPYTERHUB_API_URL)."""
        return f"http://127.0.0.1:{self.hub_port}/hub/api"

    @property
    def proxy_api_url(self) -> str:
        return f"http://127.0.0.1:{self.proxy_api_port}"

    def __enter__(self) -> Hub:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="tfgpu-hub-"))
        (self.folder / "home").mkdir()
        settings = self.folder / "settings"
        settings.mkdir()
        write_settings(settings)
        self.port = free_port()
        self.hub_port = free_port()
        self.proxy_api_port = free_port()
        singleuser = str(Path(sys.executable).parent / "jupyterhub-singleuser")
        args = [*self.args]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--allow-root")
        # The single-user servers get only what a Hub gives them plus these (Spawner.environment): the fake NVML,
        # and their own settings folder so no ~/.jupyter is read.
        environment = {**self.environment, "JUPYTERLAB_SETTINGS_DIR": str(settings)}
        (self.folder / "jupyterhub_config.py").write_text(CONFIG.format(
            port=self.port, hub_port=self.hub_port, proxy_api_port=self.proxy_api_port, chp=str(CHP),
            proxy_token=self.proxy_token, services=self.services, roles=self.roles, config=self.config,
            home=str(self.folder / "home"), singleuser=singleuser, args=args, environment=environment,
            folder=self.folder, token=self.token, activity_interval=self.activity_interval))
        env = {k: v for k, v in os.environ.items() if k not in _NOT_A_USERS_ENV}
        env.pop("PYTHONPATH", None)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        with open(self.folder / "hub.log", "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "jupyterhub", "-f", str(self.folder / "jupyterhub_config.py")],
                cwd=self.folder, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            self._wait(lambda: self.api("GET", "/hub/api/") is not None, 60, "the Hub did not answer")
        except BaseException:
            self.stop()
            raise

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyterhub exited ({self.process.returncode}):\n{self.log_tail()}")
            with contextlib.suppress(OSError, urllib.error.HTTPError):
                if ready():
                    return
            time.sleep(0.3)
        raise RuntimeError(f"{what} within {timeout:.0f} s:\n{self.log_tail()}")

    def request(self, method: str, path: str, token: str | None, body: dict | None = None) -> tuple[int, bytes]:
        """(status, body) of one request through the proxy, with ``Authorization: token ...`` when given."""
        return _http(method, f"{self.url}{path}", token, body)

    def api(self, method: str, path: str, body: dict | None = None):
        """The Hub's REST API with the service token; the JSON answer (HTTPError for an error status)."""
        status, data = self.request(method, path, self.token, body)
        if status >= 400:
            raise urllib.error.HTTPError(path, status, data.decode(errors="replace")[:500], None, None)  # type: ignore[arg-type]
        return json.loads(data or b"null")

    def start_server(self, user: str, timeout: float = 120) -> None:
        self.start_servers(user, timeout=timeout)

    def start_servers(self, *users: str, timeout: float = 120) -> None:
        """Start each user's server at once (the Hub spawns them side by side), and wait for every one."""
        for user in users:
            if not self._exists(user):
                self.api("POST", "/hub/api/users", {"usernames": [user]})
            self.api("POST", f"/hub/api/users/{user}/server")
        for user in users:
            self._wait(lambda user=user: self.api("GET", f"/hub/api/users/{user}")["servers"].get("", {}).get("ready"),
                       timeout, f"{user}'s server was not ready")

    def start_kernel(self, user: str, notebook: str, token: str) -> tuple[str, int]:
        """(kernel id, pid) of a new notebook session on ``user``'s server, as the user's page starts one (``token``:
        the user's), once the server's GPU answer lists the kernel with its PID."""
        status, body = self.request("POST", f"/user/{user}/api/sessions", token, {
            "path": notebook, "name": notebook, "type": "notebook", "kernel": {"name": "python3"}})
        assert status == 201, body
        kernel_id = json.loads(body)["kernel"]["id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            doc = json.loads(self.request("GET", f"/user/{user}/tfgpu/api/gpus", token)[1])
            pid = next((k["pid"] for k in doc["kernels"] if k["id"] == kernel_id), None)
            if pid:
                return kernel_id, pid
            time.sleep(0.3)
        raise AssertionError(f"no PID for {user}'s kernel {kernel_id}")

    def stop_server(self, user: str, timeout: float = 60) -> None:
        self.api("DELETE", f"/hub/api/users/{user}/server")
        self._wait(lambda: not self.api("GET", f"/hub/api/users/{user}")["servers"], timeout,
                   f"{user}'s server did not stop")

    def _exists(self, user: str) -> bool:
        try:
            self.api("GET", f"/hub/api/users/{user}")
            return True
        except urllib.error.HTTPError:
            return False

    def user_token(self, user: str) -> str:
        """An API token of ``user`` (what a user makes on the Hub's token page, or a scraper is given)."""
        return self.api("POST", f"/hub/api/users/{user}/tokens", {"expires_in": 3600, "note": "tfgpu test"})["token"]

    def server_activity(self, user: str) -> str | None:
        """The Hub's ``last_activity`` of the user's server (what jupyterhub-idle-culler reads)."""
        return self.api("GET", f"/hub/api/users/{user}")["servers"].get("", {}).get("last_activity")

    def proxy_api(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        """(status, body) of configurable-http-proxy's REST API (``/api/routes...``) with the proxy's token."""
        return _http(method, f"{self.proxy_api_url}{path}", self.proxy_token, body)

    def proxy_routes(self) -> dict[str, dict]:
        """The proxy's routing table as configurable-http-proxy keeps it: ``{"/user/alice": {"target": ...,
        "user": "alice", "server_name": "", "jupyterhub": true, "last_activity": ...}, ...}``."""
        status, body = self.proxy_api("GET", "/api/routes")
        assert status == 200, (status, body)
        return json.loads(body)

    def log_tail(self, chars: int = 4000) -> str:
        with contextlib.suppress(OSError, TypeError):
            return (self.folder / "hub.log").read_text(errors="replace")[-chars:]
        return "(no Hub log)"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            # The Hub stops the users' servers it spawned (cleanup_servers) and its proxy.
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
