"""What an operator loads beside tfgpu's metrics: Prometheus recording and alerting rules (``tfgpu-rules.yml``)
and a Grafana dashboard (``tfgpu-dashboard.json``, for Grafana's "Import dashboard"), both shipped in the package.

``python -c "import tfgpu_magic.monitoring as m; print(m.rules_path(), m.dashboard_path())"`` says where they are.
Data files only: importing this imports nothing else.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def rules_path() -> Path:
    """The Prometheus rule file (``rule_files:`` in prometheus.yml): recording rules ``tfgpu:*`` and the alerts
    TfgpuGpuMemoryHeldIdle, TfgpuReadingStale and TfgpuNvmlUnavailable."""
    return _HERE / "tfgpu-rules.yml"


def dashboard_path() -> Path:
    """The Grafana dashboard "tfgpu: GPUs by user and notebook", as Grafana's "Import dashboard" takes it."""
    return _HERE / "tfgpu-dashboard.json"
