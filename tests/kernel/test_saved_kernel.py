"""Settings saved in a notebook's metadata, applied in a real kernel the way the sidebar does at kernel start (its
own compiled code, lib/), and the first cell it writes run with nbclient as nbconvert or papermill would (the rest
is tests/ipython/test_saved.py)."""

from __future__ import annotations

import json

import nbclient
import nbformat
import pytest
from harness import first_cell_by_the_sidebar, frontend_code, kernel_folder, user_env

# -- in a real kernel, as the sidebar does it ------------------------------------------------------------------


def silent_apply(client, document: dict) -> dict:
    """The sidebar's call at kernel start: silent, not in the history, the result through user_expressions."""
    code, expression = frontend_code(document)
    msg_id = client.execute(code, silent=True, store_history=False, user_expressions={"tfgpu": expression})
    reply = client.get_shell_msg(timeout=60)
    assert reply["parent_header"]["msg_id"] == msg_id
    return reply["content"]


@pytest.mark.tf
def test_silent_apply_at_kernel_start_runs_before_the_first_cell_and_leaves_no_trace():
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", env=user_env(), cwd=kernel_folder())
    try:
        reply = silent_apply(client, {"version": 1, "apply_on_start": True,
                                      "settings": {"cpus": "3", "placement": "on"}})
        assert reply["status"] == "ok", reply
        result = reply["user_expressions"]["tfgpu"]["data"]["application/json"]
        assert result["ok"] is True and result["outcomes"][0]["status"] == "pending", result
        out = []
        # A lesson's own first line: silent, the saved settings loaded the extension already.
        first = client.execute_interactive(
            "%load_ext tfgpu_magic\nimport tensorflow as tf\n"
            "print([d.name for d in tf.config.list_logical_devices('CPU')])",
            timeout=120, output_hook=lambda m: out.append(m["content"].get("text", "")) if m["msg_type"] == "stream"
            else None)
        assert first["content"]["status"] == "ok"
        assert first["content"]["execution_count"] == 1  # the silent call took no number and no history
        text = "".join(out)
        assert "'/device:CPU:2'" in text and "'/device:CPU:3'" not in text, text
        assert "cpus 3: applied (3 logical CPUs)" in text  # the import's cell says what became of them
        assert "already loaded" not in text, text
        # The frontend reconnecting (a page reload) sends the same document: the first result, nothing again.
        again = silent_apply(client, {"version": 1, "apply_on_start": True,
                                      "settings": {"cpus": "3", "placement": "on"}})
        assert again["user_expressions"]["tfgpu"]["data"]["application/json"] == result
        # Another document once the user has run cells is not applied: it would undo what they typed since.
        later = silent_apply(client, {"settings": {"cpus": "2"}})
        refused = later["user_expressions"]["tfgpu"]["data"]["application/json"]
        assert refused["ok"] is False and "has run cells already" in refused["message"], refused
        assert refused["reason"] == "ran_cells"  # not a refusal of the settings: the sidebar says it neutrally
        # From the lesson's `%load_ext` on, IPython's extension manager knows it: `%unload_ext` undoes it.
        out.clear()
        client.execute_interactive("%unload_ext tfgpu_magic\n%tfgpu", timeout=60, output_hook=lambda m: out.append(
            m["content"].get("text", "") or m["content"].get("evalue", "")) if m["msg_type"] in ("stream", "error")
            else None)
        assert "not loaded" not in "".join(out) and "Line magic function `%tfgpu` not found" in "".join(out), out
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


# -- the first cell, run elsewhere -------------------------------------------------------------------------------


DEVICES = "import tensorflow as tf\nprint(json.dumps([d.name for d in tf.config.list_logical_devices()]))"


def devices_by_first_cell(first_source: str) -> list[str]:
    """Run the written first cell and a device listing with nbclient, as nbconvert or papermill would."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(first_source), nbformat.v4.new_code_cell("import json\n" + DEVICES)]
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                                     resources={"metadata": {"path": kernel_folder()}})
    with client.setup_kernel(env=user_env(), cwd=kernel_folder()):
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("name") == "stdout")
    return json.loads(next(line for line in printed.splitlines() if line.startswith("[")))


def devices_by_silent_apply(document: dict) -> list[str]:
    """Apply as the sidebar does at kernel start, then list the devices in the first cell."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", env=user_env(), cwd=kernel_folder())
    try:
        assert silent_apply(client, document)["user_expressions"]["tfgpu"]["data"]["application/json"]["ok"]
        out = []
        client.execute_interactive("import json\n" + DEVICES, timeout=120, output_hook=lambda m: out.append(
            m["content"].get("text", "")) if m["msg_type"] == "stream" else None)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return json.loads(next(line for line in "".join(out).splitlines() if line.startswith("[")))


@pytest.mark.tf
def test_the_written_first_cell_gives_the_devices_that_applying_gives():
    document = {"version": 1, "apply_on_start": True, "settings": {"cpus": "3"}}
    by_cell = devices_by_first_cell(first_cell_by_the_sidebar(document))
    assert by_cell == devices_by_silent_apply(document) == ["/device:CPU:0", "/device:CPU:1", "/device:CPU:2"]


