"""The claims folder is the user's own: another user's folder, a link, a FIFO, a lock file with a made-up
holder or a folder that cannot be made never writes a file of the user's, never blocks, never refuses a free
GPU and never puts a terminal escape in a message; `visible auto` chooses without claims and says so. A claim
released while a forked child lives is free for another kernel. (Run as root, as on CI: os.chown plays the
other user, uid 65534.)"""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from gpu_fakes import gpu
from message_sweep import one_answer

from tfgpu_magic.core.changes import parse_change
from tfgpu_magic.core.control import Controller
from tfgpu_magic.core.nvml import NvmlSnapshot
from tfgpu_magic.core.plan import PlanError
from tfgpu_magic.core.private_files import PrivateFileError, PrivateFolderError, open_private, private_folder
from tfgpu_magic.core.runtime import Probe, TFState
from tfgpu_magic.core.waiting import Claims, claims_by_index

OTHER = 65534  # nobody
FREEST = "GPU-00000000-fake"  # GPU 0's UUID in gpu_fakes
ESCAPES = "kernel \x1b[31mred\x1b]0;title\x07\nsecond line"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="plays another user with os.chown, which needs root")


def two_gpus() -> NvmlSnapshot:
    """GPU 0 has 39.0 GiB free, GPU 1 10.0 GiB."""
    return NvmlSnapshot(available=True, gpus=(gpu(0, "A", 40960, 1024), gpu(1, "A", 40960, 30720)))


def controller(claims: Claims, snap: NvmlSnapshot | None = None) -> Controller:
    snap = snap or two_gpus()
    ctl = Controller(environ={}, nvml_snapshot=lambda: snap, prober=lambda: Probe(TFState.NOT_IMPORTED),
                     hooks_import=False)
    ctl.claims = claims  # a kernel's controller has claims; this one never touches the import hook
    return ctl


def change(ctl: Controller, line: str):
    return ctl.change(parse_change(line))


def held_lock(path: Path, record: dict | bytes, owner: int | None = None) -> int:
    """A lock file held by "another live process": a separate open file of this one (flock is per open file)."""
    path.write_bytes(record if isinstance(record, bytes) else json.dumps(record).encode())
    if owner is not None:
        os.chown(path, owner, owner)
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def one_line(text: str) -> None:
    assert one_answer(text) and "\x1b" not in text and "\x07" not in text, repr(text)


def test_another_users_claims_folder_turns_claims_off_and_auto_still_chooses(tmp_path, monkeypatch):
    runtime = tmp_path / "runtime"  # JUPYTER_RUNTIME_DIR=/tmp, where another user made tfgpu-claims first
    folder = runtime / "tfgpu-claims"
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    lock = folder / f"{FREEST}.lock"  # their lock on the freest GPU, with a made-up holder, held as long as they like
    fd = held_lock(lock, {"pid": 4242, "holder": ESCAPES, "since": 0}, owner=OTHER)
    os.chown(folder, OTHER, OTHER)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    try:
        ctl = controller(Claims())
        outcome = change(ctl, "visible auto")
        assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "0"  # the free GPU, not the "claimed" one
        one_line(outcome.detail)
        assert outcome.detail.startswith("auto chose GPU 0;"), outcome
        assert f"; GPU claims are off: {folder} belongs to " in outcome.detail
        assert (f"(uid {OTHER}), not to you; set JUPYTER_RUNTIME_DIR to a folder of your own to turn them on; two "
                "kernels choosing at once may take the same GPU") in outcome.detail
        assert ctl.claims.held() == () and ctl.claims.others([FREEST]) == {}
        assert claims_by_index(ctl.claims, two_gpus()) == {}  # the views see no claim either
    finally:
        os.close(fd)
    info = os.lstat(folder)  # their folder is left as it was, and so is their file
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (OTHER, 0o777) and sorted(os.listdir(folder)) == [lock.name]
    assert json.loads(lock.read_text())["holder"] == ESCAPES


def plant_link(folder: Path, lock: Path, victim: Path) -> None:
    lock.symlink_to(victim)


def plant_hard_link(folder: Path, lock: Path, victim: Path) -> None:
    os.link(victim, lock)


def plant_others_file(folder: Path, lock: Path, victim: Path) -> None:
    lock.write_text("precious")
    os.chown(lock, OTHER, OTHER)


@pytest.mark.parametrize(("plant", "why"), [
    (plant_link, "is a symbolic link, not a regular file of yours"),
    (plant_hard_link, "has 2 hard links (it is another name for a file elsewhere)"),
    (plant_others_file, f"(uid {OTHER}), not to you"),
])
def test_a_planted_lock_file_is_never_written_and_the_gpu_is_used_unclaimed(tmp_path, plant, why):
    folder = tmp_path / "claims"
    folder.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    lock = folder / "GPU-aaa.lock"
    plant(folder, lock, victim)
    claims = Claims(folder, holder="me")
    assert claims.others(["GPU-aaa"]) == {}
    assert claims.claim("GPU-aaa") and claims.held() == ()  # used, not claimed: no other process holds it
    assert why in claims.why_off(["GPU-aaa"]) and str(lock) in claims.why_off(["GPU-aaa"])
    claims.release()
    assert victim.read_text() == "precious" and os.lstat(victim).st_uid == 0
    assert claims.claim("GPU-bbb") and claims.held() == ("GPU-bbb",)  # the other GPUs are claimed as ever
    assert claims.why_off(["GPU-bbb"]) is None
    claims.release()


FIFO = """
import sys
from pathlib import Path
from tfgpu_magic.core.waiting import Claims
claims = Claims(Path(sys.argv[1]), holder="me")
print(claims.others(["GPU-aaa"]), claims.claim("GPU-aaa"), claims.held(), flush=True)
print(claims.why_off(["GPU-aaa"]), flush=True)
"""


def test_a_fifo_named_like_a_lock_never_blocks(tmp_path):
    folder = tmp_path / "claims"
    folder.mkdir(mode=0o700)
    os.mkfifo(folder / "GPU-aaa.lock", 0o600)
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(FIFO), str(folder)], capture_output=True,
                              text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("a FIFO named like a lock file blocked the claims")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["{} True ()", f"{folder}/GPU-aaa.lock is a FIFO, not a regular file of yours"]
    assert time.monotonic() - started < 15 and stat.S_ISFIFO(os.lstat(folder / "GPU-aaa.lock").st_mode)


def test_holder_text_from_a_lock_file_is_escaped_in_every_message(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    snap = NvmlSnapshot(available=True, gpus=(gpu(0, "A", 40960, 1024),))
    ctl = controller(Claims(), snap)
    folder = ctl.claims.folder
    folder.mkdir(parents=True, mode=0o700)
    fd = held_lock(folder / f"{FREEST}.lock", {"pid": 4242, "holder": ESCAPES, "since": 0})
    quoted = "claimed by 'kernel \\x1b[31mred\\x1b]0;title\\x07\\nsecond line' (pid 4242), waiting for it to allocate"
    try:
        with pytest.raises(PlanError) as now:
            change(ctl, "visible auto")
        lines: list[str] = []
        ctl.on_progress = lines.append
        with pytest.raises(PlanError) as waited:
            change(ctl, "visible auto --wait 1s")
        claim = claims_by_index(ctl.claims, snap)[0]
    finally:
        os.close(fd)
    messages = [str(now.value), str(waited.value), *lines, claim.describe()]
    for message in messages:
        one_line(message)
        assert quoted in message, message
    assert claim.holder == ESCAPES and claim.pid == 4242  # kept as read; escaped where it is shown


@pytest.mark.parametrize(("record", "said"), [
    ({"pid": -5, "holder": "kernel 4f2c8a1e", "since": 0}, "claimed by another process, waiting"),
    ({"pid": True, "holder": "kernel 4f2c8a1e", "since": 0}, "claimed by another process, waiting"),
    ({"pid": 4242, "holder": "k" * 100, "since": 0}, "claimed by pid 4242, waiting"),
    ({"pid": 4242, "holder": ["a list"], "since": 0}, "claimed by pid 4242, waiting"),
    (b'{"pid": 4242, "holder": "' + b"k" * 2000 + b'"}', "claimed by another process, waiting"),
    (b"\xff\xfe not json", "claimed by another process, waiting"),
    (b"[" * 1000, "claimed by another process, waiting"),
])
def test_a_lock_files_record_is_bounded_and_checked(tmp_path, record, said):
    folder = tmp_path / "claims"
    folder.mkdir(mode=0o700)
    fd = held_lock(folder / "GPU-aaa.lock", record)
    try:
        claims = Claims(folder, holder="me")
        (claim,) = claims.others(["GPU-aaa"]).values()
        assert not claims.claim("GPU-aaa")  # held all the same: the lock is the claim, the record only names it
    finally:
        os.close(fd)
    assert claim.describe().startswith(said), claim


def test_a_runtime_folder_that_cannot_be_made_turns_claims_off_and_auto_never_waits(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")  # mkdir under a regular file fails for root too (ENOTDIR)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "a-file" / "runtime"))
    outcome = change(controller(Claims()), "visible auto")
    one_line(outcome.detail)
    assert outcome.detail.startswith("auto chose GPU 0;"), outcome
    assert (f"; GPU claims are off: {tmp_path}/a-file/runtime/tfgpu-claims cannot be created: not a directory; set "
            "JUPYTER_RUNTIME_DIR to a folder of your own to turn them on; two kernels choosing") in outcome.detail
    ctl = controller(Claims())
    started = time.monotonic()
    outcome = change(ctl, "visible auto --min-free 20GB --wait 10s")
    assert time.monotonic() - started < 5, "waited for a free GPU that claims could not take"
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "0" and "GPU claims are off" in outcome.detail
    outcome = change(ctl, "visible 1 --min-free 5GB")  # a choice of named GPUs by free memory claims too
    assert ctl.environ["CUDA_VISIBLE_DEVICES"] == "1" and "GPU claims are off" in outcome.detail


CLAIM = """
import sys
from pathlib import Path
from tfgpu_magic.core.waiting import Claims
print(Claims(Path(sys.argv[1]), holder="kernel 2nd").claim("GPU-aaa"), flush=True)
"""


def test_a_released_claim_is_free_while_a_forked_child_lives(tmp_path):
    folder = tmp_path / "claims"
    claims = Claims(folder, holder="kernel 1st")
    assert claims.claim("GPU-aaa")
    with multiprocessing.get_context("fork").Pool(1) as pool:  # started after the claim: it shares the lock file
        assert pool.apply(os.getpid) != os.getpid()
        claims.release()
        other = subprocess.run([sys.executable, "-c", textwrap.dedent(CLAIM), str(folder)], capture_output=True,
                               text=True, timeout=60)
        assert other.stdout.strip() == "True", (other.stdout, other.stderr)
        assert pool.apply(os.getpid) > 0  # the child still lives


def test_a_forked_child_that_releases_leaves_the_parents_claim(tmp_path):
    folder = tmp_path / "claims"
    claims = Claims(folder, holder="kernel 1st")
    assert claims.claim("GPU-aaa")
    pid = os.fork()
    if pid == 0:  # the child: its copy of the claims lets go of its copy of the descriptor only
        try:
            claims.release()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    other = subprocess.run([sys.executable, "-c", textwrap.dedent(CLAIM), str(folder)], capture_output=True,
                           text=True, timeout=60)
    assert other.stdout.strip() == "False", (other.stdout, other.stderr)
    claims.release()


# -- private_files -------------------------------------------------------------------------------------------
def test_a_private_folder_is_made_0700_and_an_own_wider_one_is_tightened(tmp_path):
    made = private_folder(tmp_path / "a" / "b")
    assert stat.S_IMODE(os.lstat(made).st_mode) == 0o700
    wide = tmp_path / "wide"
    wide.mkdir(mode=0o777)
    wide.chmod(0o777)
    private_folder(wide)
    assert stat.S_IMODE(os.lstat(wide).st_mode) == 0o700


def other_users(path: Path) -> None:
    path.mkdir(mode=0o700)
    os.chown(path, OTHER, OTHER)


def a_link(path: Path) -> None:
    (path.parent / "mine").mkdir(mode=0o700)
    path.symlink_to(path.parent / "mine")


@pytest.mark.parametrize(("make", "said"), [
    (other_users, f"(uid {OTHER}), not to you"),
    (a_link, "is a symbolic link, not a folder of your own"),
    (lambda path: path.write_text(""), "is a regular file, not a folder"),
    (lambda path: os.mkfifo(path), "is a FIFO, not a folder"),
    (lambda path: path.parent.write_text(""), "cannot be created: not a directory"),
])
def test_a_folder_that_is_not_the_users_own_is_refused_in_one_line(tmp_path, make, said):
    path = tmp_path / "x" / "claims" if said.startswith("cannot") else tmp_path / "claims"
    make(path)
    with pytest.raises(PrivateFolderError) as err:
        private_folder(path)
    message = str(err.value)
    assert message.startswith(str(path)) and said in message and "\n" not in message


def test_open_private_creates_0600_and_refuses_what_is_no_regular_file_of_ours(tmp_path):
    fd = open_private(tmp_path / "mine", os.O_RDWR, create=True)
    assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o600 and fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    os.close(fd)
    with pytest.raises(FileNotFoundError):
        open_private(tmp_path / "missing", os.O_RDONLY)
    (tmp_path / "link").symlink_to(tmp_path / "mine")
    os.mkfifo(tmp_path / "fifo")
    for name, said in [("link", "a symbolic link"), ("fifo", "a FIFO"), ("", "a folder")]:
        with pytest.raises(PrivateFileError, match=f"is {said}, not a regular file of yours"):
            open_private(tmp_path / name, os.O_RDONLY)
