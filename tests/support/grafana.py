"""Grafana dashboards as data: every PromQL expression a dashboard runs, with its variables filled in (so a test can
hand each one to a real Prometheus or to ``promtool``), and the structure Grafana's "Import dashboard" needs.

``from grafana import dashboard_queries, check_dashboard_structure`` (tests/support is on pytest's pythonpath)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

# Grafana's own variables that a Prometheus query may use, as a query over the last hour at a 1m step fills them.
BUILT_INS = {"__rate_interval": "1m", "__interval": "1m", "__range": "1h"}

# $name, ${name}, ${name:format} and the deprecated [[name]] / [[name:format]].
_VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)(?::[^\]]*)?\]\]")
_DATASOURCE_REFERENCE = re.compile(r"^\$\{(\w+)\}$|^\$(\w+)$")
# Grafana's Prometheus variable queries; only label_values(X, label) and query_result(X) run an expression.
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(.+),\s*\w+\s*\)\s*$", re.DOTALL)
_QUERY_RESULT = re.compile(r"^\s*query_result\(\s*(.+)\s*\)\s*$", re.DOTALL)
_NO_EXPRESSION = re.compile(r"^\s*(label_names\(.*\)|label_values\(\s*\w+\s*\)|metrics\(.*\))\s*$", re.DOTALL)


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside rows (a collapsed row keeps its panels in its own ``panels``) included."""
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])


def _fill(expression: str, values: dict[str, str], where: str) -> str:
    known = {**BUILT_INS, **values}

    def replace(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group is not None)
        if name not in known:
            raise ValueError(f"{where}: no value for the variable ${name} in {expression!r}; "
                             f"pass it in values (given: {sorted(values)})")
        return known[name]

    return _VARIABLE.sub(replace, expression)


def _variable_expression(variable: dict[str, Any]) -> str | None:
    query = variable.get("query")
    if isinstance(query, dict):  # Grafana 10+ saves {"query": "...", "refId": ..., "qryType": ...}
        query = query.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"variable {variable.get('name')!r}: a query variable without a query: {query!r}")
    for pattern in (_LABEL_VALUES, _QUERY_RESULT):
        match = pattern.match(query)
        if match:
            return match.group(1).strip()
    if _NO_EXPRESSION.match(query):
        return None
    raise ValueError(f"variable {variable.get('name')!r}: not a Prometheus variable query Grafana knows: {query!r}")


def dashboard_queries(dashboard: dict, values: dict[str, str]) -> list[tuple[str, str]]:
    """Every PromQL expression of ``dashboard`` as (where, expression): panel targets (rows' panels included), then
    the query variables' (the selector X of ``label_values(X, label)``). ``$var``, ``${var}``, ``${var:format}``
    and ``[[var]]`` are replaced by ``values``; Grafana's ``$__rate_interval`` and ``$__interval`` by "1m" and
    ``$__range`` by "1h" unless ``values`` gives them. Raises ValueError for a variable without a value."""
    found: list[tuple[str, str]] = []
    for panel in _panels(dashboard.get("panels") or []):
        for target in panel.get("targets") or []:
            expression = target.get("expr")
            if not expression:
                continue
            where = f"panel {panel.get('id')} {panel.get('title')!r} target {target.get('refId')}"
            found.append((where, _fill(expression, values, where)))
    for variable in (dashboard.get("templating") or {}).get("list") or []:
        if variable.get("type") != "query":
            continue
        expression = _variable_expression(variable)
        if expression is not None:
            where = f"variable {variable.get('name')}"
            found.append((where, _fill(expression, values, where)))
    return found


def _datasource_references(node: Any) -> Iterator[tuple[str, str]]:
    """(type, uid) of every ``"datasource": {...}`` in the dashboard, wherever it is nested."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource" and isinstance(value, dict):
                yield value.get("type", ""), value.get("uid", "")
            else:
                yield from _datasource_references(value)
    elif isinstance(node, list):
        for item in node:
            yield from _datasource_references(item)


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)
    elif isinstance(node, str):
        yield node


def check_dashboard_structure(dashboard: dict) -> None:
    """Assert what Grafana's "Import dashboard" needs of ``dashboard`` (an exported dashboard, ``__inputs`` and
    all): its identity, every panel's place and queries, the variables, and that every datasource it references
    is an import input or a datasource variable, and every import input is used."""
    for key in ("title", "uid"):
        assert isinstance(dashboard.get(key), str) and dashboard[key], f"dashboard {key}: {dashboard.get(key)!r}"
    assert len(dashboard["uid"]) <= 40, f"Grafana's uids are at most 40 characters: {dashboard['uid']!r}"
    assert type(dashboard.get("schemaVersion")) is int, f"schemaVersion: {dashboard.get('schemaVersion')!r}"

    variables = (dashboard.get("templating") or {}).get("list")
    assert isinstance(variables, list), "templating.list must be a list"
    names = set()
    for variable in variables:
        assert variable.get("name") and variable.get("type"), f"a variable without name or type: {variable}"
        assert variable["name"] not in names, f"variable {variable['name']} twice"
        names.add(variable["name"])
    datasource_variables = {v["name"]: v.get("query") for v in variables if v["type"] == "datasource"}

    inputs = {i.get("name"): i for i in dashboard.get("__inputs") or []}
    for name, item in inputs.items():
        assert name and item.get("type") == "datasource" and item.get("pluginId"), f"__inputs: {item}"
    required = {(r.get("type"), r.get("id")) for r in dashboard.get("__requires") or []}

    panels = dashboard.get("panels")
    assert isinstance(panels, list) and panels, "dashboard panels must be a non-empty list"
    ids: set[int] = set()
    for panel in _panels(panels):
        label = f"panel {panel.get('id')} {panel.get('title')!r}"
        assert type(panel.get("id")) is int, f"{label}: id must be an int"
        assert panel["id"] not in ids, f"{label}: id used twice"
        ids.add(panel["id"])
        assert isinstance(panel.get("type"), str) and panel["type"], f"{label}: type"
        assert isinstance(panel.get("title"), str) and panel["title"], f"{label}: title"
        grid = panel.get("gridPos")
        assert isinstance(grid, dict) and all(type(grid.get(k)) is int for k in "hwxy"), f"{label}: gridPos {grid}"
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24 and grid["h"] > 0, f"{label}: gridPos {grid}"
        if panel["type"] == "row":
            continue
        if required:
            assert ("panel", panel["type"]) in required, f"{label}: panel type {panel['type']} not in __requires"
        assert isinstance(panel.get("datasource"), dict), f"{label}: datasource"
        targets = panel.get("targets")
        assert isinstance(targets, list) and targets, f"{label}: no targets"
        refs = [t.get("refId") for t in targets]
        assert all(refs) and len(set(refs)) == len(refs), f"{label}: refIds {refs}"
        for target in targets:
            assert isinstance(target.get("expr"), str) and target["expr"].strip(), f"{label}: target {target}"

    used_inputs = set()
    for kind, uid in _datasource_references(dashboard):
        if kind != "prometheus":
            continue
        reference = _DATASOURCE_REFERENCE.match(uid or "")
        assert reference, f"a Prometheus datasource with a fixed uid {uid!r}: import could not point it elsewhere"
        name = reference.group(1) or reference.group(2)
        if name in datasource_variables:
            assert datasource_variables[name] == "prometheus", f"datasource variable {name} is not Prometheus's"
        else:
            assert name in inputs, f"datasource ${{{name}}} is neither an __inputs entry nor a datasource variable"
            used_inputs.add(name)
    # An input is also used where a datasource variable's default (current) names it.
    for text in _strings(dashboard.get("templating")):
        used_inputs.update(name for name in inputs if f"${{{name}}}" in text)
    unused = set(inputs) - used_inputs
    assert not unused, f"__inputs {sorted(unused)} are asked at import but never used"
    for item in inputs.values():
        assert not required or ("datasource", item["pluginId"]) in required, f"__requires lacks {item['pluginId']}"
