"""A task's directory on the host: ``<work_dir>/tasks/<allocation_id>/{work,run/info}``."""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Mapping
from typing import Any

from tornado.httpclient import AsyncHTTPClient

#: How long a context download may take before the task fails (seconds).
CONTEXT_TIMEOUT = 300.0


class LaunchError(Exception):
    """The task could not be prepared; the message is shown to the user as a task log line."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclasses.dataclass(frozen=True)
class TaskDir:
    """Paths of one task's directory."""

    root: str

    @property
    def work(self) -> str:
        """The task's working directory, where the context is extracted."""
        return os.path.join(self.root, "work")

    @property
    def run(self) -> str:
        """Bind-mounted at /run/determined inside the task."""
        return os.path.join(self.root, "run")

    @property
    def info(self) -> str:
        """``run/info``: the info files the stock harness reads."""
        return os.path.join(self.run, "info")

    @property
    def home(self) -> str:
        """``run/home``: the task's HOME (caches, dotfiles), its own like the rest."""
        return os.path.join(self.run, "home")

    @property
    def stage(self) -> str:
        """``run/.stage``: where an isolated task's namespace parks paths while it covers their
        parents (see ``_isolation.mount_plan``); ``run/workdir`` is where ``work`` appears."""
        return os.path.join(self.run, ".stage")


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def snapshot_model_dir(task: TaskDir) -> None:
    """``run/train/model``: the context as extracted, before the task writes anything, which the
    stock harness copies into each checkpoint as ``code/`` (Determined's
    ``/run/determined/train/model``). Files are hard links where possible, so it costs little."""
    dest = os.path.join(task.run, "train", "model")
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(task.work, dest, symlinks=True, copy_function=_link_or_copy)


def make_task_dir(work_dir: str, allocation_id: str) -> TaskDir:
    """Create a fresh task directory (an old one of the same allocation is removed)."""
    if not allocation_id or "/" in allocation_id or allocation_id in (".", ".."):
        raise LaunchError(f"allocation id {allocation_id!r} cannot be used as a directory name")
    task = TaskDir(os.path.join(os.path.abspath(work_dir), "tasks", allocation_id))
    shutil.rmtree(task.root, ignore_errors=True)
    tasks = os.path.dirname(task.root)
    os.makedirs(tasks, mode=0o700, exist_ok=True)
    os.chmod(tasks, 0o700)  # no task lists, let alone enters, another task's directory
    os.makedirs(task.root, mode=0o700)
    for path in (task.work, task.info, task.home, task.stage, os.path.join(task.run, "workdir")):
        os.makedirs(path)
    return task


def hand_over(task: TaskDir, uid: int, gid: int) -> None:
    """Give the prepared task directory to the uid/gid the task runs as (the agent's files in
    it included: context, info files, model snapshot), private to it (0700)."""
    os.chmod(task.root, 0o700)
    if (uid, gid) == (os.geteuid(), os.getegid()):
        return
    for parent, dirs, files in os.walk(task.root):
        os.lchown(parent, uid, gid)
        for name in dirs + files:
            os.lchown(os.path.join(parent, name), uid, gid)


def write_info_files(task: TaskDir, info_files: Mapping[str, Any]) -> None:
    """Write each entry to ``run/info/<name>``: dicts/lists as JSON, strings as they are."""
    for name, content in info_files.items():
        if not name or os.path.basename(name) != name or name in (".", ".."):
            raise LaunchError(f"info file name {name!r} is not a plain file name")
        text = content if isinstance(content, str) else json.dumps(content)
        with open(os.path.join(task.info, name), "w", encoding="utf-8") as f:
            f.write(text)


def extract_context(b64_tgz: str, dest: str) -> None:
    """Decode a base64 tar.gz and extract it into ``dest``, refusing paths that escape it."""
    if not b64_tgz:
        return
    try:
        raw = base64.b64decode(b64_tgz, validate=True)
    except (binascii.Error, ValueError) as e:
        raise LaunchError(f"context download failed: b64Tgz is not base64 ({e})") from e
    try:
        _extract(raw, dest)
    except (tarfile.TarError, OSError) as e:
        raise LaunchError(f"context download failed: cannot extract the archive ({e})") from e


def _extract(raw_tgz: bytes, dest: str) -> None:
    with tarfile.open(fileobj=io.BytesIO(raw_tgz), mode="r:*") as tar:
        if hasattr(tarfile, "data_filter"):
            # Rejects absolute paths, "..", links out of dest and device files.
            tar.extractall(dest, filter="data")
        else:  # Python without PEP 706 filters
            _check_members(tar, dest)
            tar.extractall(dest)  # noqa: S202 - members checked above


def _check_members(tar: tarfile.TarFile, dest: str) -> None:
    root = os.path.realpath(dest)
    for member in tar.getmembers():
        target = os.path.realpath(os.path.join(root, member.name))
        if os.path.commonpath([root, target]) != root or not (member.isfile() or member.isdir()):
            raise tarfile.TarError(f"refusing archive member {member.name!r}")


class ContextCache:
    """Extracted contexts by digest (``sha256:<hex>`` from the spec), so that the tasks of one
    experiment download and extract its context once per agent. Each task gets a copy (a task
    may write into its working directory); the ``keep`` most recently used stay."""

    def __init__(self, root: str, keep: int = 8) -> None:
        self._root = root
        self._keep = keep

    def _path(self, digest: str) -> str | None:
        algo, _, hexdigest = digest.partition(":")
        if algo != "sha256" or len(hexdigest) != 64 or not all(c in "0123456789abcdef" for c in hexdigest):
            return None
        return os.path.join(self._root, hexdigest)

    def copy_to(self, digest: str, dest: str) -> bool:
        """Copy the cached context into ``dest``; False when it is not cached."""
        path = self._path(digest)
        if path is None or not os.path.isdir(path):
            return False
        os.utime(path)  # most recently used
        shutil.copytree(path, dest, dirs_exist_ok=True, symlinks=True)
        return True

    def add(self, digest: str, raw_tgz: bytes) -> bool:
        """Extract and keep a context whose archive matches ``digest``; False if it does not."""
        path = self._path(digest)
        if path is None or hashlib.sha256(raw_tgz).hexdigest() != os.path.basename(path):
            return False
        os.makedirs(self._root, exist_ok=True)
        tmp = tempfile.mkdtemp(dir=self._root, prefix=".partial-")
        try:
            _extract(raw_tgz, tmp)
        except (tarfile.TarError, OSError):
            shutil.rmtree(tmp, ignore_errors=True)
            return False  # extracting it into the task says what is wrong
        try:
            os.rename(tmp, path)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # another task of the experiment got there first
        self._prune()
        return os.path.isdir(path)

    def _prune(self) -> None:
        entries = [e for e in os.scandir(self._root) if e.is_dir() and not e.name.startswith(".")]
        entries.sort(key=lambda e: e.stat().st_mtime, reverse=True)
        for old in entries[self._keep:]:
            shutil.rmtree(old.path, ignore_errors=True)


async def fetch_context(spec: Mapping[str, Any], dest: str, cache: ContextCache | None = None) -> None:
    """Put the task's context into ``dest``: from ``cache`` when it holds the spec's
    ``context_digest``, else downloaded from ``spec["context_url"]`` (and cached).

    Raises LaunchError (with a message naming the URL and the cause) when it fails.
    """
    context_url = spec.get("context_url")
    if not context_url:
        return
    digest = str(spec.get("context_digest") or "")
    if cache is not None and digest and await asyncio.to_thread(cache.copy_to, digest, dest):
        return
    env = spec.get("env") or {}
    master = str(env.get("DET_MASTER") or "").rstrip("/")
    if not master:
        raise LaunchError("context download failed: spec.env has no DET_MASTER to download from")
    url = master + context_url
    headers = {"Grpc-Metadata-x-allocation-token": f"Bearer {env.get('DET_SESSION_TOKEN', '')}"}
    try:
        resp = await AsyncHTTPClient().fetch(
            url, headers=headers, request_timeout=CONTEXT_TIMEOUT, raise_error=False
        )
    except Exception as e:  # connection refused, DNS, TLS: all mean the same to the user
        raise LaunchError(f"context download failed: GET {url}: {e}") from e
    if resp.code != 200:
        body = (resp.body or b"")[:200].decode("utf-8", errors="replace")
        raise LaunchError(f"context download failed: GET {url} returned {resp.code}: {body}")
    try:
        payload = json.loads(resp.body)
        b64 = payload["b64Tgz"]
    except (ValueError, KeyError, TypeError) as e:
        raise LaunchError(f"context download failed: GET {url} did not return b64Tgz") from e
    # Decoding and extracting can take seconds for big contexts; keep the event loop free.
    await asyncio.to_thread(_place_context, b64 or "", dest, cache, digest)


def _place_context(b64_tgz: str, dest: str, cache: ContextCache | None, digest: str) -> None:
    if cache is not None and digest and b64_tgz:
        try:
            raw = base64.b64decode(b64_tgz, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if raw and cache.add(digest, raw) and cache.copy_to(digest, dest):
            return
    extract_context(b64_tgz, dest)
