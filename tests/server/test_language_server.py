"""The server answers each browser in its own language: ``GET tfgpu/api/gpus?language=zh-CN`` (the sidebar's, from
JupyterLab's translator) carries the vocabulary (``words``) in Chinese, while another browser's request without it,
made at the same time from the same shared answer, keeps the server's (English here)."""

from __future__ import annotations

import asyncio
import json

import pytest
from serverapi import get_gpus

pytestmark = pytest.mark.server


@pytest.fixture(autouse=True)
def english_server(monkeypatch):
    for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")


async def test_each_request_gets_the_words_in_its_language(jp_fetch, fake_gpus):
    chinese, english, both = await asyncio.gather(
        get_gpus(jp_fetch, language="zh-CN"), get_gpus(jp_fetch), get_gpus(jp_fetch, language="zh-CN", index="1"))
    assert chinese["words"]["setting_states"]["refused"]["words"] == "已拒绝"
    assert chinese["words"]["missing"] == both["words"]["missing"] == "不可用"
    assert english["words"]["setting_states"]["refused"]["words"] == "refused" and english["words"]["missing"] == "n/a"
    assert [g["index"] for g in both["gpus"]] == [1]
    # Only the words change: the figures are the shared answer's.
    assert [g["name"] for g in chinese["gpus"]] == [g["name"] for g in english["gpus"]]
    assert (await get_gpus(jp_fetch, language="en"))["words"] == english["words"]
    assert (await get_gpus(jp_fetch, language="fr-FR"))["words"] == english["words"]  # no catalogue: English


async def test_a_language_given_twice_is_one_line_400(jp_fetch, fake_gpus):
    import tornado.httpclient

    with pytest.raises(tornado.httpclient.HTTPClientError) as refused:
        await jp_fetch("tfgpu", "api", "gpus", params=[("language", "zh-CN"), ("language", "en")])
    assert refused.value.code == 400
    assert json.loads(refused.value.response.body)["message"] == (
        "tfgpu: language given more than once; give it once, e.g. ?language=zh-CN")
