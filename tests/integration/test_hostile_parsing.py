"""Hostile experiment configs against a real master: an alias bomb, configs and hyperparameters
nested past any use, a config over the size cap. Each is refused with a 4xx that names the cap,
nothing stored changes and no traceback reaches the caller or the log. And a config as large
as the cap allows is parsed off the event loop: other requests stay quick while it is."""

from __future__ import annotations

import os
import statistics
import threading
import time

import pytest
import yaml

from det_jupyter.config import MAX_ALIAS_NODES, MAX_CONFIG_BYTES, MAX_YAML_DEPTH
from tests._master import ApiError, Client, MasterProcess
from tests.integration._exp import counter_config

#: The issue's acceptance figure: the worst wait for ``GET /api/v1/master`` while the largest
#: allowed config is posted again and again.
MAX_LOOP_LAG_S = 0.25


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory):
    """One master for this module: every test checks its own before/after state."""
    m = MasterProcess(tmp_path_factory.mktemp("hostile-parsing")).start()
    yield m
    m.stop()


def _experiments(client: Client) -> list[int]:
    return [e["id"] for e in client.get("/api/v1/experiments")["experiments"]]


def _base(hyperparameters_yaml: str = "  x: 1.0\n", extra: str = "") -> str:
    return ("name: hostile\nentrypoint: python3 train.py\n"
            "searcher:\n  name: single\n  metric: validation_loss\n  max_length:\n    batches: 20\n"
            f"hyperparameters:\n{hyperparameters_yaml}{extra}")


def _alias_bomb(levels: int = 6, fan: int = 9) -> str:
    """The tester's bomb: each level a list of ``fan`` aliases of the one before, so a few
    hundred bytes expand to ``fan ** levels`` strings (six levels: 531,441)."""
    lines = ['l0: &l0 ["lol"]']
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan)}]")
    bomb = "".join(f"      {line}\n" for line in lines)
    return _base(f"  bomb:\n    type: const\n    val:\n{bomb}")


def _nested(depth: int) -> str:
    """A flow mapping ``depth`` levels deep."""
    return "{a: " * depth + "1" + "}" * depth


def _refused(master: MasterProcess, config: str, status: int = 400) -> str:
    """Post ``config``: it must be refused with ``status`` and change nothing; returns the message."""
    client = master.admin()
    before = _experiments(client)
    mark = len(master.log())
    with pytest.raises(ApiError) as err:
        client.post("/api/v1/experiments", {"config": config, "modelDefinition": []}, timeout=60)
    assert err.value.status == status, err.value.body
    body = err.value.body
    assert isinstance(body, dict) and body.get("message"), body
    assert "Traceback" not in str(body)
    assert _experiments(client) == before
    assert "Traceback" not in master.log()[mark:]
    return body["message"]


def test_alias_bomb_is_refused_naming_the_cap(master: MasterProcess) -> None:
    config = _alias_bomb()
    assert len(config) < 1024  # a few hundred bytes of YAML...
    message = _refused(master, config)  # ...that would be half a million values written out
    assert "alias" in message and f"{MAX_ALIAS_NODES:,}" in message


def test_a_config_with_a_few_honest_anchors_is_accepted(master: MasterProcess) -> None:
    config = _base(
        "  opt: &opt {type: categorical, vals: [sgd, adam]}\n"
        "  opt2: *opt\n"
        "  base: &base {type: const, val: 1}\n"
        "  merged: {<<: *base, val: 2}\n")
    answer = master.admin().post("/api/v1/experiments",
                                 {"config": config, "modelDefinition": [], "validateOnly": True})
    hps = answer["config"]["hyperparameters"]
    assert hps["opt2"] == hps["opt"] == {"type": "categorical", "vals": ["sgd", "adam"]}
    assert hps["merged"] == {"type": "const", "val": 2}


def test_deeply_nested_config_is_refused_naming_the_depth(master: MasterProcess) -> None:
    message = _refused(master, _base(extra=f"data: {_nested(2000)}\n"))
    assert "nested" in message and str(MAX_YAML_DEPTH) in message


def test_deeply_nested_hyperparameters_are_refused_naming_the_depth(master: MasterProcess) -> None:
    # Hyperparameter groups nest (a mapping without `type` is a group): 2,000 of them.
    group = "{g: " * 2000 + "{type: const, val: 1}" + "}" * 2000
    message = _refused(master, _base(f"  deep: {group}\n"))
    assert "nested" in message and str(MAX_YAML_DEPTH) in message


def test_nesting_just_under_the_cap_is_accepted(master: MasterProcess) -> None:
    # data sits at depth 1, so the config's deepest mapping is at MAX_YAML_DEPTH exactly.
    config = _base(extra=f"data: {_nested(MAX_YAML_DEPTH - 1)}\n")
    answer = master.admin().post("/api/v1/experiments",
                                 {"config": config, "modelDefinition": [], "validateOnly": True})
    assert answer["config"]["data"]["a"]["a"]


def test_config_over_the_size_cap_is_a_413_naming_the_limit(master: MasterProcess) -> None:
    pad = "# " + "x" * 1000 + "\n"
    config = counter_config() + pad * (MAX_CONFIG_BYTES // len(pad) + 1)
    message = _refused(master, config, status=413)
    assert "0.50 MiB" in message


def test_malformed_yaml_names_line_and_column(master: MasterProcess) -> None:
    message = _refused(master, "name: x\nsearcher: [unclosed\n")
    assert "line" in message and "column" in message


def _largest_config() -> str:
    """A realistic config just under the size cap: thousands of hyperparameters, each a
    categorical with a long list of values or a range."""
    head = _base("")
    parts = [head]
    size = len(head.encode())
    i = 0
    while True:
        block = (f"  layer_{i:05d}:\n    type: categorical\n    vals: ["
                 + ", ".join(str(round(0.001 * (i + k), 4)) for k in range(16)) + "]\n"
                 f"  dropout_{i:05d}:\n    type: double\n    minval: 0.0\n    maxval: 0.5\n")
        if size + len(block) > MAX_CONFIG_BYTES - 1024:
            break
        parts.append(block)
        size += len(block)
        i += 1
    return "".join(parts)


def test_the_largest_config_does_not_hold_up_other_requests(master: MasterProcess) -> None:
    """While the largest allowed config is posted again and again, ``GET /api/v1/master``
    never waits more than ``MAX_LOOP_LAG_S`` (the pure-Python parser on the event loop held
    every request for 37-46 s on a 1.4 MB config)."""
    config = _largest_config()
    assert MAX_CONFIG_BYTES - 4096 < len(config.encode()) < MAX_CONFIG_BYTES
    client = master.admin()
    posted: list[float] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def post() -> None:
        try:
            while not stop.is_set():
                start = time.perf_counter()
                answer = client.post("/api/v1/experiments",
                                     {"config": config, "modelDefinition": [], "activate": False}, timeout=120)
                posted.append(time.perf_counter() - start)
                assert len(answer["config"]["hyperparameters"]) == len(yaml.load(config, Loader=yaml.CSafeLoader)
                                                                       ["hyperparameters"])
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    poster = threading.Thread(target=post, daemon=True)
    poster.start()
    lags: list[float] = []
    deadline = time.monotonic() + 120
    try:
        while (len(posted) < 3 or len(lags) < 50) and time.monotonic() < deadline and not errors:
            start = time.perf_counter()
            client.get("/api/v1/master")
            lags.append(time.perf_counter() - start)
            time.sleep(0.02)
    finally:
        stop.set()
        poster.join(timeout=180)
    assert not errors, errors
    assert len(posted) >= 3, f"only {len(posted)} of the largest configs were created in 120 s"
    worst = max(lags)
    print(f"\nloop lag while posting a {len(config.encode()) / 2**20:.2f} MiB config: "
          f"worst {worst * 1000:.0f} ms, median {statistics.median(lags) * 1000:.0f} ms over {len(lags)} "
          f"requests; each create took {min(posted):.1f}-{max(posted):.1f} s")
    # A wall-clock figure: asserted only in the measured run (DET_LOOP_LAG_STRICT=1 on an idle
    # machine), as CI's shared cores make it noise; the figure is printed either way.
    if os.environ.get("DET_LOOP_LAG_STRICT") == "1":
        assert worst <= MAX_LOOP_LAG_S, f"GET /api/v1/master waited {worst * 1000:.0f} ms"
