"""A real Prometheus (Debian's ``prometheus``) on loopback for the tests: one static job scraping one server, or any
list of ``scrape_configs`` (HTTP service discovery, several jobs), and its HTTP API (queries, series, targets).
Skipped without the binary, failed instead with CI=true (``.ci/run`` installs it); ../../shared/SERVER_FACTS.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from labsession import free_port

PROMETHEUS = "/usr/bin/prometheus"


def require_binary(path: str, what: str) -> None:
    """Skip without Debian's ``prometheus`` package's ``path``; with CI=true fail instead (.ci/run installs it)."""
    import pytest

    if shutil.which(path):
        return
    reason = f"needs {what} at {path}: apt-get install prometheus"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true, so the {what} tests must run: {reason}", pytrace=False)
    pytest.skip(reason)


def require_prometheus() -> None:
    require_binary(PROMETHEUS, "Prometheus")


class Prometheus:
    """``prometheus`` with its own folder and port, started at once. Either one job named "jupyter" that scrapes
    ``127.0.0.1:target_port`` at ``metrics_path`` with ``token`` (sent as ``Authorization: token ...``), or the
    ``scrape_configs`` given, as Prometheus's YAML takes them (dicts; written as JSON, which is YAML too)."""

    def __init__(self, folder: Path, target_port: int | None = None, token: str | None = None,
                 metrics_path: str | None = None, *, scrape_configs: list[dict[str, Any]] | None = None,
                 scrape_interval: str = "1s"):
        if scrape_configs is None:
            scrape_configs = [{
                "job_name": "jupyter", "metrics_path": metrics_path,
                "authorization": {"type": "token", "credentials": token},  # sends "Authorization: token ..."
                "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}],
            }]
        self.port = free_port()
        self.folder = folder
        config = folder / "prometheus.yml"
        config.write_text(json.dumps({
            "global": {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval},
            "scrape_configs": scrape_configs,
        }))
        self.log = open(folder / "prometheus.log", "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"], stdout=self.log, stderr=subprocess.STDOUT)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def get(self, path: str, **params: str) -> dict:
        """The ``data`` of one successful answer of the HTTP API (``/api/v1/...``); an error answer fails."""
        url = f"{self.url}{path}?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                body = json.loads(answer.read())
        except urllib.error.HTTPError as error:  # a bad query: 400 with a JSON body that says why
            try:
                body = json.loads(error.read())
            except ValueError:  # not ready yet (503, plain text): an OSError, which wait_for waits out
                raise error from None
        assert body.get("status") == "success", (path, params, body)
        return body["data"]

    def query(self, expression: str) -> list[dict]:
        return self.get("/api/v1/query", query=expression)["result"]

    def series(self, match: str, seconds: float = 300) -> list[dict[str, str]]:
        """The label sets of every series ``match`` selects over the last ``seconds``."""
        now = time.time()
        return self.get("/api/v1/series", **{"match[]": match, "start": f"{now - seconds:.3f}", "end": f"{now:.3f}"})

    def active_targets(self) -> list[dict]:
        """``/api/v1/targets``' active targets: scrapePool, scrapeUrl, labels, discoveredLabels, health, lastError."""
        return self.get("/api/v1/targets", state="active")["activeTargets"]

    def wait_for(self, expression: str, ready, timeout: float = 60) -> list[dict]:
        deadline = time.monotonic() + timeout
        result: list[dict] | str = []
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.tail()
            try:
                result = self.query(expression)
                if ready(result):
                    return result
            except OSError as exc:  # not listening yet
                result = str(exc)
            time.sleep(0.5)
        raise AssertionError(f"{expression}: {result}\n{self.targets()}\n{self.tail()}")

    def targets(self) -> str:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=5) as answer:
                return answer.read().decode()[:4000]
        except OSError as exc:
            return str(exc)

    def tail(self) -> str:
        return (self.folder / "prometheus.log").read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def value(result: list[dict]) -> float:
    assert len(result) == 1, result
    return float(result[0]["value"][1])
