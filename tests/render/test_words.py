"""One vocabulary (tfgpu_magic/core/words.py): every view names a setting's state, TensorFlow's state and a
missing value with its words: the text forms (`%tfgpu status` in a terminal, the CLI), the HTML forms (a
notebook's `%tfgpu status`), the live panel's HTML, and the data the sidebar gets (the comm's state message,
the server's answer, an apply's outcomes), from which it takes its words instead of keeping its own."""

from __future__ import annotations

import dataclasses
import html
import re

import gpu_fakes
import pytest

from tfgpu_magic.core import words
from tfgpu_magic.core.nvml import GpuProcess, NvmlSnapshot, Unavailable
from tfgpu_magic.core.runtime import Status, TFState
from tfgpu_magic.render import live_html
from tfgpu_magic.render.snapshot import take

# Other names the views once used for these states and for a missing value.
SYNONYMS = {"pending", "no gpu", "no_gpu", "no_device", "unchanged", "refused: runtime initialized"}


def plain(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


@pytest.fixture
def base(shell):
    return take(shell.tfgpu.controller, nvml=NvmlSnapshot(available=True, driver_version="550.54.15",
                                                           cuda_driver_version="12.4", gpus=()))


def panel_header(snap) -> str:
    """The panel's header, from the snapshot's data as the live model (core/live.py) passes it on."""
    data = snap.to_dict()
    return plain(live_html.header_html({"tensorflow": data["tensorflow"], "settings": data["settings"],
                                        "notes": data["notes"]}))


def panel_memory(snap) -> str:
    data = snap.to_dict()
    gpus = {"nvml": data["nvml"], "gpus": data["gpus"], "kernel_gpu_memory": data["kernel_gpu_memory"]}
    return plain(live_html.memory_html(gpus, {"devices": data["tensorflow"]["memory"],
                                              "state": data["tensorflow"]["state"]}))


@pytest.mark.parametrize("status", sorted(words.SETTING_STATES))
def test_every_view_names_a_setting_state_with_the_vocabulary(base, status):
    snap = dataclasses.replace(base, settings=({"setting": "cpus", "asked": "2", "status": status, "detail": ""},))
    said = words.setting_state(status)
    views = {"text": snap.to_text(), "html": plain(snap._repr_html_()),
             "panel": panel_header(snap)}
    for name, shown in views.items():
        flat = " ".join(shown.split())
        assert f"cpus 2 {said}" in flat, (name, flat)
        others = [re.escape(o) for o in SYNONYMS if o != said and o not in said]
        assert not re.search(rf"cpus 2 (?:{'|'.join(others)})\b", flat), (name, flat)
    # The magic's own line says it with the same words (the Status's value is the vocabulary's); "not asked" is
    # no outcome, only what a form shows for a setting nobody made.
    assert status == "not_asked" or Status[status.upper()].value == said


@pytest.mark.parametrize("state", sorted(words.TF_STATES))
def test_every_view_names_tensorflows_state_with_the_vocabulary(base, state):
    snap = dataclasses.replace(base, tf_state=TFState[state.upper()])
    said = words.tf_state(state)
    assert f"TensorFlow: {said}" in snap.to_text()
    assert f"TensorFlow: {said}." in plain(snap._repr_html_())
    assert f"TensorFlow: {said}." in panel_header(snap)


def test_every_view_names_a_missing_value_with_the_vocabulary(shell):
    denied = Unavailable("no_permission", "utilization: Insufficient Permissions")
    gpu = dataclasses.replace(gpu_fakes.gpu(0, "NVIDIA L4", 23034, 1000, [GpuProcess(77, None, "", "ann")]),
                              utilization_gpu_pct=denied, temperature_c=Unavailable("not_supported"))
    nvml = NvmlSnapshot(available=True, driver_version="550.54.15", cuda_driver_version="12.4", gpus=(gpu,))
    snap = take(shell.tfgpu.controller, nvml=nvml)
    text, page = snap.to_text(), plain(snap._repr_html_())
    panel = panel_memory(snap)
    for name, shown in {"text": text, "html": page, "panel": panel}.items():
        # NVML's words once, after the vocabulary's word; a reason without words gets the vocabulary's.
        assert re.search(r"n/a \((utilization: )?Insufficient Permissions\)", shown), (name, shown)
        assert shown.count("Insufficient Permissions") == 1 and shown.count("utilization") <= 2, (name, shown)
        assert not re.search(r"utilization:? utilization", shown), (name, shown)
        assert not re.search(r"(^|\s)\?(\s|$)|\bunknown\b", shown), (name, shown)
    for name, shown in {"html": page, "panel": panel}.items():  # the text form has no temperature column
        assert "n/a (not supported)" in shown, (name, shown)
    for name, shown in {"text": text, "html": page}.items():  # the panel lists no processes
        assert f"77 {words.NO_NAME} {words.MISSING}" in shown, (name, shown)


def test_a_lost_gpu_is_named_with_the_vocabulary(shell):
    lost = dataclasses.replace(gpu_fakes.gpu(1, "x", 1, 1), name=Unavailable("gpu_lost"),
                               error=Unavailable("gpu_lost", "GPU is lost"))
    nvml = NvmlSnapshot(available=True, driver_version="550.54.15", cuda_driver_version="12.4", gpus=(lost,))
    snap = take(shell.tfgpu.controller, nvml=nvml)
    panel = panel_memory(snap)
    for name, shown in {"text": snap.to_text(), "html": plain(snap._repr_html_()), "panel": panel}.items():
        assert "GPU is lost" in shown, (name, shown)
        assert not re.search(r"(^|\s)\?(\s|$)", shown), (name, shown)


def test_the_sidebar_gets_the_vocabulary_in_its_data():
    from tfgpu_magic.ipython.comm import state_message
    from tfgpu_magic.server.gpus import gpu_document

    vocabulary = words.to_dict()
    assert state_message({})["words"] == vocabulary
    assert gpu_document({"gpus": []}, [], user=None)["words"] == vocabulary
    outcomes = {k: v["words"] for k, v in vocabulary["setting_states"].items() if k != "not_asked"}
    assert outcomes == {s.name.lower(): s.value for s in Status}


def test_where_the_kernels_gpu_memory_was_read_is_said_in_words(shell):
    import os

    gpu = gpu_fakes.gpu(0, "NVIDIA L4", 23034, 2000, [GpuProcess(os.getpid(), 1024, "python", "me", is_self=True)])
    snap = take(shell.tfgpu.controller, nvml=NvmlSnapshot(available=True, driver_version="550.54.15",
                                                          cuda_driver_version="12.4", gpus=(gpu,)))
    for name, shown in {"text": snap.to_text(), "html": plain(snap._repr_html_())}.items():
        flat = " ".join(shown.split())
        assert f"1,024 MiB, from {words.memory_source('nvml_process')}" in flat, (name, flat)
        assert "nvml process" not in flat and "nvml_process" not in flat, (name, flat)
