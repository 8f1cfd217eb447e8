"""The user's consent to a notebook's saved settings, kept on the server (core/consent.py): through a real
jupyter_server (pytest-jupyter's ``jp_fetch``, its JUPYTER_DATA_DIR a temporary folder), and the store's files as a
received notebook or another user could try to plant them."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat

import pytest
import tornado.httpclient

from tfgpu_magic.core import consent
from tfgpu_magic.core.consent import ConsentStore

pytestmark = pytest.mark.server

SETTINGS = {"cpus": "2", "limit": ["2GB --gpu 0", "4GB --gpu 1"]}


async def ask(jp_fetch, body, **kwargs):
    answer = await jp_fetch("tfgpu", "api", "consent", method="POST", body=json.dumps(body), **kwargs)
    return json.loads(answer.body)


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# ---- through the server ---------------------------------------------------------------------------------------


async def test_agree_then_agreed_for_that_path_and_those_settings_only(jp_fetch, jp_data_dir):
    assert await ask(jp_fetch, {"path": "work/a.ipynb", "settings": SETTINGS}) == {"agreed": False}
    assert await ask(jp_fetch, {"path": "work/a.ipynb", "settings": SETTINGS, "agree": True}) == {"agreed": True}
    assert await ask(jp_fetch, {"path": "work/a.ipynb", "settings": SETTINGS, "agree": False}) == {"agreed": True}
    # The same settings as the kernel reads them: key order and the spaces around a value do not matter.
    same = {"limit": [" 2GB --gpu 0", "4GB --gpu 1 "], "cpus": ["2"]}
    assert await ask(jp_fetch, {"path": "work/a.ipynb", "settings": same}) == {"agreed": True}
    # Another notebook, or any change of the settings: not agreed.
    for path, settings in [
        ("work/b.ipynb", SETTINGS),
        ("a.ipynb", SETTINGS),
        ("work/a.ipynb", {**SETTINGS, "cpus": "3"}),
        ("work/a.ipynb", {"cpus": "2"}),
        ("work/a.ipynb", {**SETTINGS, "growth": "on"}),
        ("work/a.ipynb", {"cpumem": "2", "limit": SETTINGS["limit"]}),  # a value cannot pass for another setting
    ]:
        assert await ask(jp_fetch, {"path": path, "settings": settings}) == {"agreed": False}, (path, settings)
    # Kept for the user, in the Jupyter data folder, private: the digests only (no path, no setting in clear).
    secret = jp_data_dir / consent.SECRET_NAME
    digests = jp_data_dir / consent.DIGESTS_NAME
    assert mode(secret) == 0o600 and mode(digests) == 0o600
    assert len(secret.read_bytes()) == consent.SECRET_BYTES
    text = digests.read_text()
    assert "a.ipynb" not in text and "2GB" not in text
    assert len(json.loads(text)["digests"]) == 1


@pytest.mark.parametrize(("body", "message"), [
    (b"not json", "tfgpu: the request body must be a JSON object"),
    (b"[1, 2]", "tfgpu: the request body must be a JSON object"),
    (b"", "tfgpu: the request body must be a JSON object"),
    (json.dumps({"path": "a.ipynb", "settings": {}, "agree": "yes"}), "tfgpu: agree must be true or false"),
    (json.dumps({"path": "a.ipynb", "settings": {}, "agreed": True}), "tfgpu: unknown key 'agreed' in the request"),
    (json.dumps({"settings": {"cpus": "2"}}), "tfgpu: the notebook's path must be a non-empty string"),
    (json.dumps({"path": " ", "settings": {"cpus": "2"}}), "tfgpu: the notebook's path must be a non-empty string"),
    (json.dumps({"path": "a.ipynb"}), "tfgpu: settings must be an object of saved settings"),
    (json.dumps({"path": "a.ipynb", "settings": ["cpus 2"]}), "tfgpu: settings must be an object of saved settings"),
    (json.dumps({"path": "a.ipynb", "settings": {"cpus": 2}}), 'tfgpu: setting "cpus" must be a string or a list'),
    (json.dumps({"path": "a.ipynb", "settings": {"limit": ["2GB", None]}}), 'tfgpu: setting "limit" must be'),
    (json.dumps({"path": "a" * 5000, "settings": {}}), "tfgpu: the notebook's path is longer than 4096 characters"),
    (json.dumps({"path": "a.ipynb", "settings": {"cpus": "2" * 70000}}), "tfgpu: the request body is larger than"),
], ids=lambda v: v if isinstance(v, str) and v.startswith("tfgpu") else None)
async def test_a_bad_request_is_a_400_with_one_line_reason(jp_fetch, body, message):
    with pytest.raises(tornado.httpclient.HTTPClientError) as refused:
        await jp_fetch("tfgpu", "api", "consent", method="POST", body=body)
    assert refused.value.code == 400
    reason = json.loads(refused.value.response.body)["message"]
    assert reason.startswith(message), reason
    assert "\n" not in reason


async def test_an_unauthenticated_request_is_refused_and_records_nothing(jp_fetch, jp_data_dir):
    body = {"path": "a.ipynb", "settings": SETTINGS, "agree": True}
    for header in ("", "token not-the-token"):
        with pytest.raises(tornado.httpclient.HTTPClientError) as refused:
            await ask(jp_fetch, body, headers={"Authorization": header})
        assert refused.value.code in (401, 403)
    with pytest.raises(tornado.httpclient.HTTPClientError) as refused:
        await jp_fetch("tfgpu", "api", "consent", headers={"Authorization": ""})  # GET: no such verb either
    assert refused.value.code in (401, 403, 405)
    assert not (jp_data_dir / consent.DIGESTS_NAME).exists()
    assert await ask(jp_fetch, {"path": "a.ipynb", "settings": SETTINGS}) == {"agreed": False}


# ---- the store's files ----------------------------------------------------------------------------------------


def test_a_secret_planted_as_a_symlink_is_replaced_never_followed(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    known = tmp_path / "known-secret"
    known.write_bytes(b"k" * 32)
    known.chmod(0o600)
    (folder / consent.SECRET_NAME).symlink_to(known)
    store = ConsentStore(folder)
    store.agree("a.ipynb", SETTINGS)
    secret = folder / consent.SECRET_NAME
    assert not secret.is_symlink() and mode(secret) == 0o600
    assert secret.read_bytes() != b"k" * 32
    assert known.read_bytes() == b"k" * 32  # the link's target is untouched
    assert store.agreed("a.ipynb", SETTINGS)


def test_a_secret_others_may_read_is_replaced_and_what_it_agreed_is_forgotten(tmp_path):
    store = ConsentStore(tmp_path)
    store.agree("a.ipynb", SETTINGS)
    secret = tmp_path / consent.SECRET_NAME
    old = secret.read_bytes()
    secret.chmod(0o644)  # someone else may have read it: digests made with it prove nothing
    fresh = ConsentStore(tmp_path)
    assert not fresh.agreed("a.ipynb", SETTINGS)
    assert mode(secret) == 0o600 and secret.read_bytes() != old
    assert not (tmp_path / consent.DIGESTS_NAME).exists()
    # A digest made with the known secret, planted in the file, is no agreement under the new one.
    forged = hmac.new(old, consent.canonical("a.ipynb", SETTINGS), hashlib.sha256).hexdigest()
    (tmp_path / consent.DIGESTS_NAME).write_text(json.dumps({"version": 1, "digests": [forged]}))
    (tmp_path / consent.DIGESTS_NAME).chmod(0o600)
    assert not ConsentStore(tmp_path).agreed("a.ipynb", SETTINGS)


def test_a_digests_file_others_may_write_is_read_as_empty(tmp_path):
    store = ConsentStore(tmp_path)
    store.agree("a.ipynb", SETTINGS)
    digests = tmp_path / consent.DIGESTS_NAME
    digests.chmod(0o666)
    assert not ConsentStore(tmp_path).agreed("a.ipynb", SETTINGS)
    # A digests file planted as a link: not read; the next agreement replaces the link, its target untouched.
    target = tmp_path / "elsewhere.json"
    target.write_text(digests.read_text())
    target.chmod(0o600)
    planted = target.read_text()
    digests.unlink()
    digests.symlink_to(target)
    assert not ConsentStore(tmp_path).agreed("a.ipynb", SETTINGS)
    ConsentStore(tmp_path).agree("b.ipynb", SETTINGS)
    assert not digests.is_symlink() and mode(digests) == 0o600
    assert target.read_text() == planted
    assert ConsentStore(tmp_path).agreed("b.ipynb", SETTINGS)


def test_the_store_keeps_the_newest_agreements(tmp_path):
    store = ConsentStore(tmp_path, limit=3)
    for i in range(5):
        store.agree(f"n{i}.ipynb", SETTINGS)
    store.agree("n2.ipynb", SETTINGS)  # agreed again: the newest now
    store.agree("n5.ipynb", SETTINGS)
    assert [store.agreed(f"n{i}.ipynb", SETTINGS) for i in range(6)] == [False, False, True, False, True, True]
    assert len(json.loads((tmp_path / consent.DIGESTS_NAME).read_text())["digests"]) == 3
    assert not list(tmp_path.glob(f".{consent.DIGESTS_NAME}.*"))  # no temporary file left behind


def test_two_stores_share_one_secret(tmp_path):
    """Two servers of the user (two stores on one folder): what one records, the other reads."""
    ConsentStore(tmp_path).agree("a.ipynb", SETTINGS)
    assert ConsentStore(tmp_path).agreed("a.ipynb", SETTINGS)
