"""The checkpoint archive (``services.checkpoints.archive``) and the media types of the download
(``services.checkpoints.files.archive_type``): what is archived, what is left out, streaming."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import pytest

from det_jupyter.services.checkpoints.archive import ArchiveError, iter_archive, link_inside
from det_jupyter.services.checkpoints.files import UnsupportedArchive, archive_type


def _members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        return {m.name: m for m in tf.getmembers()}


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    (tmp_path / "secret").write_text("outside")
    root = tmp_path / "ck"
    (root / "sub" / "inner").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    (root / "sub" / "big.bin").write_bytes(os.urandom(300_000))
    (root / "alias").symlink_to("a.txt")
    (root / "sub" / "to-root").symlink_to("..")
    (root / "loop").symlink_to(".")
    (root / "abs").symlink_to(tmp_path / "secret")
    (root / "up").symlink_to("../secret")
    (root / "sneaky").symlink_to("loop/loop/../secret")  # lexically inside, really outside
    os.mkfifo(root / "fifo")
    return root


def test_files_dirs_and_inside_links_are_archived_and_the_rest_left_out(ckpt: Path) -> None:
    skipped: list[str] = []
    data = b"".join(
        iter_archive(ckpt, gzip=False, chunk=4096, on_skip=lambda p, why: skipped.append(p))
    )
    m = _members(data)
    assert sorted(m) == ["a.txt", "alias", "loop", "sub", "sub/big.bin", "sub/inner", "sub/to-root"]
    assert (m["alias"].issym(), m["alias"].linkname) == (True, "a.txt")
    assert m["sub/inner"].isdir() and m["sub/big.bin"].size == 300_000
    assert sorted(skipped) == ["abs", "fifo", "sneaky", "up"]
    assert len(data) % tarfile.RECORDSIZE == 0
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        got = tf.extractfile("sub/big.bin")
        assert got is not None and got.read() == (ckpt / "sub" / "big.bin").read_bytes()


def test_gzip_is_the_same_archive_gzipped(ckpt: Path) -> None:
    plain = b"".join(iter_archive(ckpt, gzip=False))
    zipped = b"".join(iter_archive(ckpt, gzip=True))
    assert zipped[:2] == b"\x1f\x8b" and gzip.decompress(zipped) == plain


def test_chunks_stay_about_the_chunk_size(ckpt: Path) -> None:
    sizes = [len(c) for c in iter_archive(ckpt, gzip=False, chunk=8192)]
    assert max(sizes) <= 8192 + tarfile.RECORDSIZE and len(sizes) > 300_000 // 8192


def test_a_symlinked_root_is_refused_before_any_byte(ckpt: Path, tmp_path: Path) -> None:
    (tmp_path / "link-root").symlink_to(ckpt)
    with pytest.raises(OSError):
        next(iter_archive(tmp_path / "link-root", gzip=True))


def test_a_file_that_shrinks_while_archived_breaks_the_archive(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 100_000)
    chunks = iter_archive(tmp_path, gzip=False, chunk=1000)
    next(chunks)  # the header: the file is open, its size taken
    os.truncate(tmp_path / "f", 10)
    with pytest.raises(ArchiveError, match="shrank"):
        for _ in chunks:
            pass


def test_closing_early_closes_every_descriptor(ckpt: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    chunks = iter_archive(ckpt, gzip=True, chunk=1000)
    for _ in range(5):
        next(chunks)
    assert len(os.listdir("/proc/self/fd")) > before
    chunks.close()
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.parametrize(
    ("link_dir", "target", "inside"),
    [
        ("", "a", True),
        ("sub/", "../a", True),
        ("sub/", "..", True),
        ("", "..", False),
        ("sub/", "../../x", False),
        ("", "/etc/passwd", False),
        ("", "", False),
    ],
)
def test_link_inside(tmp_path: Path, link_dir: str, target: str, inside: bool) -> None:
    (tmp_path / "sub").mkdir()
    assert link_inside(str(tmp_path), link_dir, target) is inside


@pytest.mark.parametrize(
    ("accept", "served"),
    [
        (None, "application/x-tar"),
        ("", "application/x-tar"),
        ("*/*", "application/x-tar"),
        ("application/*", "application/x-tar"),
        ("application/gzip", "application/gzip"),
        ("Application/X-Tar", "application/x-tar"),
        ("application/gzip; q=1", "application/gzip"),
    ],
)
def test_archive_type(accept: str | None, served: str) -> None:
    assert archive_type(accept) == served


@pytest.mark.parametrize("accept", ["application/zip", "text/html", "application/json"])
def test_archive_type_refuses_what_it_cannot_serve(accept: str) -> None:
    with pytest.raises(UnsupportedArchive, match="application/gzip") as err:
        archive_type(accept)
    assert err.value.status == 415
