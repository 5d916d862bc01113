"""Line splitting, rank parsing and batching of task output."""

from __future__ import annotations

import asyncio

import pytest

from det_agent.runtime import _logs
from det_agent.runtime._logs import LineSplitter, LogBatcher
from det_agent.wire import split_rank


@pytest.mark.parametrize(
    ("chunks", "lines", "rest"),
    [
        ([b"a\nb\n"], ["a\n", "b\n"], []),
        ([b"a\r\nb\r\n"], ["a\n", "b\n"], []),
        ([b"10%\r20%\r30%\n"], ["10%\n", "20%\n", "30%\n"], []),
        ([b"a\r", b"\nb\n"], ["a\n", "b\n"], []),  # "\r\n" split across reads is one end
        ([b"a\r", b"b\n"], ["a\n", "b\n"], []),
        ([b"par", b"tial"], [], ["partial\n"]),
        ([b"x\r"], [], ["x\n"]),
        ([b"\n\n"], ["\n", "\n"], []),
        ([b"caf\xc3\xa9\n", b"bad\xff\n"], ["caf\u00e9\n", "bad\ufffd\n"], []),
        ([b""], [], []),
    ],
)
def test_splitter(chunks: list[bytes], lines: list[str], rest: list[str]) -> None:
    s = LineSplitter()
    got: list[str] = []
    for c in chunks:
        got += s.feed(c)
    assert got == lines
    assert s.finish() == rest


def test_long_lines_are_cut_at_the_limit() -> None:
    s = LineSplitter()
    mib = _logs.MAX_LINE_BYTES
    got = s.feed(b"x" * (2 * mib + 10) + b"\nnext\n")
    assert [len(line) for line in got] == [mib + 1, mib + 1, 11, 5]
    assert got[-1] == "next\n"


def test_long_line_arriving_in_small_reads_is_cut_too() -> None:
    s = LineSplitter(max_bytes=8)
    got: list[str] = []
    for _ in range(5):
        got += s.feed(b"abcd")
    assert got == ["abcdabcd\n", "abcdabcd\n"]
    assert s.finish() == ["abcd\n"]


def test_cut_never_splits_a_utf8_character() -> None:
    s = LineSplitter(max_bytes=8)
    got = s.feed("aaaaaaa\u00e9b\n".encode())  # the 2-byte é straddles byte 8
    assert got == ["aaaaaaa\n", "\u00e9b\n"]


def test_splitter_rejects_tiny_limit() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        LineSplitter(max_bytes=1)


@pytest.mark.parametrize(
    ("text", "rank", "rest"),
    [
        ("[rank=3] hello\n", 3, "hello\n"),
        (" [rank=0] x\n", 0, "x\n"),
        ("rank=3 hello\n", None, "rank=3 hello\n"),
        ("hello [rank=1]\n", None, "hello [rank=1]\n"),
    ],
)
def test_split_rank(text: str, rank: int | None, rest: str) -> None:
    assert split_rank(text) == (rank, rest)


def test_batcher_numbers_lines_and_flushes_by_size_and_time() -> None:
    async def scenario() -> list[list[tuple[int, str, str]]]:
        batches: list[list[tuple[int, str, str]]] = []

        def emit(allocation_id: str, lines: list) -> None:
            assert allocation_id == "a.1"
            batches.append([(line.seq, line.stdtype, line.log) for line in lines])

        b = LogBatcher("a.1", emit, clock=lambda: "T")
        b.add("stdout", [f"{i}\n" for i in range(_logs.FLUSH_LINES + 1)])
        assert len(batches) == 1  # a full batch goes out at once
        b.add("stderr", ["[rank=2] e\n"])
        await asyncio.sleep(_logs.FLUSH_INTERVAL * 3)
        assert len(batches) == 2  # the rest after the interval
        b.add("stdout", ["last\n"])
        b.close()
        return batches

    batches = asyncio.run(scenario())
    flat = [line for batch in batches for line in batch]
    assert [seq for seq, _, _ in flat] == list(range(_logs.FLUSH_LINES + 3))
    assert flat[_logs.FLUSH_LINES + 1] == (_logs.FLUSH_LINES + 1, "stderr", "e\n")
    assert batches[-1] == [(_logs.FLUSH_LINES + 2, "stdout", "last\n")]
