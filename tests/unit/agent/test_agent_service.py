"""det-agent as a service: the address in hello, GPU slot stats, and the service flags.

The agent runs against an in-process :class:`LocalLink` (no sockets), with a named fake
runtime and a named fake NVML module.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import types
from collections.abc import Callable
from typing import Any

import pytest

from det_agent import Agent, GpuStatsSampler, LocalLink, Slot, SlotStats, detect_address, wire
from det_agent import _protocol as proto
from det_agent.__main__ import parse_args
from det_agent._address import udp_local_address, validate_address
from det_agent._stats import sampler_for
from det_agent.runtime import Runtime

GPU_SLOTS = [Slot(0, "cuda", "H100", "GPU-a"), Slot(1, "cuda", "H100", "GPU-b")]
CPU_SLOT = Slot(0, "cpu", "cpu")
WAIT = 10.0  # seconds a scenario may wait for a frame before it fails (never a timing check)


# -- named fakes -----------------------------------------------------------------------------


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class CountingNvml(types.SimpleNamespace):
    """Enough of pynvml for sampling. Each utilization read returns the number of reads so
    far, so a stats frame tells when it was sampled. ``lost`` GPUs fail their queries;
    ``init_errors`` fail that many nvmlInit calls first."""

    NVMLError = NVMLError

    def __init__(self, lost: frozenset[int] = frozenset(), init_errors: int = 0) -> None:
        super().__init__(lost=lost, init_errors=init_errors, inits=0, shutdowns=0, reads=0)

    def nvmlInit(self) -> None:
        if self.init_errors:
            self.init_errors -= 1
            raise NVMLError(12)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if i in self.lost:
            raise NVMLError(15)  # NVML_ERROR_GPU_IS_LOST
        return i

    def nvmlDeviceGetUtilizationRates(self, h: int) -> types.SimpleNamespace:
        self.reads += 1
        return types.SimpleNamespace(gpu=self.reads, memory=0)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(used=(h + 1) << 30, total=80 << 30)


class IdleRuntime(Runtime):
    """A runtime that is never asked to run anything in these tests."""

    async def start(self, spec: dict[str, Any], on_log: Any, on_exit: Any) -> int | None:
        raise AssertionError("no task is started in these tests")

    async def kill(self, allocation_id: str) -> None:
        return None

    def running(self) -> list[str]:
        return []

    async def shutdown(self) -> None:
        return None


class LinkMaster:
    """Plays the master over LocalLinks: one list of frames per connection; ``on_frame`` sees
    each frame as it arrives (on the event loop thread)."""

    def __init__(self, on_frame: Callable[[int, dict[str, Any]], None] | None = None) -> None:
        self.links: list[LocalLink] = []
        self.frames: list[list[dict[str, Any]]] = []
        self.arrived = asyncio.Event()
        self._on_frame = on_frame

    def connect(self) -> LocalLink:
        index = len(self.links)
        self.frames.append([])

        def deliver(text: str) -> None:
            frame = json.loads(text)
            if self._on_frame is not None:
                self._on_frame(index, frame)
            self.frames[index].append(frame)
            self.arrived.set()

        link = LocalLink(deliver, lambda: None)
        self.links.append(link)
        return link

    async def until(self, check: Callable[[], bool]) -> None:
        async def poll() -> None:
            while not check():
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(poll(), WAIT)

    async def hello(self, link: int) -> dict[str, Any]:
        """The first frame on connection ``link`` (0: the first), once it arrived."""
        await self.until(lambda: len(self.frames) > link and bool(self.frames[link]))
        return self.frames[link][0]


def _agent(master: LinkMaster, tmp_path: Any, slots: list[Slot], **kwargs: Any) -> Agent:
    return Agent(
        "http://127.0.0.1:1",
        "token",
        agent_id="a1",
        slots=slots,
        work_dir=str(tmp_path),
        runtime=IdleRuntime(),
        connect=master.connect,
        **kwargs,
    )


async def _stopped(agent: Agent, run: asyncio.Task[None]) -> None:
    await agent.stop()
    await asyncio.wait_for(run, WAIT)


# -- hello carries the address ---------------------------------------------------------------


def test_hello_frame_has_the_address_and_keeps_every_other_field() -> None:
    assert wire.Hello("a1", "gpus", (GPU_SLOTS[0],), ("1.a.1",), "0.1.0", "10.0.0.7").to_wire() == {
        "type": "hello",
        "agent_id": "a1",
        "resource_pool": "gpus",
        "slots": [{"id": 0, "type": "cuda", "name": "H100", "uuid": "GPU-a"}],
        "running": ["1.a.1"],
        "version": "0.1.0",
        "address": "10.0.0.7",
        "containers": "",
    }


@pytest.mark.parametrize(
    ("address", "expected"),
    [("10.1.2.3", "10.1.2.3"), ("gpu-7.lab", "gpu-7.lab"), (None, "127.0.0.1")],
    ids=["explicit-ip", "explicit-name", "detected-loopback"],
)
def test_agent_sends_its_address_in_hello(tmp_path, address, expected) -> None:
    async def scenario() -> None:
        master = LinkMaster()
        agent = _agent(master, tmp_path, [CPU_SLOT], address=address)
        run = asyncio.create_task(agent.run())
        try:
            hello = await master.hello(0)
            assert hello["type"] == "hello" and hello["address"] == expected
            assert hello["resource_pool"] == "" and hello["agent_id"] == "a1"
        finally:
            await _stopped(agent, run)

    asyncio.run(scenario())


@pytest.mark.parametrize("address", ["", " ", "10.0.0.7 ", "http://10.0.0.7", "a/b"])
def test_bad_addresses_are_refused_by_name(tmp_path, address) -> None:
    with pytest.raises(ValueError, match="agent address"):
        validate_address(address)
    with pytest.raises(ValueError, match="agent address"):
        _agent(LinkMaster(), tmp_path, [CPU_SLOT], address=address)


def test_a_refusal_is_logged_as_an_error_once_and_the_agent_keeps_retrying(
    tmp_path, caplog
) -> None:
    why = "resource pool 'a100' does not exist; start the agent with --resource-pool default"

    async def scenario() -> None:
        master = LinkMaster()
        agent = _agent(master, tmp_path, [CPU_SLOT], resource_pool="a100")
        run = asyncio.create_task(agent.run())
        try:
            for link in range(2):
                assert (await master.hello(link))["resource_pool"] == "a100"
                master.links[link].push(json.dumps({"type": "refused", "message": why}))
                master.links[link].close()
            assert (await master.hello(2))["type"] == "hello"
        finally:
            await _stopped(agent, run)

    with caplog.at_level(logging.DEBUG, logger="det_agent"):
        asyncio.run(scenario())
    refusals = [r for r in caplog.records if why in r.getMessage()]
    assert [r.levelno for r in refusals] == [logging.ERROR, logging.DEBUG]


# -- address detection -----------------------------------------------------------------------


class RecordingProbe:
    """Stands in for the UDP route lookup: records what it was asked, answers ``answer``."""

    def __init__(self, answer: str | OSError) -> None:
        self.answer = answer
        self.asked: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> str:
        self.asked.append((host, port))
        if isinstance(self.answer, OSError):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    "master",
    [
        "http://127.0.0.1:8888",
        "http://127.0.1.1:8888",
        "http://localhost:8888/jupyter",
        "https://LOCALHOST",
        "http://[::1]:8888",
    ],
)
def test_a_master_on_loopback_means_127_0_0_1_without_any_lookup(master: str) -> None:
    probe = RecordingProbe(OSError("must not be called"))
    assert detect_address(master, probe=probe) == "127.0.0.1"
    assert probe.asked == []


@pytest.mark.parametrize(
    ("master", "asked"),
    [
        ("http://10.0.0.5:8888", ("10.0.0.5", 8888)),
        ("https://master.lab/det", ("master.lab", 443)),
        ("http://master.lab", ("master.lab", 80)),
        ("http://[fd00::5]:8080", ("fd00::5", 8080)),
    ],
)
def test_a_remote_master_asks_the_route_to_its_host_and_port(master, asked) -> None:
    probe = RecordingProbe("10.0.0.7")
    assert detect_address(master, probe=probe) == "10.0.0.7"
    assert probe.asked == [asked]


def test_a_failed_lookup_is_an_os_error_and_a_bad_url_a_value_error() -> None:
    with pytest.raises(OSError, match="no route"):
        detect_address("http://10.0.0.5:1", probe=RecordingProbe(OSError("no route")))
    with pytest.raises(ValueError, match="master URL"):
        detect_address("10.0.0.5:8888", probe=RecordingProbe("x"))
    with pytest.raises(ValueError, match="bad port"):
        detect_address("http://10.0.0.5:99999", probe=RecordingProbe("x"))


def test_the_real_udp_probe_finds_loopback_for_a_loopback_host() -> None:
    # Connecting a UDP socket sends nothing; loopback is routed on every host.
    assert udp_local_address("127.0.0.1", 9) == "127.0.0.1"


# -- slot stats ------------------------------------------------------------------------------


def test_slot_stats_frame() -> None:
    stats = [SlotStats(0, 40, 1 << 30, 80 << 30), SlotStats(1, 0, 0, 80 << 30)]
    frame = wire.SlotStatsReport(tuple(stats)).to_wire()
    assert frame == {
        "type": "slot_stats",
        "slots": [
            {"id": 0, "gpu_util": 40, "mem_used": 1 << 30, "mem_total": 80 << 30},
            {"id": 1, "gpu_util": 0, "mem_used": 0, "mem_total": 80 << 30},
        ],
    }
    assert json.loads(proto.encode(frame)) == frame


def test_sampler_reads_every_gpu_slot_and_keeps_nvml_open_until_closed() -> None:
    nvml = CountingNvml()
    sampler = GpuStatsSampler([*GPU_SLOTS, Slot(2, "cpu", "cpu")], nvml=nvml)
    assert sampler.sample() == [
        SlotStats(0, 1, 1 << 30, 80 << 30),
        SlotStats(1, 2, 2 << 30, 80 << 30),
    ]
    assert [s.gpu_util for s in sampler.sample()] == [3, 4]
    assert (nvml.inits, nvml.shutdowns) == (1, 0)
    sampler.close()
    sampler.close()
    assert nvml.shutdowns == 1
    assert len(sampler.sample()) == 2 and nvml.inits == 2, "a sample after close reopens NVML"


def test_sampler_skips_a_lost_gpu() -> None:
    sampler = GpuStatsSampler(GPU_SLOTS, nvml=CountingNvml(lost=frozenset({0})))
    assert [s.id for s in sampler.sample()] == [1]


def test_sampler_without_nvml_returns_nothing_and_retries_next_time() -> None:
    nvml = CountingNvml(init_errors=1)
    sampler = GpuStatsSampler(GPU_SLOTS, nvml=nvml)
    assert sampler.sample() == []
    assert [s.id for s in sampler.sample()] == [0, 1]
    sampler.close()
    assert nvml.shutdowns == 1


def test_real_nvml_on_this_host_does_not_raise() -> None:
    # With a GPU: figures for GPU 0; without (pynvml or the driver missing): nothing.
    sampler = GpuStatsSampler([Slot(0, "cuda", "gpu")])
    try:
        stats = sampler.sample()
    finally:
        sampler.close()
    assert stats == [] or ([s.id for s in stats] == [0] and stats[0].mem_total > 0)


def test_cpu_slots_are_never_sampled() -> None:
    nvml = CountingNvml()
    assert GpuStatsSampler([CPU_SLOT], nvml=nvml).sample() == []
    assert nvml.inits == 0


@pytest.mark.parametrize(
    ("slots", "interval", "runs"),
    [(GPU_SLOTS, 10.0, True), (GPU_SLOTS, 0.0, False), ([CPU_SLOT], 10.0, False)],
    ids=["gpus", "stats-off", "cpu-only"],
)
def test_which_agents_sample(slots, interval, runs) -> None:
    given = GpuStatsSampler(GPU_SLOTS, nvml=CountingNvml())
    assert (sampler_for(slots, interval, given) is given) is runs
    default = sampler_for(slots, interval)
    assert isinstance(default, GpuStatsSampler) if runs else default is None


@pytest.mark.parametrize("interval", [-1.0, float("nan"), float("inf")])
def test_bad_stats_intervals_are_refused(tmp_path, interval) -> None:
    with pytest.raises(ValueError, match="stats_interval"):
        _agent(LinkMaster(), tmp_path, GPU_SLOTS, stats_interval=interval)


def test_stats_flow_while_connected_and_none_from_an_outage_are_replayed(tmp_path) -> None:
    nvml = CountingNvml()
    reads_at_hello: dict[int, int] = {}

    def on_frame(link: int, frame: dict[str, Any]) -> None:
        if frame["type"] == "hello":
            reads_at_hello[link] = nvml.reads

    def stats_on(master: LinkMaster, link: int) -> list[dict[str, Any]]:
        if len(master.frames) <= link:
            return []
        return [f for f in master.frames[link] if f["type"] == "slot_stats"]

    async def scenario() -> None:
        master = LinkMaster(on_frame)
        sampler = GpuStatsSampler(GPU_SLOTS, nvml=nvml)
        agent = _agent(master, tmp_path, GPU_SLOTS, stats_interval=0.01, stats_sampler=sampler)
        run = asyncio.create_task(agent.run())
        try:
            await master.until(lambda: len(stats_on(master, 0)) >= 2)
            assert master.frames[0][0]["type"] == "hello"
            first = stats_on(master, 0)[0]
            assert [s["id"] for s in first["slots"]] == [0, 1]
            assert first["slots"][0]["mem_total"] == 80 << 30
            # The master goes away; the agent keeps sampling nothing until it is back.
            master.links[0].close()
            await master.until(lambda: len(stats_on(master, 1)) >= 2)
            assert master.frames[1][0]["type"] == "hello"
            stale = [
                s
                for frame in stats_on(master, 1)
                for s in frame["slots"]
                if s["gpu_util"] <= reads_at_hello[1]
            ]
            assert stale == [], "stats sampled before the reconnect were sent after it"
        finally:
            await _stopped(agent, run)
        assert nvml.shutdowns == 1, "stop() shuts NVML down"

    asyncio.run(scenario())


# -- the command line ------------------------------------------------------------------------

_ENV = (
    "DET_MASTER",
    "DET_AGENT_TOKEN",
    "DET_AGENT_TOKEN_FILE",
    "DET_AGENT_ID",
    "DET_AGENT_ADDRESS",
    "DET_AGENT_RESOURCE_POOL",
    "DET_AGENT_STATS_INTERVAL",
)
_REQUIRED = ["--master", "http://10.0.0.5:8888", "--token", "t"]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_service_flag_defaults(clean_env) -> None:
    args = parse_args(_REQUIRED)
    assert args.address is None
    assert args.resource_pool == ""
    assert args.stats_interval == 10.0


def test_service_flags(clean_env) -> None:
    args = parse_args(
        [
            *_REQUIRED,
            *("--id", "gpu-7", "--address", "10.0.0.7", "--resource-pool", "a100"),
            *("--stats-interval", "0"),
        ]
    )
    assert (args.id, args.address, args.resource_pool, args.stats_interval) == (
        "gpu-7",
        "10.0.0.7",
        "a100",
        0.0,
    )


def test_service_settings_from_the_environment(clean_env) -> None:
    for name, value in {
        "DET_MASTER": "http://10.0.0.5:8888",
        "DET_AGENT_TOKEN": "t",
        "DET_AGENT_ID": "gpu-7",
        "DET_AGENT_ADDRESS": "10.0.0.7",
        "DET_AGENT_RESOURCE_POOL": "a100",
        "DET_AGENT_STATS_INTERVAL": "2.5",
    }.items():
        clean_env.setenv(name, value)
    args = parse_args([])
    assert (args.master, args.token, args.id) == ("http://10.0.0.5:8888", "t", "gpu-7")
    assert (args.address, args.resource_pool, args.stats_interval) == ("10.0.0.7", "a100", 2.5)
    assert "DET_AGENT_TOKEN" not in os.environ  # read once; tasks never inherit it
    clean_env.setenv("DET_AGENT_TOKEN", "t")
    flags = parse_args(["--address", "10.9.9.9", "--resource-pool", "b", "--stats-interval", "1"])
    assert (flags.address, flags.resource_pool, flags.stats_interval) == ("10.9.9.9", "b", 1.0)


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--stats-interval", "-1"], {}, "--stats-interval must be 0 or more"),
        (["--stats-interval", "inf"], {}, "--stats-interval must be 0 or more"),
        ([], {"DET_AGENT_STATS_INTERVAL": "often"}, "invalid float value"),
        (["--address", "http://10.0.0.7"], {}, "agent address"),
    ],
)
def test_bad_service_flags_exit_2_with_a_message(clean_env, capsys, argv, env, message) -> None:
    for name, value in env.items():
        clean_env.setenv(name, value)
    with pytest.raises(SystemExit) as exc:
        parse_args([*_REQUIRED, *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
