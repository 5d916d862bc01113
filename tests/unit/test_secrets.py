"""Secrets the master generates into its data dir."""

from __future__ import annotations


def test_generated_secrets_never_look_like_an_option(tmp_path) -> None:
    """`det-agent --token "$(cat agent_token)"` must work whatever token was generated."""
    from det_jupyter.services.master import load_or_create_secret

    tokens = [load_or_create_secret(str(tmp_path / f"s{i}")) for i in range(200)]
    assert not any(t.startswith("-") for t in tokens) and len(set(tokens)) == 200
    assert load_or_create_secret(str(tmp_path / "s0")) == tokens[0]  # kept across starts
