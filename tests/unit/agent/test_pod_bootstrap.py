"""The in-pod bootstrap (``python3 -m det_agent.pod SPEC_JSON``), run for real as a subprocess
with its run_dir in tmp_path, plus its spec parser and exit-code table."""

from __future__ import annotations

import base64
import io
import json
import os
import pathlib
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from det_agent.pod import parse_pod_spec
from det_agent.runtime._launch import harness_dir
from det_agent.runtime._pod import exec_exit_code

ROOT = pathlib.Path(__file__).resolve().parents[3]
TOKEN = "tok-1"


def _spec(entrypoint: Any, **extra: Any) -> dict[str, Any]:
    spec = {
        "task_id": "7.abc", "allocation_id": "7.abc.1", "task_type": "COMMAND",
        "entrypoint": entrypoint, "env": {"DET_TASK_ID": "7.abc", "DET_ALLOCATION_ID": "7.abc.1"},
        "slot_ids": [0], "info_files": {"rendezvous.json": {"rank": 0}, "note": "hello"},
    }
    spec.update(extra)
    return spec


def _bootstrap(tmp_path: pathlib.Path, spec: dict[str, Any], *,
               extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "spec.json"
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    path.write_text(json.dumps({"spec": spec, "agent_id": "node-1", "slot_types": {"0": "cpu"},
                                "run_dir": str(run_dir)}))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "det_agent.pod", str(path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


PRINT = ("import json, os; print(json.dumps({'cwd': os.getcwd(), 'env': dict(os.environ), "
         "'note': open(os.path.join(os.environ['HOME'], '..', 'info', 'note')).read(), "
         "'rdv': open('../info/rendezvous.json').read()}))")


def test_runs_the_task_in_its_workdir_with_its_environment(tmp_path: pathlib.Path) -> None:
    done = _bootstrap(tmp_path, _spec(["python3", "-c", PRINT]))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    run = tmp_path / "run"
    assert out["cwd"] == str(run / "workdir")
    assert (out["note"], json.loads(out["rdv"])) == ("hello", {"rank": 0})
    env = out["env"]
    assert env["DET_TASK_ID"] == "7.abc" and env["DET_ALLOCATION_ID"] == "7.abc.1"
    assert env["HOME"] == str(run / "home")
    assert env["PYTHONPATH"].split(os.pathsep)[0] == harness_dir()
    assert (env["DET_AGENT_ID"], env["DET_CONTAINER_ID"], env["DET_SLOT_IDS"]) == ("node-1", "7.abc.1", "[0]")
    assert env["CUDA_VISIBLE_DEVICES"] == ""  # a CPU slot
    assert env["DET_RESOURCES_TYPE"] == "k8s-job"  # 0.38.1's prep_container: the all-gather rendezvous
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    assert done.stderr == ""


def test_the_pods_own_environment_stays_out(tmp_path: pathlib.Path) -> None:
    done = _bootstrap(tmp_path, _spec(["python3", "-c", PRINT]),
                      extra_env={"SECRET_OF_POD": "1", "KUBERNETES_SERVICE_HOST": "10.0.0.1",
                                 "LANG": "C.UTF-8", "DET_KUBERNETES_POD_IP": "10.1.2.3"})
    assert done.returncode == 0, done.stderr
    env = json.loads(done.stdout)["env"]
    assert "SECRET_OF_POD" not in env and "KUBERNETES_SERVICE_HOST" not in env
    assert env["LANG"] == "C.UTF-8"  # the allowlist of the process runtime passes
    assert env["DET_KUBERNETES_POD_IP"] == "10.1.2.3"  # the manifest's downward API, passed on


def test_the_pod_exits_with_the_tasks_code(tmp_path: pathlib.Path) -> None:
    done = _bootstrap(tmp_path, _spec("echo out; echo err >&2; exit 3"))
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


@pytest.mark.parametrize(("name", "code", "words"), [
    ("no-such-program-det-pod", 127, "cannot execute ['no-such-program-det-pod']: No such file"),
    ("{tmp}/not-executable", 126, "cannot execute ['{tmp}/not-executable']: Permission denied"),
])
def test_an_entrypoint_that_cannot_run_is_one_line(
    tmp_path: pathlib.Path, name: str, code: int, words: str,
) -> None:
    plain = tmp_path / "not-executable"
    plain.write_text("#!/bin/sh\necho never\n")
    plain.chmod(0o644)  # no execute bit at all: refused even to root
    done = _bootstrap(tmp_path, _spec([name.format(tmp=tmp_path)]))
    assert done.returncode == code
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("det-pod: ")
    assert words.format(tmp=tmp_path) in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("spec_file", "words"), [
    ("[]", "must hold a JSON object"),
    ("{nope", "is not JSON"),
    (json.dumps({"spec": {"allocation_id": "a.1"}}), "invalid task spec"),
    (json.dumps({"spec": _spec("true"), "agent_id": ""}), "'agent_id' must be a non-empty string"),
    (json.dumps({"spec": _spec("true", slot_ids=[1]), "agent_id": "n", "slot_types": {"0": "cpu"},
                 "run_dir": "/tmp/x"}), "spec.slot_ids [1] are not slots"),
])
def test_a_bad_spec_file_is_one_line_and_exit_1(
    tmp_path: pathlib.Path, spec_file: str, words: str,
) -> None:
    path = tmp_path / "spec.json"
    path.write_text(spec_file.replace("/tmp/x", str(tmp_path / "run")))
    done = subprocess.run([sys.executable, "-m", "det_agent.pod", str(path)], cwd=ROOT,
                          env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and words in done.stderr, done.stderr


def test_usage_and_a_missing_spec_file(tmp_path: pathlib.Path) -> None:
    usage = subprocess.run([sys.executable, "-m", "det_agent.pod"], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert usage.returncode == 2 and "usage: python3 -m det_agent.pod SPEC_JSON" in usage.stderr
    missing = subprocess.run([sys.executable, "-m", "det_agent.pod", str(tmp_path / "none.json")],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert "cannot read the spec file" in missing.stderr


def _tgz(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def master() -> Iterator[tuple[str, list[tuple[str, str | None]]]]:
    """A stand-in for the master's ``GET /api/v1/tasks/{id}/context_directory``: the context
    for the allocation token ``TOKEN``, 401 for any other; records (path, token header)."""
    seen: list[tuple[str, str | None]] = []
    body = json.dumps({"b64Tgz": base64.b64encode(_tgz({"train.py": "print('hi')\n",
                                                        "pkg/data.txt": "x"})).decode()}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            token = self.headers.get("Grpc-Metadata-x-allocation-token")
            seen.append((self.path, token))
            ok = self.path == "/api/v1/tasks/7.abc/context_directory" and token == f"Bearer {TOKEN}"
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body if ok else b'{"error": "unauthenticated"}')

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _context_spec(url: str, token: str, task_type: str = "TRIAL") -> dict[str, Any]:
    spec = _spec(["python3", "-c", "import os; print(sorted(os.listdir('.')), open('pkg/data.txt').read())"],
                 context_url="/api/v1/tasks/7.abc/context_directory", task_type=task_type)
    spec["env"].update({"DET_MASTER": url, "DET_SESSION_TOKEN": token})
    return spec


def test_the_context_is_downloaded_into_the_workdir(
    tmp_path: pathlib.Path, master: tuple[str, list[tuple[str, str | None]]],
) -> None:
    url, seen = master
    done = _bootstrap(tmp_path, _context_spec(url, TOKEN))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "['pkg', 'train.py'] x\n"
    assert seen == [("/api/v1/tasks/7.abc/context_directory", f"Bearer {TOKEN}")]
    work = tmp_path / "run" / "workdir"
    assert (work / "train.py").read_text() == "print('hi')\n"
    # A trial's context as extracted, which the stock harness copies into checkpoints.
    assert (tmp_path / "run" / "train" / "model" / "train.py").read_text() == "print('hi')\n"


def test_a_failed_context_download_is_one_line(
    tmp_path: pathlib.Path, master: tuple[str, list[tuple[str, str | None]]],
) -> None:
    url, _ = master
    done = _bootstrap(tmp_path, _context_spec(url, "wrong", task_type="COMMAND"))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "context download failed" in done.stderr
    assert "returned 401" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run" / "train").exists()


def test_a_second_start_of_the_container_starts_afresh(tmp_path: pathlib.Path) -> None:
    stale = tmp_path / "run" / "workdir" / "stale"
    stale.parent.mkdir(parents=True)
    stale.write_text("from the last run")
    done = _bootstrap(tmp_path, _spec(["python3", "-c", "import os; print(os.listdir('.'))"]))
    assert (done.returncode, done.stdout) == (0, "[]\n")


@pytest.mark.parametrize(("raw", "words"), [
    ({"spec": _spec("true"), "agent_id": "n", "slot_types": {"x": "cpu"}}, "not a slot id"),
    ({"spec": _spec("true"), "agent_id": "n", "slot_types": {"0": "tpu"}}, "not one of cpu, cuda"),
    ({"spec": _spec("true"), "agent_id": "n", "run_dir": "run"}, "absolute path"),
    ({"agent_id": "n"}, "no 'spec'"),
])
def test_parse_pod_spec_names_the_bad_key(raw: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_pod_spec(raw)


def test_parse_pod_spec_defaults() -> None:
    pod = parse_pod_spec({"spec": _spec("true"), "agent_id": "n", "slot_types": {"0": "cuda"}})
    assert (pod.run_dir, pod.slot_types, pod.spec["entrypoint"]) == (None, {0: "cuda"}, "true")  # None: /run/determined


@pytest.mark.parametrize(("error", "code"), [
    (FileNotFoundError(2, "No such file or directory"), 127),
    (NotADirectoryError(20, "Not a directory"), 127),
    (PermissionError(13, "Permission denied"), 126),
    (OSError(8, "Exec format error"), 126),
])
def test_exec_exit_codes(error: OSError, code: int) -> None:
    assert exec_exit_code(error) == code


def test_the_task_gets_default_signal_dispositions(tmp_path: pathlib.Path) -> None:
    """Python ignores SIGPIPE; the exec'd task must not inherit that (``yes`` would then
    complain of a broken pipe instead of dying quietly)."""
    done = _bootstrap(tmp_path, _spec("yes | head -n 1"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "y\n", "")
