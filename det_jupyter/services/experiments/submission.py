"""Experiment submission (``det experiment create``), in one call.

A submission is checked and prepared (config parsed, merged with its template, validated,
expanded; the context packed) once the caller may create experiments in its project, then
stored: as an experiment the master searches and schedules, as an unmanaged one that a
process outside the cluster reports into, or not at all (``validate_only``). The heavy,
pure steps run in threads (a config may be megabytes, a context tens); the checks and
writes of shared state stay on the event loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from ...config import merge_template, parse_yaml
from ...errors import Conflict, DetError
from ..access.authz import Perm
from . import continuation
from .service import PreparedExperiment

if TYPE_CHECKING:
    from ...rm.base import ResourceManager
    from ..access.resolver import Caller
    from ..workspaces.service import WorkspaceService
    from .service import ExperimentService
    from .templates import TemplateService
    from .views import ExperimentView, Views


#: (workspace id, workspace name, workload type, config) -> the config as admitted; raises
#: InvalidRequest when a config policy or a pool binding refuses it.
Admit = Callable[[int, str, str, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Submission:
    """A ``v1CreateExperimentRequest``, its types checked by the handler."""

    config_text: str
    files: list[dict[str, Any]] = field(default_factory=list)
    template: str | None = None
    project_id: int | None = None
    activate: bool = True
    validate_only: bool = False
    unmanaged: bool = False


@dataclass(frozen=True)
class Submitted:
    """What a submission became: ``view`` is None for ``validate_only``; ``warnings`` (why
    its trials may never be placed) is None unless it was stored to be scheduled."""

    prepared: PreparedExperiment
    project_id: int
    view: ExperimentView | None = None
    warnings: list[str] | None = None


def parsed_or_error(text: str) -> tuple[dict[str, Any], DetError | None]:
    """The config parsed (``parse_yaml``: bounded, libyaml), or ``{}`` and why it could not
    be: the empty mapping still locates the project, the error is raised once the caller may
    create experiments there. Pure and heavy (a config may be megabytes): run in a thread."""
    try:
        return parse_yaml(text), None
    except DetError as exc:
        return {}, exc


def merged_yaml(template: dict[str, Any], config: dict[str, Any]) -> str:
    """The config with the template merged in, as YAML again (what gets stored)."""
    return yaml.safe_dump(merge_template(template, config), sort_keys=False)


class ExperimentSubmission:
    """Checks, prepares and stores submitted experiments."""

    def __init__(self, experiments: ExperimentService, views: Views, workspaces: WorkspaceService,
                 templates: TemplateService, rm: ResourceManager, admit: Admit | None = None) -> None:
        self._experiments = experiments
        self._admit = admit
        self._views = views
        self._workspaces = workspaces
        self._templates = templates
        self._rm = rm

    async def expand_template(self, caller: Caller, name: str, config_text: str) -> str:
        """``config_text`` with template ``name`` merged in, once the caller may view it (the
        expanded config is stored, so later template edits do not change it)."""
        loop = asyncio.get_running_loop()
        config = await loop.run_in_executor(None, parse_yaml, config_text)
        caller.authorize_template(name, Perm.VIEW_TEMPLATES)
        template = self._templates.get(name).config
        return await loop.run_in_executor(None, merged_yaml, template, config)

    async def prepare(self, caller: Caller, sub: Submission) -> tuple[PreparedExperiment, int]:
        """The submission checked, merged with its template and expanded, once the caller may
        create experiments in its project; the prepared experiment and that project."""
        config_text = sub.config_text
        if sub.template:  # the merged config is what gets stored (later edits don't matter)
            config_text = await self.expand_template(caller, sub.template, config_text)
        loop = asyncio.get_running_loop()
        raw, bad_config = await loop.run_in_executor(None, parsed_or_error, config_text)
        project_id = self._workspaces.project_for_create(
            sub.project_id, raw, visible=caller.visible_workspaces(Perm.VIEW_PROJECT))
        caller.authorize_project(project_id, Perm.CREATE_EXPERIMENT)
        if bad_config is not None:
            raise bad_config
        if self._admit is not None:  # config policies and pool bindings of the workspace
            project = self._workspaces.get_project(project_id)
            admitted = self._admit(project.workspace_id, project.workspace_name, "EXPERIMENT", raw)
            if admitted is not raw:
                raw, config_text = admitted, yaml.safe_dump(admitted, sort_keys=False)
        prepared = await loop.run_in_executor(None, functools.partial(
            self._experiments.prepare, config_text, sub.files, validate_only=sub.validate_only, raw=raw,
            unmanaged=sub.unmanaged))
        # Warm start: the source must be one the caller may read (404 as for any other).
        searcher = prepared.config.get("searcher") or {}
        if searcher.get("source_trial_id") is not None:
            caller.authorize_trial(int(searcher["source_trial_id"]), Perm.VIEW_EXPERIMENT_ARTIFACTS)
        elif searcher.get("source_checkpoint_uuid") is not None:
            caller.authorize_checkpoint(str(searcher["source_checkpoint_uuid"]), Perm.VIEW_EXPERIMENT_ARTIFACTS)
        return prepared, project_id

    async def submit(self, caller: Caller, sub: Submission) -> Submitted:
        """Prepare the submission and store it as it asks (see the module's docstring)."""
        prepared, project_id = await self.prepare(caller, sub)
        if sub.validate_only:
            return Submitted(prepared, project_id)
        if sub.unmanaged:
            exp_id = self._experiments.unmanaged.create_experiment(caller.user, prepared, project_id)
            return Submitted(prepared, project_id, self._view(exp_id))
        exp_id = self._experiments.store(caller.user, prepared, activate=sub.activate, project_id=project_id)
        await asyncio.sleep(0)  # let the requests that queued meanwhile go first
        view = self._view(exp_id)
        res = prepared.config.get("resources") or {}
        warnings = self._rm.launch_warnings(res.get("resource_pool") or "", int(res.get("slots_per_trial", 1)))
        return Submitted(prepared, project_id, view, warnings)

    async def continue_experiment(self, caller: Caller, exp_id: int, override_text: str) -> ExperimentView:
        """``det e continue`` (0.38.1's ``ContinueExperiment``): the override merged onto the
        experiment's config (``continuation.merge_override``), admitted and checked as a
        create's config is, then the search continued (``ExperimentService.continue_search``).
        The caller's right to edit the experiment is the handler's check."""
        exp = self._experiments.get(exp_id)
        if exp.unmanaged:  # before its config is checked: it has no entrypoint to check
            raise Conflict(f"cannot continue experiment {exp_id}: it is unmanaged (its trials run outside the "
                           "cluster, in the process that reports them)")
        merged = continuation.merge_override(exp.config, override_text)
        if self._admit is not None:  # config policies and pool bindings of its workspace
            project = self._workspaces.get_project(exp.project_id)
            merged = self._admit(project.workspace_id, project.workspace_name, "EXPERIMENT", merged)
        loop = asyncio.get_running_loop()
        prepared = await loop.run_in_executor(None, functools.partial(
            self._experiments.prepare, yaml.safe_dump(merged, sort_keys=False), [], raw=merged))
        self._experiments.continue_search(exp_id, prepared.config)
        return self._view(exp_id)

    def _view(self, exp_id: int) -> ExperimentView:
        view = self._views.experiment(exp_id)
        assert view is not None  # just stored, on this loop
        return view
