"""The guard in front of Jupyter's own routes as pure values: origins, where a ``Location``
takes a browser, and which requests are refused (issue 25, part 6)."""

from __future__ import annotations

import pytest
from tornado.httputil import HTTPHeaders, HTTPServerRequest, RequestStartLine

from det_jupyter.server_ext.jupyter_guard import (
    LOGIN_MAX_BODY,
    Guard,
    OriginPolicy,
    location_origin,
    normalize_origin,
    trailing_slash_target,
)

OWN = "http://127.0.0.1:8080"


@pytest.mark.parametrize("value,expected", [
    ("http://127.0.0.1:8080", OWN),
    ("HTTP://LocalHost:8080", "http://localhost:8080"),
    ("http://127.0.0.1:80", "http://127.0.0.1"),
    ("https://h:443", "https://h"),
    ("https://h:8443", "https://h:8443"),
    ("http://[::1]:8080", "http://[::1]:8080"),
    ("http://gpu_01.lan", "http://gpu_01.lan"),
])
def test_origins_are_normalized(value: str, expected: str) -> None:
    assert normalize_origin(value) == expected


@pytest.mark.parametrize("value", [
    None, "", "null", "127.0.0.1:8080", "//127.0.0.1:8080", "http://127.0.0.1:8080/",
    "http://127.0.0.1:8080/x", "http://127.0.0.1:8080?", "http://127.0.0.1:8080#",
    "http://u@127.0.0.1:8080", "http://u:p@127.0.0.1", "ftp://127.0.0.1", "javascript:alert(1)",
    "http://127.0.0.1:99999", "http://127.0.0.1:x", "http:/127.0.0.1", "http:\\\\127.0.0.1",
    "http://127.0.0.1\r\nX: y", "http://evil%2ecom", "http://a b", "file://", "http://",
])
def test_anything_but_an_origin_is_none(value: str | None) -> None:
    assert normalize_origin(value) is None


@pytest.mark.parametrize("location,expected", [
    ("/lab", ""), ("/login?next=%2Flab", ""), ("lab/tree", ""), ("?a=1", ""), ("#x", ""),
    ("/%5Cevil.com", ""), ("/evil.com", ""), ("evil.com", ""),
    ("http://127.0.0.1:8080/lab", OWN), ("https://evil.com/x", "https://evil.com"),
    # What a browser reads as another host, or cannot place: never on-site.
    ("//evil.com", None), ("/\\evil.com", None), ("\\\\evil.com", None), ("/\t/evil.com", None),
    (" //evil.com", None), ("\x01//evil.com", None), ("http:/\\evil.com", "http://evil.com"),
    ("http:evil.com", None), ("https:///evil.com", None), ("javascript:alert(1)", None),
    ("http://evil.com@127.0.0.1:8080/", None), ("/x\x00y", None),
])
def test_where_a_location_takes_a_browser(location: str, expected: str | None) -> None:
    assert location_origin(location) == expected


@pytest.mark.parametrize("path,target", [
    ("/lab/", "/lab"), ("//evil.com/", "/evil.com"), ("/\\evil.com/", "/\\evil.com"), ("/", "/"),
])
def test_the_trailing_slash_handlers_rule(path: str, target: str) -> None:
    assert trailing_slash_target(path) == target


def test_only_the_requests_own_origin_passes_by_default() -> None:
    policy = OriginPolicy()
    assert policy.allows(OWN, OWN)
    assert policy.allows("HTTP://127.0.0.1:8080", OWN)
    for foreign in ("https://127.0.0.1:8080", "http://127.0.0.1:8081", "http://localhost:8080",
                    "null", "https://evil.example", "", "*", "http://127.0.0.1:8080/"):
        assert not policy.allows(foreign, OWN), foreign
    assert not policy.allows(OWN, None)  # a malformed Host: nothing is its own origin


def test_the_operators_allowances_add_to_the_own_origin() -> None:
    assert OriginPolicy(allow_origin="*").allows("https://anything", OWN)
    exact = OriginPolicy(allow_origin="https://app.example")
    assert exact.allows("https://APP.example", OWN) and exact.allows(OWN, OWN)
    assert not exact.allows("https://app.example.evil", OWN)
    pat = OriginPolicy(allow_origin_pat=r"https://.*\.corp\.example$")
    assert pat.allows("https://lab.corp.example", OWN)
    assert not pat.allows("https://corp.example.evil", OWN)
    assert pat.redirect_allowed("https://lab.corp.example/x", OWN)
    with pytest.raises(ValueError, match="allow_origin_pat"):
        OriginPolicy(allow_origin_pat="(")


def _request(uri: str, headers: dict[str, str] | None = None, method: str = "GET",
             protocol: str = "http") -> HTTPServerRequest:
    request = HTTPServerRequest(start_line=RequestStartLine(method, uri, "HTTP/1.1"),
                                headers=HTTPHeaders({"Host": "127.0.0.1:8080", **(headers or {})}))
    request.protocol = protocol
    return request


GUARD = Guard(OriginPolicy(), [r"/api/v1/.*", r"/proxy/([^/]+)/(.*)", r"/info"], "/")


@pytest.mark.parametrize("uri,headers,status", [
    ("/api/contents", {"Origin": "https://evil.example"}, 403),
    ("/api/contents", {"Origin": "https://127.0.0.1:8080"}, 403),  # scheme checked
    ("/api/contents", {"Origin": "http://127.0.0.1:9999"}, 403),   # port checked
    ("/api/contents", {"Origin": "null"}, 403),
    ("/api/kernels", {"Origin": "http://127.0.0.1:8080, https://evil"}, 403),
    ("/login?next=%0d%0aSet-Cookie:x=1", {}, 400),
    ("/login?a=1&next=/lab%0a", {}, 400),
    ("/\\evil.com/", {}, 404),
    ("/\\evil.com/?x=1", {}, 404),
])
def test_refused(uri: str, headers: dict[str, str], status: int) -> None:
    refusal = GUARD.refusal(_request(uri, headers))
    assert refusal is not None and refusal[0] == status, refusal


@pytest.mark.parametrize("uri,headers", [
    ("/api/contents", {}),
    ("/api/contents", {"Origin": OWN}),
    ("/api/contents", {"Origin": "http://127.0.0.1:8080", "X-Forwarded-Proto": "https"}),
    ("/login?next=%2Flab", {}),
    ("/%5Cevil.com/", {}), ("//evil.com/", {}), ("/lab/", {}),
    # det's own routes keep their own policy.
    ("/api/v1/me", {"Origin": "https://evil.example"}),
    ("/proxy/nb-1/\\evil/", {"Origin": "https://evil.example"}),
    ("/info?next=%0a", {}),
])
def test_let_through(uri: str, headers: dict[str, str]) -> None:
    assert GUARD.refusal(_request(uri, headers)) is None


def test_the_scheme_is_the_listeners() -> None:
    """``https`` only where the request came over TLS (or a trusted X-Forwarded-Proto, which
    tornado applies to ``request.protocol`` before routing)."""
    assert GUARD.refusal(_request("/api/contents", {"Origin": "https://127.0.0.1:8080"}, protocol="https")) is None
    assert GUARD.refusal(_request("/api/contents", {"Origin": OWN}, protocol="https")) is not None


def test_the_login_form_gets_a_small_body_limit() -> None:
    assert GUARD.body_limit(_request("/login", method="POST")) == LOGIN_MAX_BODY
    assert GUARD.body_limit(_request("/api/contents/x", method="PUT")) is None
    under_base = Guard(OriginPolicy(), [], "/jupyter/")
    assert under_base.body_limit(_request("/jupyter/login", method="POST")) == LOGIN_MAX_BODY
    assert under_base.body_limit(_request("/login", method="POST")) is None
