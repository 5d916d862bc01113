"""interactive._common.with_reported_host: a task's own proxy address keeps the master's port."""

from __future__ import annotations

import pytest

from det_jupyter.services.interactive._common import with_reported_host


@pytest.mark.parametrize("current, reported, expected", [
    ("10.0.0.5:2700", "10.244.1.7", "10.244.1.7:2700"),  # 0.38.1's pods: the pod IP, no port
    ("10.0.0.5:2700", " 10.244.1.7 ", "10.244.1.7:2700"),
    ("10.0.0.5:2700", "10.244.1.7:9999", "10.244.1.7:2700"),  # its port is not the task's
    ("node-a:2700", "pod-b.ns.svc", "pod-b.ns.svc:2700"),
    ("10.0.0.5:2700", "fd00::7", "[fd00::7]:2700"),
    ("10.0.0.5:2700", "[fd00::7]:1", "[fd00::7]:2700"),
    ("[fd00::1]:2700", "10.1.1.1", "10.1.1.1:2700"),
])
def test_the_reported_host_with_the_masters_port(current: str, reported: str, expected: str) -> None:
    assert with_reported_host(current, reported) == expected


@pytest.mark.parametrize("reported", ["", "   ", "evil.com/path", "user@host", "a b", "http://x", "[zz::]",
                                      "-leading-dash"])
def test_what_is_no_host_is_refused(reported: str) -> None:
    with pytest.raises(ValueError, match="proxyAddress must be a host name or IP address"):
        with_reported_host("10.0.0.5:2700", reported)


def test_an_address_without_a_port_has_nothing_to_keep() -> None:
    with pytest.raises(ValueError, match="no port to keep"):
        with_reported_host("10.0.0.5", "10.0.0.6")
