"""The agent against a small fake master (tornado websocket + context route) on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import io
import json
import sys
import tarfile

import tornado.httpserver
import tornado.web
import tornado.websocket
from tornado.testing import bind_unused_port

from det_agent import Agent, ProcessRuntime, Slot

TOKEN = "agent-secret"
ALLOC_TOKEN = "alloc-secret"
SLOTS = [Slot(0, "cpu", "cpu")]


def _context() -> str:
    """The tasks' context archive, the same bytes on every call: gzip's header holds a time,
    fixed here, so a digest taken once matches every download (even a second later)."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        data = b"import sys\nprint('from context')\nprint('oops', file=sys.stderr)\n"
        info = tarfile.TarInfo("train.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buf.getvalue()).decode()


class FakeMaster:
    """Plays the master: records frames per connection and can push frames or hang up."""

    def __init__(self) -> None:
        self.frames: asyncio.Queue[dict] = asyncio.Queue()
        self.conn: tornado.websocket.WebSocketHandler | None = None
        self.refused = 0
        self.context_gets = 0
        master = self

        class Agents(tornado.websocket.WebSocketHandler):
            async def get(self, *args, **kwargs):  # type: ignore[override]
                if self.request.headers.get("Authorization") != f"Bearer {TOKEN}":
                    master.refused += 1
                    self.set_status(401)
                    self.finish()
                    return
                assert self.get_query_argument("id") == "a1"
                await super().get(*args, **kwargs)

            def open(self) -> None:
                master.conn = self

            def on_message(self, message) -> None:
                frame = json.loads(message)
                # Acknowledged as the real master does once handled (the agent keeps it until
                # then); the id is not part of what these tests compare.
                if isinstance(frame.get("id"), int):
                    self.write_message(json.dumps({"type": "ack", "id": frame.pop("id")}))
                master.frames.put_nowait(frame)

        class Context(tornado.web.RequestHandler):
            def get(self) -> None:
                if self.request.headers.get("Grpc-Metadata-x-allocation-token") != (
                    f"Bearer {ALLOC_TOKEN}"
                ):
                    raise tornado.web.HTTPError(401)
                master.context_gets += 1
                self.write({"b64Tgz": _context()})

        self.app = tornado.web.Application(
            [(r"/agents", Agents), (r"/api/v1/tasks/t1/context_directory", Context)]
        )
        sock, self.port = bind_unused_port()
        self.server = tornado.httpserver.HTTPServer(self.app)
        self.server.add_sockets([sock])
        self.url = f"http://127.0.0.1:{self.port}"

    async def next(self, timeout: float = 10.0) -> dict:
        return await asyncio.wait_for(self.frames.get(), timeout)

    async def next_of(self, kind: str, allocation_id: str | None = None) -> dict:
        while True:
            frame = await self.next()
            if frame["type"] == kind and allocation_id in (None, frame.get("allocation_id")):
                return frame

    async def next_of_any(self, allocation_id: str) -> dict:
        while True:
            frame = await self.next()
            if frame.get("allocation_id") == allocation_id:
                return frame

    def send(self, frame: dict) -> None:
        assert self.conn is not None
        self.conn.write_message(json.dumps(frame))

    def spec(self, allocation_id: str, entrypoint, context: bool = False, digest: str | None = None) -> dict:
        return {
            **({"context_digest": digest} if digest else {}),
            "task_id": "t1",
            "allocation_id": allocation_id,
            "task_type": "TRIAL",
            "entrypoint": entrypoint,
            "slot_ids": [0],
            "env": {"DET_MASTER": self.url, "DET_SESSION_TOKEN": ALLOC_TOKEN},
            "context_url": "/api/v1/tasks/t1/context_directory" if context else None,
            "info_files": {"cluster.json": {"x": 1}},
            "mounts": [],
        }


def _agent(master: FakeMaster, tmp_path, token: str = TOKEN) -> Agent:
    runtime = ProcessRuntime(str(tmp_path), agent_id="a1", slots=SLOTS, isolate=False)
    return Agent(
        master.url, token, agent_id="a1", slots=SLOTS, work_dir=str(tmp_path), runtime=runtime
    )


async def _with_agent(master: FakeMaster, agent: Agent, body) -> None:
    run = asyncio.create_task(agent.run())
    try:
        await body()
    finally:
        await agent.stop()
        await asyncio.wait_for(run, 5)
        master.server.stop()


def test_task_lifecycle_and_kill(tmp_path) -> None:
    async def scenario() -> None:
        master = FakeMaster()
        agent = _agent(master, tmp_path)

        async def body() -> None:
            hello = await master.next()
            assert hello == {
                "type": "hello",
                "agent_id": "a1",
                "resource_pool": "",
                "slots": [{"id": 0, "type": "cpu", "name": "cpu", "uuid": None}],
                "running": [],
                "version": hello["version"],
                "address": "127.0.0.1",
                "containers": hello["containers"],  # "docker", or why not: this host's engine
            }
            assert hello["containers"]
            master.send({"type": "welcome", "master_id": "m", "cluster_id": "c"})
            master.send(
                {
                    "type": "start_task",
                    "spec": master.spec("1.t1.1", [sys.executable, "train.py"], True),
                }
            )
            started = await master.next()
            assert started["type"] == "task_started" and started["pid"] > 0
            lines = []
            while (frame := await master.next())["type"] == "logs":
                lines += frame["lines"]
            assert frame == {
                "type": "task_exited",
                "allocation_id": "1.t1.1",
                "exit_code": 0,
                "reason": None,
            }
            assert sorted((x["stdtype"], x["log"]) for x in lines) == [
                ("stderr", "oops\n"),
                ("stdout", "from context\n"),
            ]

            master.send({"type": "start_task", "spec": master.spec("1.t1.2", "sleep 1000")})
            assert (await master.next())["type"] == "task_started"
            master.send({"type": "kill_task", "allocation_id": "1.t1.2"})
            exited = await master.next_of("task_exited")
            assert (exited["allocation_id"], exited["exit_code"]) == ("1.t1.2", 137)

        await _with_agent(master, agent, body)

    asyncio.run(scenario())


def test_an_experiment_context_is_downloaded_once(tmp_path) -> None:
    """Tasks whose spec names the same context digest share one download; a digest that does
    not match the archive is not trusted (downloaded each time)."""
    right = "sha256:" + hashlib.sha256(base64.b64decode(_context())).hexdigest()
    wrong = "sha256:" + "0" * 64

    async def scenario() -> list[tuple[int, list[str]]]:
        master = FakeMaster()
        agent = _agent(master, tmp_path)
        seen = []

        async def body() -> None:
            await master.next()
            for i, digest in enumerate([right, right, right, wrong, wrong]):
                entry = [sys.executable, "-c", "import os; print(sorted(os.listdir('.')))"]
                master.send({"type": "start_task", "spec": master.spec(f"1.t1.{i}", entry, True, digest)})
                lines = []
                while (frame := await master.next_of_any(f"1.t1.{i}"))["type"] != "task_exited":
                    lines += [x["log"] for x in frame.get("lines", [])]
                assert frame["exit_code"] == 0, lines
                seen.append((master.context_gets, lines))

        await _with_agent(master, agent, body)
        return seen

    seen = asyncio.run(scenario())
    assert [gets for gets, _ in seen] == [1, 1, 1, 2, 3]
    assert all(lines == ["['train.py']\n"] for _, lines in seen)


def test_wrong_token_is_refused_and_retried(tmp_path) -> None:
    async def scenario() -> None:
        master = FakeMaster()
        agent = _agent(master, tmp_path, token="wrong")

        async def body() -> None:
            while master.refused < 2:  # refused, backed off 0.5 s, tried again
                await asyncio.sleep(0.05)
            assert master.frames.empty()
            assert not agent.connected.is_set()

        await asyncio.wait_for(_with_agent(master, agent, body), 10)

    asyncio.run(scenario())


def test_reconnect_keeps_the_task_and_replays(tmp_path) -> None:
    ticker = [
        sys.executable,
        "-u",
        "-c",
        "import time\nfor i in range(1000):\n    print(i)\n    time.sleep(0.05)",
    ]

    async def scenario() -> None:
        master = FakeMaster()
        agent = _agent(master, tmp_path)

        async def body() -> None:
            assert (await master.next())["running"] == []
            master.send({"type": "start_task", "spec": master.spec("1.t1.1", ticker)})
            pid = (await master.next_of("task_started"))["pid"]
            before = (await master.next_of("logs"))["lines"]
            assert master.conn is not None
            master.conn.close()  # the master goes away mid-task
            hello = await master.next_of("hello")
            assert hello["running"] == ["1.t1.1"]
            after = []
            while len(after) < 5:
                after += (await master.next_of("logs"))["lines"]
            seqs = sorted({x["seq"] for x in before + after})
            assert seqs == list(range(seqs[-1] + 1)), "no line lost across the reconnect"
            assert int(after[-1]["log"]) > int(before[-1]["log"])  # the task kept running
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                assert b"range(1000)" in f.read()
            master.send({"type": "kill_task", "allocation_id": "1.t1.1"})
            assert (await master.next_of("task_exited"))["exit_code"] == 137

        await _with_agent(master, agent, body)

    asyncio.run(scenario())


def test_cli_stops_on_sigterm(tmp_path) -> None:
    import os
    import signal
    import subprocess

    sock, port = bind_unused_port()
    sock.close()  # nothing listens there: the agent keeps retrying
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "det_agent",
            "--master",
            f"http://127.0.0.1:{port}",
            "--token",
            "t",
            "--id",
            "cli",
            "--slots",
            "1",
            "--work-dir",
            str(tmp_path),
        ],
        cwd=root,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "cannot reach the master" in line:
                break
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        proc.kill()
