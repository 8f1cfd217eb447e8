"""Requests of the server tests (tests/server), beside their fixtures in tests/server/conftest.py."""

from __future__ import annotations

import json
from pathlib import Path

from fakenvml import write_config


class FakeGpus:
    def __init__(self, path: Path):
        self.path = path

    def write(self, config: dict) -> None:
        write_config(self.path, config)


async def get_gpus(jp_fetch, **params) -> dict:
    response = await jp_fetch("tfgpu", "api", "gpus", params=params)
    assert response.code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    return json.loads(response.body)


async def start_notebook_session(jp_fetch, path: str) -> str:
    body = json.dumps({"path": path, "name": Path(path).name, "type": "notebook", "kernel": {"name": "python3"}})
    response = await jp_fetch("api", "sessions", method="POST", body=body)
    return json.loads(response.body)["kernel"]["id"]


async def get_metrics(jp_fetch, accept: str = "") -> tuple[str, str]:
    """(content type, text) of ``tfgpu/api/metrics``."""
    response = await jp_fetch("tfgpu", "api", "metrics", headers={"Accept": accept} if accept else {})
    assert response.code == 200
    return response.headers["Content-Type"], response.body.decode()
