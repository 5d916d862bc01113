"""load_yaml: YAML text that would flood, stall or crash the master is a 400 (or a 413 for its
size) that names the limit; honest configs load as before, with libyaml."""

from __future__ import annotations

import time

import pytest
import yaml

from det_jupyter.config import (
    MAX_ALIAS_NODES,
    MAX_CONFIG_BYTES,
    MAX_YAML_DEPTH,
    load_yaml,
    parse_yaml,
)
from det_jupyter.config.resources import load_master_config
from det_jupyter.errors import InvalidConfig, PayloadTooLarge


def alias_bomb(levels: int) -> str:
    """The tester's bomb: each level an anchored list of nine aliases of the one before
    (9**levels scalars once expanded; 6 levels were a 94 MB answer)."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def nested(depth: int, leaf: str = "1") -> str:
    """``depth`` levels of flow lists around ``leaf``."""
    return "[" * depth + leaf + "]" * depth


def big_config(size: int) -> str:
    """A realistic config of at most ``size`` bytes: many hyperparameters with long lists."""
    head = ("name: big\nentrypoint: python3 train.py\n"
            "searcher: {name: single, metric: loss, max_length: {batches: 20}}\nhyperparameters:\n")
    parts, total, i = [head], len(head), 0
    while True:
        block = f"  table_{i:05d}:\n    type: const\n    val:\n" + "".join(
            f"      - {((i * 40 + j) % 9973) / 9973:.6f}\n" for j in range(40))
        if total + len(block) > size:
            return "".join(parts)
        parts.append(block)
        total += len(block)
        i += 1


# -- aliases ------------------------------------------------------------------------------------

@pytest.mark.parametrize("levels", [6, 9])
def test_alias_bomb_is_a_400_naming_the_cap(levels: int) -> None:
    text = alias_bomb(levels)
    assert len(text) < 600
    start = time.perf_counter()
    with pytest.raises(InvalidConfig) as err:
        load_yaml(text)
    assert time.perf_counter() - start < 1.0
    assert err.value.status == 400
    message = err.value.message
    assert f"{MAX_ALIAS_NODES:,}" in message and "write the repeated value out" in message
    assert "line" in message and "\n" not in message


def test_honest_anchors_still_load() -> None:
    text = ("defaults: &defaults {lr: 0.1, layers: [64, 64]}\n"
            "hyperparameters:\n  <<: *defaults\n  dropout: 0.5\n"
            "other: *defaults\nname: &n exp\ndescription: *n\n")
    assert load_yaml(text) == {
        "defaults": {"lr": 0.1, "layers": [64, 64]},
        "hyperparameters": {"lr": 0.1, "layers": [64, 64], "dropout": 0.5},
        "other": {"lr": 0.1, "layers": [64, 64]},
        "name": "exp",
        "description": "exp",
    }


def test_aliases_up_to_the_cap_load() -> None:
    # 1,000 aliases of a 99-value list: 99,000 values added, under the cap; 1,020 are over it.
    anchor = "a: &a [" + ", ".join(["1"] * 98) + "]\n"
    data = load_yaml(anchor + "b: [" + ", ".join(["*a"] * 1000) + "]\n")
    assert len(data["b"]) == 1000 and data["b"][0] == [1] * 98
    with pytest.raises(InvalidConfig, match=f"more than {MAX_ALIAS_NODES:,} values"):
        load_yaml(anchor + "b: [" + ", ".join(["*a"] * 1020) + "]\n")


@pytest.mark.parametrize("text", ["a: &a [1, *a]\n", "a: &a {b: *a}\n", "&a [[[*a]]]\n"])
def test_a_value_that_contains_itself_is_refused(text: str) -> None:
    with pytest.raises(InvalidConfig, match="cannot contain itself"):
        load_yaml(text)


def test_undefined_alias_is_a_yaml_error_with_its_position() -> None:
    with pytest.raises(InvalidConfig, match=r"line 2, column 4: found undefined alias"):
        load_yaml("a: 1\nb: *nope\n")


# -- nesting ------------------------------------------------------------------------------------

def test_nesting_up_to_the_cap_loads() -> None:
    value: object = 1
    for _ in range(MAX_YAML_DEPTH):
        value = [value]
    assert load_yaml(nested(MAX_YAML_DEPTH)) == value


@pytest.mark.parametrize("depth", [MAX_YAML_DEPTH + 1, 1000, 100_000])
def test_deeper_nesting_is_a_400_naming_the_depth(depth: int) -> None:
    with pytest.raises(InvalidConfig, match=f"nested too deeply at line 1, column {MAX_YAML_DEPTH + 1}: "
                                            f"at most {MAX_YAML_DEPTH} levels"):
        load_yaml(nested(depth))


def test_deep_block_mappings_are_refused() -> None:
    text = "".join("  " * i + f"k{i}:\n" for i in range(40)) + "  " * 40 + "v\n"
    with pytest.raises(InvalidConfig, match=f"at most {MAX_YAML_DEPTH} levels"):
        load_yaml(text)


def test_an_alias_counts_its_anchor_depth() -> None:
    # The anchor is 20 levels deep; aliased 12 levels down in a mapping that is 1 more: 33.
    with pytest.raises(InvalidConfig, match=f"nested too deeply at line 2.*at most {MAX_YAML_DEPTH} levels"):
        load_yaml(f"a: &a {nested(20)}\nb: {nested(12, '*a')}\n")
    assert load_yaml(f"a: &a {nested(20)}\nb: {nested(11, '*a')}\n")["b"] is not None


# -- size ---------------------------------------------------------------------------------------

def test_text_over_the_size_cap_is_a_413_naming_both_sizes() -> None:
    text = "a: 1\n" + "#" * MAX_CONFIG_BYTES
    with pytest.raises(PayloadTooLarge) as err:
        load_yaml(text)
    assert err.value.status == 413
    message = err.value.message
    assert "0.50 MiB" in message and f"{len(text):,} bytes" in message
    assert message.startswith("the experiment config is")


def test_the_size_cap_counts_utf8_bytes() -> None:
    assert load_yaml("a: é\n", max_bytes=7) == {"a": "é"}  # 6 bytes
    with pytest.raises(PayloadTooLarge, match=r"\(8 bytes\)"):
        load_yaml("a: éé\n", max_bytes=7)


# -- errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "where"), [
    ("entrypoint: a\nsearcher:\n  name: single\n metric: x\n", "line 4, column 2"),
    ("a: [1, 2\nb: 3\n", "line 2, column 2"),
    ("a: b: c\n", "line 1, column 5"),
    ("a: 1\n---\nb: 2\n", "line 2, column 1"),
])
def test_parse_errors_name_line_and_column(text: str, where: str) -> None:
    with pytest.raises(InvalidConfig) as err:
        load_yaml(text, what="the master config")
    message = err.value.message
    assert message.startswith(f"the master config is not valid YAML at {where}: ")
    assert "Traceback" not in message and "\n" not in message


# -- values -------------------------------------------------------------------------------------

def test_values_are_what_json_holds() -> None:
    text = "day: 2024-05-01\nwhen: 2024-05-01 10:20:30\nbig: 9223372036854775807\nf: 1e3\nn: ~\n"
    assert load_yaml(text) == {"day": "2024-05-01", "when": "2024-05-01 10:20:30",
                               "big": 2**63 - 1, "f": "1e3", "n": None}


@pytest.mark.parametrize(("text", "match"), [
    ("a: " + "9" * 5000 + "\n", "an integer of 5,000 characters"),
    ('a: [ok, "x\\0y"]\n', r"line 1, column 9 holding a NUL character"),
    ("a: !!binary aGVsbG8=\n", "the tag !!binary at line 1, column 4"),
    ("a: !!set {x}\n", "the tag !!set"),
    ("a: !!python/object:os.system x\n", "the tag !!python/object:os.system"),
])
def test_values_no_json_column_holds_are_refused(text: str, match: str) -> None:
    with pytest.raises(InvalidConfig, match=match):
        load_yaml(text)


# -- the callers --------------------------------------------------------------------------------

def test_parse_yaml_and_master_yaml_use_the_limits() -> None:
    with pytest.raises(InvalidConfig, match="the experiment config's aliases"):
        parse_yaml(alias_bomb(9))
    with pytest.raises(InvalidConfig, match="the experiment config is nested too deeply"):
        parse_yaml("hyperparameters: " + "{g: " * 2000 + "1" + "}" * 2000 + "\n")
    with pytest.raises(ValueError, match="the master config's aliases"):
        load_master_config(alias_bomb(9))
    with pytest.raises(ValueError, match="the master config is nested too deeply"):
        load_master_config(f"resource_pools: {nested(40)}\n")
    with pytest.raises(ValueError, match=r"the master config is not valid YAML at line 1, column \d+"):
        load_master_config("resource_manager: [\n")


def test_the_largest_config_parses_with_libyaml() -> None:
    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML was built without libyaml (no yaml.CSafeLoader); install a PyYAML wheel that has it")
    text = big_config(MAX_CONFIG_BYTES - 1024)
    assert MAX_CONFIG_BYTES - 60_000 < len(text.encode()) <= MAX_CONFIG_BYTES
    data = parse_yaml(text)
    assert data == yaml.load(text, Loader=yaml.CSafeLoader)
    assert len(data["hyperparameters"]) > 300
