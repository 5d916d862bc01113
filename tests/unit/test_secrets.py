"""Secrets the master generates into its data dir."""

from __future__ import annotations


def test_generated_secrets_never_look_like_an_option(tmp_path) -> None:
    """`det-agent --token "$(cat agent_token)"` must work whatever token was generated."""
    from det_jupyter.composition_root import load_or_create_secret

    tokens = [load_or_create_secret(str(tmp_path / f"s{i}")) for i in range(200)]
    assert not any(t.startswith("-") for t in tokens) and len(set(tokens)) == 200
    assert load_or_create_secret(str(tmp_path / "s0")) == tokens[0]  # kept across starts


def test_bearer_tokens_never_look_like_an_option() -> None:
    """`det token login TOKEN`: one random URL-safe token in 64 starts with "-"; 5,000 of them
    would include one with near certainty."""
    from det_jupyter.services.accounts.auth import new_token

    tokens = [new_token() for _ in range(5000)]
    assert not [t for t in tokens if t.startswith("-")]
    assert len(set(tokens)) == len(tokens) and all(len(t) == 43 for t in tokens)
