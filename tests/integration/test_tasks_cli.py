"""``det notebook …`` and ``det cmd …`` as a user runs them, against a real master and agent:
a notebook reaches RUNNING and its printed link opens it (ticket -> cookie -> 200), a queued
one says why it waits, ``--config`` wins over ``--config-file``, and a command's output is
printed and its exit code becomes det's."""

from __future__ import annotations

import http.cookiejar
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._master import MasterProcess
from tests.integration.test_det_cli import det
from tests.integration.test_det_cli import env as env  # noqa: F401 - the logged-in CLI env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shared_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("tasks-cli") / "master", slots=2).start()
    yield m
    m.stop()


def _launched(out: str, kind: str) -> str:
    match = re.search(rf"Launched {kind} (\S+)", out)
    assert match, out
    return match.group(1)


def _port_taken(env: dict[str, str], nb_id: str) -> bool:
    """Whether the notebook ended because its port was taken: the master hands out ports from
    29400 per master, so on a machine shared with other masters (other test runs) the port can
    be held by another one's task. Not what these tests are about: start another."""
    return "is not available" in det(env, "notebook", "logs", nb_id).stdout


def test_notebook_start_runs_and_its_link_opens_it(env: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    env = {k: v for k, v in env.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    for _ in range(3):
        done = det(env, "notebook", "start", "--config", "resources.slots=0", "--no-browser",
                   timeout=180, ok=False)
        nb_id = _launched(done.stdout, "notebook")
        if done.returncode == 0 or not _port_taken(env, nb_id):
            break
    assert done.returncode == 0, done.stderr
    url = re.search(r"^URL: (\S+)$", done.stdout, re.M)
    # The link names the proxy's own origin: the master's host, another port.
    proxy = re.match(rf"^(http://127\.0\.0\.1:\d+)/proxy/{nb_id}/lab\?det_ticket=", url.group(1) if url else "")
    assert proxy and proxy.group(1) != env["DET_MASTER"].rstrip("/"), done.stdout
    assert f"Notebook {nb_id} is running" in done.stdout
    assert "starting JupyterLab" in done.stderr  # the status line said what it waited for

    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with browser.open(url.group(1), timeout=30) as resp:  # 302 -> the lab page, cookie set
        assert resp.status == 200 and resp.url.endswith(f"/proxy/{nb_id}/lab")
    assert any(c.name == "det_proxy" for c in jar)
    # The master's own /proxy/ path sends the browser (its cookie) to the proxy's origin.
    with browser.open(f"{env['DET_MASTER']}/proxy/{nb_id}/api/status", timeout=30) as resp:
        assert resp.status == 200 and "started" in json.loads(resp.read())
        assert resp.url == f"{proxy.group(1)}/proxy/{nb_id}/api/status"

    listed = det(env, "notebook", "list").stdout.splitlines()
    assert [h.strip() for h in listed[0].split("|")][:4] == ["ID", "Owner", "Description", "State"]
    row = next(line for line in listed if line.startswith(nb_id))
    assert "RUNNING" in row and "admin" in row
    opened = det(env, "notebook", "open", nb_id, "--no-browser").stdout.strip()
    assert opened.startswith(f"{proxy.group(1)}/proxy/{nb_id}/lab?det_ticket=")
    assert f"Killed notebook {nb_id}" in det(env, "notebook", "kill", nb_id).stdout
    ended = json.loads(det(env, "notebook", "ls", "--json").stdout)
    mine = next(n for n in ended if n["id"] == nb_id)
    assert mine["state"] in ("STATE_TERMINATING", "STATE_TERMINATED")


def test_queued_notebook_says_why_and_config_wins_over_the_file(env: dict[str, str],  # noqa: F811
                                                                tmp_path: Path) -> None:
    cfg = tmp_path / "nb.yaml"
    cfg.write_text("description: from the file\nresources: {slots: 0}\nidle_timeout: 20m\n")
    done = det(env, "notebook", "start", "--config-file", str(cfg), "--config",
               "resources.slots=64", "--config", "resources.priority=7", "--no-browser",
               "--timeout", "3", ok=False)
    nb_id = _launched(done.stdout, "notebook")
    assert done.returncode == 1 and "still QUEUED" in done.stderr, done.stderr
    assert re.search(r"queued: needs 64 slots", done.stderr), done.stderr
    assert "LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED" in done.stderr
    listed = json.loads(det(env, "notebook", "list", "--json").stdout)
    mine = next(n for n in listed if n["id"] == nb_id)
    assert mine["description"] == "from the file" and mine["idleTimeout"] == 1200
    assert "set the priority" in det(env, "notebook", "set", "priority", nb_id, "3").stdout.lower()
    det(env, "notebook", "kill", nb_id)
    detached = det(env, "notebook", "start", "--config", "resources.slots=64", "-d")
    det(env, "notebook", "kill", _launched(detached.stdout, "notebook"))
    bad = det(env, "notebook", "start", "--config", "resources.slots", ok=False)
    assert bad.returncode == 1 and "expected key=value" in bad.stderr
    assert bad.stderr.strip().count("\n") == 0


def test_cmd_run_prints_the_output_and_exits_with_its_code(env: dict[str, str],  # noqa: F811
                                                          tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "script.py").write_text(
        "import os, sys\nprint('hello from the cluster', os.environ.get('GREETING'))\n"
        "print(open('data.txt').read().strip())\nsys.exit(3)\n")
    (ctx / "data.txt").write_text("context file here\n")
    done = det(env, "cmd", "run", "--context", str(ctx), "--config", "resources.slots=0",
               "--config", "environment.environment_variables=GREETING=hi", "--",
               "python3", "script.py", ok=False, timeout=180)
    assert done.returncode == 3, (done.stdout, done.stderr)
    lines = done.stdout.splitlines()
    assert "hello from the cluster hi" in lines and "context file here" in lines
    cmd_id = _launched(done.stderr, "command")

    ok = det(env, "cmd", "run", "--config", "resources.slots=0", "echo one && echo two")
    assert ok.stdout.splitlines()[-2:] == ["one", "two"]
    listed = det(env, "cmd", "list").stdout
    row = next(line for line in listed.splitlines() if line.startswith(cmd_id))
    assert "TERMINATED" in row and "exited with code 3" in row
    full = det(env, "cmd", "logs", cmd_id).stdout.splitlines()
    assert "hello from the cluster hi" in full and len(full) >= 2
    assert det(env, "cmd", "logs", cmd_id, "--head", "1").stdout.splitlines() == full[:1]
    assert det(env, "cmd", "logs", cmd_id, "--tail", "2").stdout.splitlines() == full[-2:]
    assert det(env, "cmd", "logs", cmd_id, "--tail", "2", "-f").stdout.splitlines() == full[-2:]
    both = det(env, "cmd", "logs", cmd_id, "--head", "1", "--tail", "1", ok=False)
    assert both.returncode == 2 and "not allowed with" in both.stderr
    missing = det(env, "cmd", "kill", "cmd-nope", ok=False)
    assert missing.returncode == 1 and "not found" in missing.stderr
    empty = det(env, "cmd", "run", ok=False)
    assert empty.returncode == 1 and "needs a command" in empty.stderr


def test_help_for_every_task_command(env: dict[str, str]) -> None:  # noqa: F811
    for argv in (["notebook"], ["notebook", "start"], ["notebook", "list"], ["notebook", "open"],
                 ["notebook", "kill"], ["notebook", "logs"], ["notebook", "set", "priority"],
                 ["cmd"], ["cmd", "run"], ["cmd", "list"], ["cmd", "kill"], ["cmd", "logs"],
                 ["cmd", "set", "priority"]):
        assert det(env, *argv, "--help").stdout.startswith("usage: det")
