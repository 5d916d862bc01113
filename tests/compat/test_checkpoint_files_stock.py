"""Issue 27: the stock ``determined==0.38.1`` SDK downloads a checkpoint through the master
(``Checkpoint.download(mode=DownloadMode.MASTER)``, and ``AUTO`` when the client cannot read the
storage): ``GET /checkpoints/{uuid}`` streams the stored files as an archive, on both backends.

A ``core_v2`` run stores a checkpoint (a nested directory, a 3 MB file, a symlink inside it);
the test then plants two symlinks that point out of the checkpoint (absolute, and ``../..``) at
a secret file beside the storage. The downloads must hold exactly the stored files and the
inside link, and nothing of the secret. Someone who may not see the experiment is refused, as
is a deleted checkpoint; a media type the master cannot serve is 415.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._master import ADMIN_PASSWORD, Client, MasterProcess, create_experiment
from tests.conftest import PG_DSN, PG_SKIP, fresh_pg_database

from .fixtures import _flows as f

pytestmark = pytest.mark.compat
PW = "Ckpt-Files-Passw0rd"
SECRET = "the secret beside the storage"
TERMINAL = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}

_STORE = r"""
import json, os, sys
from determined.experimental import core_v2
core_v2.init(config=core_v2.Config(name="files-run", checkpoint_storage=sys.argv[1],
                                   external_experiment_id=sys.argv[2], external_trial_id="t"))
core_v2.train.report_training_metrics(steps_completed=4, metrics={"loss": 0.25})
with core_v2.checkpoint.store_path({"steps_completed": 4}) as (path, uuid):
    (path / "weights.txt").write_text("w = 4\n")
    (path / "nested" / "deeper").mkdir(parents=True)
    (path / "nested" / "deeper" / "blob.bin").write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    (path / "nested" / "empty").mkdir()
    (path / "alias").symlink_to("weights.txt")
core_v2.close()
print("RESULT " + json.dumps({"uuid": str(uuid)}))
"""

_DOWNLOAD = r"""
import json, sys
from determined.common.experimental.checkpoint import DownloadMode
from determined.experimental import client
uuid, master_dir, auto_dir = sys.argv[1:4]
client.login()
client.get_checkpoint(uuid).download(master_dir, mode=DownloadMode.MASTER)
ckpt = client.get_checkpoint(uuid)
# A client that cannot see the shared file system: AUTO's direct copy fails, so it falls back to
# the master.
storage = ckpt.training.experiment_config["checkpoint_storage"]
storage.clear()
storage.update({"type": "shared_fs", "host_path": "/nonexistent/det-storage"})
ckpt.download(auto_dir, mode=DownloadMode.AUTO)
print("RESULT " + json.dumps({"ok": True}))
"""

_STRANGER = r"""
import json, pathlib, sys, tempfile
from determined.common import api
from determined.common.experimental.checkpoint import Checkpoint
from determined.experimental import client
uuid = sys.argv[1]
client.login()
out = {}
try:
    Checkpoint._download_via_master(client._get_singleton_session(), uuid, pathlib.Path(tempfile.mkdtemp()))
    out["error"] = None
except Exception as e:
    out["error"] = type(e).__name__
    out["args"] = [str(a) for a in e.args]
print("RESULT " + json.dumps(out))
"""


def _result(res) -> dict:
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    line = next(x for x in reversed(res.stdout.splitlines()) if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def _as(user: str, master: MasterProcess) -> dict[str, str]:
    return {"DET_MASTER": master.url, "DET_USER": user, "DET_PASS": PW}


def _tree(root: Path) -> dict[str, str]:
    """Every entry under ``root``, read independently of the master: a file's sha256, a
    symlink's text, ``dir`` for a directory (symlinks are never followed)."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _get(
    master: MasterProcess, token: str, path: str, accept: str | None
) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(master.url + path)
    req.add_header("Authorization", f"Bearer {token}")
    if accept is not None:
        req.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def files_master(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MasterProcess]:
    """One master per backend for the module's tests."""
    db_url = None
    if request.param == "postgres":
        if not PG_DSN:
            pytest.skip(PG_SKIP)
        db_url = fresh_pg_database()
    m = MasterProcess(tmp_path_factory.mktemp("files-master"), db_url=db_url).start()
    admin = m.admin()
    for name in ("alice", "stranger"):
        admin.post("/api/v1/users", {"user": {"username": name, "active": True}, "password": PW})
    yield m
    m.stop()


@pytest.fixture(scope="module")
def stored(det_env, files_master: MasterProcess, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """alice's stored checkpoint (its uuid and directory), with the two planted links."""
    base = tmp_path_factory.mktemp("storage")
    (base / "secret.txt").write_text(SECRET)
    storage = base / "checkpoints"
    res = det_env.run_python(
        _STORE, args=[str(storage), "files-1"], env_extra=_as("alice", files_master)
    )
    uuid = _result(res)["uuid"]
    directory = storage / uuid
    (directory / "leak-absolute").symlink_to(base / "secret.txt")
    (directory / "nested" / "leak-up").symlink_to("../../../secret.txt")
    return {"uuid": uuid, "dir": directory}


def test_the_stock_sdk_downloads_through_the_master(
    det_env, files_master: MasterProcess, stored: dict, tmp_path: Path
) -> None:
    uuid, directory = stored["uuid"], stored["dir"]
    on_disk = _tree(directory)
    # the independent answer: what is stored, less the two links that point out
    want = {k: v for k, v in on_disk.items() if "leak" not in k}
    assert len(want) == len(on_disk) - 2
    assert want["alias"] == "link:weights.txt" and want["nested/empty"] == "dir"
    assert "metadata.json" in want  # so the SDK writes none of its own into the download

    res = det_env.run_python(
        _DOWNLOAD,
        args=[uuid, str(tmp_path / "via-master"), str(tmp_path / "via-auto")],
        env_extra=_as("alice", files_master),
    )
    _result(res)
    for got in ("via-master", "via-auto"):
        assert _tree(tmp_path / got) == want, got
        text = "".join(
            p.read_text(errors="replace")
            for p in (tmp_path / got).rglob("*")
            if p.is_file() and not p.is_symlink()
        )
        assert SECRET not in text
    # The stored files are untouched.
    assert _tree(directory) == on_disk

    # The wire: no Accept is a plain tar; gzip is gzip; zip, which this master does not make,
    # is 415 naming what it serves; an unknown checkpoint is 404.
    token = files_master.login("alice", PW)
    status, headers, body = _get(files_master, token, f"/checkpoints/{uuid}", None)
    assert status == 200 and headers["Content-Type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as tf:
        names = {m.name: m for m in tf.getmembers()}
    assert set(names) == set(want)
    assert names["alias"].issym() and names["alias"].linkname == "weights.txt"
    status, headers, body = _get(files_master, token, f"/checkpoints/{uuid}", "application/gzip")
    assert (
        status == 200 and headers["Content-Type"] == "application/gzip" and body[:2] == b"\x1f\x8b"
    )
    status, _, body = _get(files_master, token, f"/checkpoints/{uuid}", "application/zip")
    assert status == 415 and "application/gzip" in json.loads(body)["message"]
    status, _, _ = _get(
        files_master, token, "/checkpoints/00000000-0000-0000-0000-000000000000", None
    )
    assert status == 404
    status, _, body = _get(files_master, token, "/checkpoints/not-a-uuid", None)
    assert status == 400 and "not-a-uuid" in json.loads(body)["message"]


_MASTER_ONLY = r"""
import json, sys
from determined.common.experimental.checkpoint import DownloadMode
from determined.experimental import client
client.login()
client.get_checkpoint(sys.argv[1]).download(sys.argv[2], mode=DownloadMode.MASTER)
print("RESULT " + json.dumps({"ok": True}))
"""


def test_a_managed_trials_checkpoint_downloads_from_its_experiments_storage(
    det_env, files_master: MasterProcess, tmp_path: Path
) -> None:
    """A trial's checkpoint carries no storage of its own: the experiment's (the master's
    default ``shared_fs``) is read."""
    admin = files_master.admin()
    config = f.steps_config(det_env.python, name="files-managed", length=5)
    exp_id = create_experiment(admin, config, f.STEPS_DIR)["experiment"]["id"]
    trial = f.only_trial(admin, exp_id)
    assert f.wait_state(admin, exp_id, TERMINAL, timeout=90) == "STATE_COMPLETED"
    uuid = f.checkpoints(admin, trial["id"])[0]["uuid"]
    want = _tree(f.ckpt_dir(files_master) / uuid)
    assert "state.json" in want
    env = {"DET_MASTER": files_master.url, "DET_USER": "admin", "DET_PASS": ADMIN_PASSWORD}
    _result(det_env.run_python(_MASTER_ONLY, args=[uuid, str(tmp_path / "got")], env_extra=env))
    got = _tree(tmp_path / "got")
    # The SDK adds metadata.json where the checkpoint has none of its own.
    assert {k: v for k, v in got.items() if k != "metadata.json" or k in want} == want


def test_strangers_and_deleted_checkpoints_are_refused(
    det_env, files_master: MasterProcess, stored: dict, tmp_path: Path
) -> None:
    uuid = stored["uuid"]
    alice = Client(files_master.url, files_master.login("alice", PW))
    exp_id = alice.get(f"/api/v1/checkpoints/{uuid}")["checkpoint"]["training"]["experimentId"]
    home = alice.get(f"/api/v1/experiments/{exp_id}")["experiment"]["projectId"]
    admin = files_master.admin()
    stranger_token = files_master.login("stranger", PW)
    # In the default workspace every user may read it: the refusal below is the move's doing.
    assert _get(files_master, stranger_token, f"/checkpoints/{uuid}", None)[0] == 200
    ws = admin.post("/api/v1/workspaces", {"name": "closed-files"})["workspace"]["id"]
    proj = admin.post(f"/api/v1/workspaces/{ws}/projects", {"name": "p"})["project"]["id"]
    admin.post(
        f"/api/v1/experiments/{exp_id}/move", {"destinationProjectId": proj, "experimentId": exp_id}
    )

    # Someone who may not see the experiment: the stock download's request is answered 404
    # (the stock session raises it as NotFoundException), as the checkpoint read is.
    res = det_env.run_python(_STRANGER, args=[uuid], env_extra=_as("stranger", files_master))
    out = _result(res)
    assert out == {"error": "NotFoundException", "args": [f"checkpoint {uuid} not found"]}, out
    assert _get(files_master, stranger_token, f"/checkpoints/{uuid}", None)[0] == 404
    admin.post(
        f"/api/v1/experiments/{exp_id}/move", {"destinationProjectId": home, "experimentId": exp_id}
    )

    # Deleted (a checkpoint of its own, so the module's stays): a clear 409 naming its state,
    # not an empty archive.
    res = det_env.run_python(
        _STORE, args=[str(tmp_path / "ck"), "files-2"], env_extra=_as("alice", files_master)
    )
    doomed = _result(res)["uuid"]
    admin.request("DELETE", "/api/v1/checkpoints", {"checkpointUuids": [doomed]})
    status, _, body = _get(
        files_master, files_master.login(), f"/checkpoints/{doomed}", "application/gzip"
    )
    assert status == 409 and "DELETED" in json.loads(body)["message"], body
