"""Pure parts of shells: the key pair, the stored settings, the task's command, what responses
show, the ssh command the CLI prints, and the sshd's session environment."""

from __future__ import annotations

import asyncssh
import pytest

from det_jupyter.cli.det import _shell, _tunnel
from det_jupyter.cli.det.common import CommandError
from det_jupyter.services.interactive import ssh as _shells
from det_jupyter.services.interactive.kinds import KINDS
from det_jupyter.tasks import sshd


def test_key_pairs_are_fresh_ed25519_pairs_that_match() -> None:
    private, public = _shells.generate_key_pair("det-shell-alice")
    assert private.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert public.startswith("ssh-ed25519 ") and public.endswith(" det-shell-alice")
    loaded = asyncssh.import_private_key(private)
    assert loaded.export_public_key("openssh").decode().split()[:2] == public.split()[:2]
    assert _shells.generate_key_pair()[0] != private


def test_settings_keep_the_keys_and_an_optional_idle_timeout() -> None:
    keys = ("PRIV", "ssh-ed25519 AAAA x")
    assert _shells.shell_settings({}, "alice", {}, keys) == {
        "idle_timeout": None, "ssh_private_key": "PRIV", "ssh_public_key": "ssh-ed25519 AAAA x"}
    assert _shells.shell_settings({"idle_timeout": "2m"}, "a", {}, keys)["idle_timeout"] == 120.0
    assert _shells.shell_settings({}, "a", {"shell_timeout_s": 30.0}, keys)["idle_timeout"] == 30.0
    with pytest.raises(ValueError, match="idle_timeout"):
        _shells.shell_settings({"idle_timeout": "soon"}, "a", {}, keys)


def test_the_task_runs_the_sshd_with_the_public_key_only() -> None:
    cfg = {"ssh_private_key": "PRIV", "ssh_public_key": "ssh-ed25519 AAAA x"}
    argv, env = _shells.shell_build("shell-1", "10.0.0.5", 4242, cfg, False)
    assert argv == ["python3", "-m", "det_jupyter.tasks.sshd", "--host", "10.0.0.5",
                    "--port", "4242"]
    assert env == {"DET_SHELL_AUTHORIZED_KEY": "ssh-ed25519 AAAA x"}
    assert _shells.KEY_ENV == sshd.KEY_ENV
    kind = KINDS["SHELL"]
    assert (kind.cli, kind.probe, kind.jupyter_idle) == ("shell", None, False)


def test_public_config_drops_the_private_key() -> None:
    cfg = {"ssh_private_key": "PRIV", "ssh_public_key": "PUB", "idle_timeout": None}
    assert _shells.public_config(cfg) == {"ssh_public_key": "PUB", "idle_timeout": None}


def test_the_ssh_command_goes_through_the_tunnel() -> None:
    tunnel = _shell.tunnel_argv("http://m:8080", "alice", "shell-1")
    assert tunnel[1:] == ["-m", "det_jupyter.cli.det", "-m", "http://m:8080", "-u", "alice",
                          "shell", "tunnel", "shell-1"]
    cmd = _shell.ssh_command(["/venv 1/python", "-m", "x", "50%"], "/k/shell-1.key", "alice",
                             "shell-1", ["-L", "8888:localhost:8888"], ssh="/usr/bin/ssh")
    assert cmd == ["/usr/bin/ssh", "-o", "ProxyCommand='/venv 1/python' -m x 50%%",
                   "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                   "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR", "-i", "/k/shell-1.key",
                   "alice@shell-1", "-L", "8888:localhost:8888"]


@pytest.mark.parametrize("rest, expected", [
    ([], (False, [])),
    (["--show-ssh-command"], (True, [])),
    (["--", "echo", "hi"], (False, ["echo", "hi"])),
    (["--show-ssh-command", "--", "-o", "BatchMode=yes", "ls"], (True, ["-o", "BatchMode=yes", "ls"])),
    (["-v", "--", "--show-ssh-command"], (False, ["-v", "--show-ssh-command"])),
])
def test_what_follows_the_shell_id(rest: list[str], expected: tuple[bool, list[str]]) -> None:
    assert _shell.split_extra(rest) == expected


def test_keys_are_written_0600(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DET_JUPYTER_CONFIG_DIR", str(tmp_path))
    path = _shell.write_key("shell-1", "KEY")
    assert path == tmp_path / "shells" / "shell-1.key"
    assert path.read_text() == "KEY\n"
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700


def test_tunnel_urls() -> None:
    assert _tunnel.tunnel_url("http://m:8080/", "shell-1") == "ws://m:8080/det-jupyter/tunnel/shell-1"
    assert _tunnel.tunnel_url("https://m", "s") == "wss://m/det-jupyter/tunnel/s"
    with pytest.raises(CommandError, match="neither http"):
        _tunnel.tunnel_url("ftp://m", "s")


def test_a_session_has_the_tasks_environment_but_not_the_key() -> None:
    env = sshd.session_env({"DET_TASK_ID": "shell-1", sshd.KEY_ENV: "ssh-ed25519 AAAA",
                            "HOME": "/work"}, {"LANG": "C.UTF-8"}, "xterm-256color", "/bin/bash")
    assert env["DET_TASK_ID"] == "shell-1" and sshd.KEY_ENV not in env
    assert (env["HOME"], env["LANG"], env["TERM"], env["SHELL"]) == (
        "/work", "C.UTF-8", "xterm-256color", "/bin/bash")
    assert "TERM" not in sshd.session_env({}, {}, None, "/bin/sh")
