"""The server answers each browser in its own language: ``GET tfgpu/api/gpus?language=zh-CN`` (the sidebar's, from
JupyterLab's translator) carries the vocabulary (``words``) and the answer's sentences (a kernel's activity, the notes
on what cannot be matched) in Chinese, while another browser's request without it, made at the same time from the
same shared answer, keeps the server's (English here)."""

from __future__ import annotations

import asyncio
import json

import pytest
from fakenvml import MIB, three_gpus
from serverapi import get_gpus, start_notebook_session

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


async def test_the_answers_sentences_are_said_again_in_the_browsers_language(jp_fetch, fake_gpus):
    # three_gpus(): GPU 0 lists pid 3999901, which no process here has.
    chinese, english = await asyncio.gather(get_gpus(jp_fetch, language="zh-CN"), get_gpus(jp_fetch))
    assert english["gpus"][0]["kernel_note"].startswith("1 process is not visible from this server (another PID")
    assert chinese["gpus"][0]["kernel_note"].startswith("1 个进程在此服务器上不可见（在另一个 PID 命名空间中")
    # The shared answer is untouched: a later English request reads English again.
    assert (await get_gpus(jp_fetch))["gpus"][0]["kernel_note"] == english["gpus"][0]["kernel_note"]
    assert (await get_gpus(jp_fetch, language="en"))["gpus"][0]["kernel_note"] == english["gpus"][0]["kernel_note"]


@pytest.mark.kernel
async def test_a_kernels_activity_is_in_the_browsers_language(jp_fetch, jp_serverapp, fake_gpus):
    kernel_id = await start_notebook_session(jp_fetch, "work/train.ipynb")
    pid = jp_serverapp.kernel_manager.get_kernel(kernel_id).provisioner.pid
    config = three_gpus()
    config["gpus"][1]["processes"] = [{"pid": pid, "used": 2048 * MIB}]
    fake_gpus.write(config)
    for _ in range(100):  # the server's execution clock knows the kernel once it has reported its state
        english = await get_gpus(jp_fetch)
        if english["kernels"] and english["kernels"][0]["activity"]["state"] == "idle":
            break
        await asyncio.sleep(0.1)
    chinese = await get_gpus(jp_fetch, language="zh-CN")
    said = {k["id"]: k["activity"]["text"] for k in english["kernels"]}
    assert said[kernel_id].startswith("idle ") and said[kernel_id].endswith(" · holds 2.0 GiB")
    text = {k["id"]: k["activity"]["text"] for k in chinese["kernels"]}[kernel_id]
    assert text.startswith("空闲 ") and text.endswith(" · 占用 2.0 GiB"), text


async def test_a_language_given_twice_is_one_line_400(jp_fetch, fake_gpus):
    import tornado.httpclient

    with pytest.raises(tornado.httpclient.HTTPClientError) as refused:
        await jp_fetch("tfgpu", "api", "gpus", params=[("language", "zh-CN"), ("language", "en")])
    assert refused.value.code == 400
    assert json.loads(refused.value.response.body)["message"] == (
        "tfgpu: language given more than once; give it once, e.g. ?language=zh-CN")
