"""The proxy's own origin as pure values: which Host headers name a hostname, and the
redirect's Location built from one (reliability P4, W3)."""

from __future__ import annotations

import pytest

from det_jupyter.server_ext.proxy_server import origin_location
from det_jupyter.services.interactive.origins import ProxyOrigin, default_hostname, request_hostname

ORIGIN = ProxyOrigin("http", "127.0.0.1", 9100)


@pytest.mark.parametrize("host,expected", [
    ("127.0.0.1:8888", "127.0.0.1"),
    ("127.0.0.1", "127.0.0.1"),
    ("localhost:8888", "localhost"),
    ("LocalHost:1", "localhost"),
    ("evil.com", "evil.com"),  # the requester's own name for the server: only it is redirected
    ("gpu-box.lan:443", "gpu-box.lan"),
    ("[::1]:8888", "[::1]"),
    ("[::1]", "[::1]"),
])
def test_hostnames_are_taken_from_valid_host_headers(host: str, expected: str) -> None:
    assert request_hostname(host) == expected


@pytest.mark.parametrize("host", [
    None, "", "127.0.0.1@evil.com", "127.0.0.1:1/..//evil", "//evil", "/evil", "\\\\evil",
    "http://evil", "evil.com:80:81", "evil.com:", "evil.com:x", "evil.com:99999", "a..b",
    "-evil.com", "evil-.com", ".evil", "evil.com.", "ev il", "evil\r\nX: y", "evil%2ecom",
    "[::1", "[::1]x", "[::1]:", "[fe80::1%eth0]", "[evil.com]", "::1", "a" * 64 + ".com",
    "javascript:alert(1)", "evil.com#", "evil.com?", "user:pass@evil",
])
def test_anything_but_a_bare_host_and_port_is_refused(host: str | None) -> None:
    assert request_hostname(host) is None


def test_origin_urls_name_the_requests_hostname_with_the_proxy_port() -> None:
    assert ORIGIN.url("localhost:8888") == "http://localhost:9100"
    assert ORIGIN.url("127.0.0.1@evil.com") == "http://127.0.0.1:9100"  # malformed: the default
    assert ORIGIN.url(None) == "http://127.0.0.1:9100"
    assert ORIGIN.task_url("nb-1", "[::1]:8888") == "http://[::1]:9100/proxy/nb-1/"
    assert ORIGIN.task_url("a/b?c") == "http://127.0.0.1:9100/proxy/a%2Fb%3Fc/"
    assert ProxyOrigin("https", "h", 1).url() == "https://h:1"


@pytest.mark.parametrize("ip,expected", [
    ("", "127.0.0.1"), ("0.0.0.0", "127.0.0.1"), ("::", "127.0.0.1"), ("localhost", "localhost"),
    ("10.1.2.3", "10.1.2.3"), ("::1", "[::1]"),
])
def test_default_hostnames(ip: str, expected: str) -> None:
    assert default_hostname(ip) == expected


def test_locations_keep_path_and_query_below_proxy_only() -> None:
    tail = "/proxy/nb-1/lab/tree/a%20b?det_ticket=1.2.x&reset"
    assert origin_location(ORIGIN, "localhost", tail) == f"http://localhost:9100{tail}"
    for bad in ("//evil/proxy/x/", "/api/v1/me", "/proxy/nb-1/../../api", "/proxy/nb-1/%2e%2e/x",
                "http://evil/proxy/"):
        with pytest.raises(ValueError):
            origin_location(ORIGIN, "localhost", bad)
