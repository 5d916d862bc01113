"""Config templates: merge a stored template into a submitted config (pure).

Which rule, and why
-------------------
Determined's documentation (``config-templates.rst``, "Merge Behavior") says a list field is
the *concatenation* of the template's list and the config's. Determined's master does not do
that: it unmarshals both into the typed config and calls ``schemas.Merge(config, template)``
(``master/pkg/schemas/merge.go``), where a list is taken whole from the config when the config
sets it and from the template otherwise; only the types that implement ``Merge`` combine:

- ``bind_mounts`` and ``resources.devices``: the config's entries, then the template's entries
  whose ``container_path`` no config entry uses (two mounts on one path would be an unstable
  container, so the config's wins);
- ``environment.environment_variables``: the template's entries, then the config's, per
  device type (later ``KEY=VALUE`` entries override earlier ones, so the config wins a clash);
- ``environment.proxy_ports``: the config's entries, then the template's whose ``proxy_port``
  no config entry uses.

We follow the master's code, not the documentation's sentence: configs and templates that
users wrote against Determined were tested against that code, and concatenating every list
would break ordinary configs — an ``entrypoint: [python3, train.py]`` in both would run
``python3 train.py python3 eval.py``, a categorical hyperparameter's ``vals`` would gain the
template's choices, and ``add_capabilities`` could not be narrowed. The documented exceptions
(bind mounts and devices deduplicated by ``container_path``) hold in both readings.

The other rules are the documentation's and the code's alike: a key only one side has is
taken from that side; a mapping present on both sides is merged key by key, recursively; a
scalar (or a value whose type differs between the sides) is the config's. A ``null`` in the
config counts as unset (the template's value is kept), as Go's ``json.Unmarshal`` leaves a
nil pointer.

Union types follow ``schemas.UnionMerge``: when ``checkpoint_storage.type``,
``searcher.name`` or a hyperparameter's ``type`` differ between the sides, the config's
object is kept whole, plus only the fields common to every member of that union
(``save_*_best``/``save_trial_latest`` for storage; ``metric``, ``smaller_is_better``,
``source_*`` for the searcher) from the template. ``environment.image`` and
``environment.environment_variables`` may be a plain value or a per-device mapping; a plain
value meets a mapping as that value for every device type (``cpu``, ``cuda``, ``rocm``;
``gpu`` is read as ``cuda``), as their ``UnmarshalJSON`` does. ``environment.pod_spec`` is
merged like any mapping (the master uses Kubernetes' strategic merge patch there; lists in a
pod spec are the config's here).

A template may not itself name a template (``template:``): templates do not nest, and a
config uses at most one.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from det_jupyter.errors import InvalidConfig

_DEVICE_TYPES = ("cpu", "cuda", "rocm")

# path -> (discriminator key, fields shared by every member of the union)
_UNIONS: dict[tuple[str, ...], tuple[str, frozenset[str]]] = {
    ("checkpoint_storage",): ("type", frozenset({
        "save_experiment_best", "save_trial_best", "save_trial_latest"})),
    ("searcher",): ("name", frozenset({
        "metric", "smaller_is_better", "source_trial_id", "source_checkpoint_uuid"})),
}


def check_template_config(config: object) -> dict[str, Any]:
    """The template's config, if it can be one: a mapping with string keys that names no
    template of its own. Raises ``InvalidConfig`` saying what to change."""
    if not isinstance(config, dict):
        raise InvalidConfig(
            f"a template's config must be a YAML mapping (key: value lines), got "
            f"{_type_name(config)}"
        )
    for key in config:
        if not isinstance(key, str):
            raise InvalidConfig(f"a template's top-level keys must be names, got {key!r}")
    if "template" in config:
        raise InvalidConfig(
            "a template cannot use another template: remove the `template` key and copy the "
            "settings it would bring into this template", field="template")
    return config


def merge_template(template: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The effective config: ``config`` merged over ``template`` by the rules of this
    module's docstring. Neither input is changed; the result shares nothing with them."""
    check_template_config(template)
    if not isinstance(config, dict):
        raise InvalidConfig(f"the config must be a YAML mapping, got {_type_name(config)}")
    return _merge_maps(template, config, ())


def _merge(tpl: Any, cfg: Any, path: tuple[str, ...]) -> Any:
    if cfg is None:
        return copy.deepcopy(tpl)
    if tpl is None:
        return copy.deepcopy(cfg)
    special = _SPECIAL.get(path)
    if special is not None:
        return special(tpl, cfg)
    if isinstance(tpl, dict) and isinstance(cfg, dict):
        return _merge_union_or_maps(tpl, cfg, path)
    return copy.deepcopy(cfg)  # scalars, lists, and values whose types differ: the config's


def _merge_maps(tpl: dict[str, Any], cfg: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in cfg.items():
        out[key] = _merge(tpl.get(key), value, (*path, str(key))) if key in tpl else copy.deepcopy(value)
    for key, value in tpl.items():
        if key not in cfg:
            out[key] = copy.deepcopy(value)
    return out


def _merge_union_or_maps(tpl: dict[str, Any], cfg: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    union = _UNIONS.get(path)
    if union is None and len(path) >= 2 and path[0] == "hyperparameters":
        union = ("type", frozenset())
    if union is not None:
        key, common = union
        if tpl.get(key) != cfg.get(key) and (key in cfg or path[0] == "hyperparameters"):
            out = copy.deepcopy(cfg)
            for field in common:
                if out.get(field) is None and tpl.get(field) is not None:
                    out[field] = copy.deepcopy(tpl[field])
            return out
    return _merge_maps(tpl, cfg, path)


# -- the types with their own Merge -------------------------------------------------------


def _container_path(entry: Any) -> Any:
    if isinstance(entry, dict):
        return entry.get("container_path")
    if isinstance(entry, str):  # a device's short form HOST[:CONTAINER[:MODE]]
        parts = entry.split(":")
        return parts[1] if len(parts) > 1 else parts[0]
    return None


_Merger = Callable[[Any, Any], Any]


def _append_unclaimed(key: Callable[[Any], Any]) -> _Merger:
    """config's entries, then the template's whose ``key(entry)`` no config entry has."""

    def merge(tpl: Any, cfg: Any) -> Any:
        if not isinstance(tpl, list) or not isinstance(cfg, list):
            return copy.deepcopy(cfg)
        taken = {key(e) for e in cfg}
        return copy.deepcopy(cfg) + [copy.deepcopy(e) for e in tpl if key(e) not in taken]

    return merge


def _proxy_port(entry: Any) -> Any:
    return entry.get("proxy_port") if isinstance(entry, dict) else entry


def _per_device(value: Any) -> dict[str, Any]:
    """A plain value for every device type; a mapping with ``gpu`` read as ``cuda``."""
    if isinstance(value, dict):
        out = dict(value)
        if "gpu" in out and "cuda" not in out:
            out["cuda"] = out.pop("gpu")
        return out
    return {t: copy.deepcopy(value) for t in _DEVICE_TYPES}


def _merge_env_vars(tpl: Any, cfg: Any) -> Any:
    if isinstance(tpl, list) and isinstance(cfg, list):
        return copy.deepcopy(tpl) + copy.deepcopy(cfg)
    if not isinstance(tpl, (list, dict)) or not isinstance(cfg, (list, dict)):
        return copy.deepcopy(cfg)
    t, c = _per_device(tpl), _per_device(cfg)
    out: dict[str, Any] = {}
    for key in [*c, *(k for k in t if k not in c)]:
        tv, cv = t.get(key) or [], c.get(key) or []
        out[key] = (copy.deepcopy(tv) + copy.deepcopy(cv)
                    if isinstance(tv, list) and isinstance(cv, list) else copy.deepcopy(c.get(key, tv)))
    return out


def _merge_image(tpl: Any, cfg: Any) -> Any:
    if isinstance(tpl, dict) or isinstance(cfg, dict):
        if not isinstance(cfg, dict):
            return copy.deepcopy(cfg)  # a plain image in the config names every device type's
        return _merge_maps(_per_device(tpl), _per_device(cfg), ("environment", "image"))
    return copy.deepcopy(cfg)


_SPECIAL: dict[tuple[str, ...], _Merger] = {
    ("bind_mounts",): _append_unclaimed(_container_path),
    ("resources", "devices"): _append_unclaimed(_container_path),
    ("environment", "proxy_ports"): _append_unclaimed(_proxy_port),
    ("environment", "environment_variables"): _merge_env_vars,
    ("environment", "image"): _merge_image,
}


def _type_name(value: object) -> str:
    if value is None:
        return "nothing (null)"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)
