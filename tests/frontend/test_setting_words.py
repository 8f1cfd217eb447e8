"""The sidebar keeps no list of setting names: the kernel's comm state and the server's answer both carry the
registry's words (tfgpu_magic.core.settings.wire_words(), key ``setting_words``), and its node tests read the same
words from labextension/test/fixtures/setting_words.json."""

from __future__ import annotations

import json

from harness import ROOT

from tfgpu_magic.core.settings import wire_words
from tfgpu_magic.ipython.comm import state_message
from tfgpu_magic.server.feed import failure_document
from tfgpu_magic.server.gpus import gpu_document

SIDEBAR_KEYS = ("name", "per_gpu", "placeholder")  # what the sidebar reads of each; it ignores the others


def test_the_comm_state_and_every_server_answer_carry_the_registrys_words():
    words = wire_words()
    assert state_message({})["setting_words"] == words
    assert gpu_document({"gpus": []}, [], user=None)["setting_words"] == words
    assert failure_document("NVML failed", "shown")["setting_words"] == words  # the editor works without NVML too


def test_the_words_are_json_in_apply_order_each_with_what_the_sidebar_reads():
    words = json.loads(json.dumps(wire_words()))
    assert words and all(isinstance(w["name"], str) and isinstance(w["per_gpu"], bool)
                         and isinstance(w["placeholder"], str) for w in words)
    assert len({w["name"] for w in words}) == len(words)


def test_the_node_tests_fixture_is_the_registrys_words():
    fixture = json.loads((ROOT / "labextension" / "test" / "fixtures" / "setting_words.json").read_text())
    shown = [{k: w[k] for k in SIDEBAR_KEYS} for w in wire_words()]
    assert [{k: w[k] for k in SIDEBAR_KEYS} for w in fixture] == shown, \
        "regenerate labextension/test/fixtures/setting_words.json from wire_words()"
