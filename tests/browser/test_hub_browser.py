"""Issue 30 in headless Chromium: a real JupyterHub 6 (DummyAuthenticator, configurable-http-
proxy) whose spawner is ``det``, in front of a real master (tests/_hub.py).

- alice signs in at the hub; her server (a det notebook task) opens JupyterLab through the hub's
  proxy; a ``%det e list`` cell there lists her experiment, not bob's (each in a workspace only
  its owner sees), with no det login; the det sidebar shows the same, with no login either.
- Single sign-on: signed in at the hub, alice opens her det notebook's link on the master
  (``/proxy/<id>/``) and lands in it, through the hub's OAuth; bob, signed in as himself, gets
  the proxy's 404 for the same link. A hub admin signs in to the master's own JupyterLab with
  "Sign in with JupyterHub"; alice, not an admin, is told why not.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from det_jupyter.services.access.authz import ROLE_IDS
from tests._hub import Hub, hub_cluster
from tests._master import Client, MasterProcess, create_experiment, wait_for
from tests.browser.conftest import BUILT, SKIP_REASON, log_in_if_asked, open_sidebar
from tests.integration._exp import COUNTER, counter_config

if SKIP_REASON:
    pytest.skip(SKIP_REASON, allow_module_level=True)
pytest.importorskip("jupyterhub", reason="the JupyterHub tests need jupyterhub (pip install -e '.[test]')")

from playwright import sync_api  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[MasterProcess, Hub]]:
    # The hub's servers find the built lab extension (an editable install has it in the
    # source tree) through JUPYTER_PATH, given to them in their det notebook config.
    jupyter = tmp_path / "jupyter"
    (jupyter / "labextensions").mkdir(parents=True)
    (jupyter / "labextensions" / "det-jupyter").symlink_to(BUILT)
    extra = ("c.DetSpawner.slots = 0\nc.Spawner.default_url = '/lab'\nc.JupyterHub.default_url = '/hub/home'\n"
             "c.DetSpawner.notebook_config = {'environment': {'environment_variables': "
             f"['JUPYTER_PATH={jupyter}']}}}}\n")
    with hub_cluster(tmp_path, extra) as both:
        yield both


def _token(hub: Hub, user: str) -> str:
    made = hub.api("POST", f"/users/{user}/tokens", {"note": "test"})
    assert isinstance(made, dict)
    return str(made["token"])


def _private_experiment(admin: Client, user: Client, name: str) -> int:
    """An experiment of ``user`` named ``name`` in a workspace only they (and admins) see."""
    uid = user.get("/api/v1/me")["user"]["id"]
    ws = admin.post("/api/v1/workspaces", {"name": f"{name}-space"})["workspace"]["id"]
    admin.post("/api/v1/roles/add-assignments", {"userRoleAssignments": [
        {"userId": uid, "roleAssignment": {"role": {"roleId": ROLE_IDS["Editor"]}, "scopeWorkspaceId": ws}}]})
    project = user.post(f"/api/v1/workspaces/{ws}/projects", {"name": "p", "workspaceId": ws})["project"]["id"]
    cfg = yaml.safe_load(counter_config())
    cfg["name"] = name
    exp = create_experiment(user, yaml.safe_dump(cfg), COUNTER, projectId=project, activate=False)
    user.post(f"/api/v1/experiments/{exp['experiment']['id']}/kill")
    return int(exp["experiment"]["id"])


def _put_notebook(hub: Hub, user: str, token: str, name: str, cells: list[str]) -> None:
    """A notebook in the user's server, through the hub's proxy (Jupyter's contents API)."""
    content = {"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {},
                          "outputs": [], "source": src} for i, src in enumerate(cells)],
               "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                           "name": "python3"}},
               "nbformat": 4, "nbformat_minor": 5}
    req = urllib.request.Request(f"{hub.url}/user/{user}/api/contents/{name}", method="PUT",
                                 data=json.dumps({"type": "notebook", "content": content}).encode(),
                                 headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status in (200, 201)


def _hub_sign_in(browser: Any, hub: Hub, user: str) -> Any:
    """A browser context signed in at the hub as ``user`` (DummyAuthenticator: any password)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", "any")
    page.click("#login_submit")
    page.wait_for_url(lambda url: "/hub/login" not in url)
    page.close()
    return context


def test_a_hub_server_lists_only_its_users_experiments_with_no_login(
        cluster: tuple[MasterProcess, Hub], browser: Any, screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    master, hub = cluster
    admin = master.admin()
    for user in ("alice", "bob"):
        hub.api("POST", f"/users/{user}")
    alice_tok, bob_tok = _token(hub, "alice"), _token(hub, "bob")
    mine = _private_experiment(admin, Client(master.url, alice_tok), "alice-exp")
    theirs = _private_experiment(admin, Client(master.url, bob_tok), "bob-exp")

    hub.api("POST", "/users/alice/server")
    wait_for(lambda: hub.server("alice").get("ready"), timeout=120, what="alice's server ready")
    _put_notebook(hub, "alice", alice_tok, "det.ipynb", ["%load_ext det_jupyter\n%det e list"])

    context = _hub_sign_in(browser, hub, "alice")
    page = context.new_page()
    try:
        page.goto(f"{hub.url}/user/alice/lab/tree/det.ipynb")
        notebook = page.locator(".jp-NotebookPanel")
        expect(notebook).to_be_visible(timeout=90_000)
        expect(page.get_by_text("(ipykernel) | Idle").first).to_be_visible(timeout=90_000)
        notebook.locator(".jp-Notebook-cell").first.click()
        page.keyboard.press("Shift+Enter")
        output = notebook.locator(".jp-Notebook-cell").first.locator(".jp-OutputArea-output").last
        expect(output).to_contain_text("alice-exp", timeout=90_000)
        assert "bob-exp" not in output.inner_text()
        assert "Error" not in output.inner_text(), output.inner_text()
        screenshot(page, "hub-server-det-e-list")

        # The det sidebar, in the same hub server: alice's experiment, no login form.
        open_sidebar(page)
        sidebar = page.locator("#det-jupyter-sidebar")
        expect(sidebar.locator('[data-det="content"]')).to_be_visible(timeout=60_000)
        assert not sidebar.locator('[data-det="login"]').is_visible()
        expect(sidebar.locator(f'tr[data-experiment-id="{mine}"]')).to_be_visible(timeout=60_000)
        assert sidebar.locator(f'tr[data-experiment-id="{theirs}"]').count() == 0
        screenshot(page, "hub-server-sidebar")
    finally:
        context.close()


def test_signing_in_to_the_master_through_the_hub(
        cluster: tuple[MasterProcess, Hub], browser: Any, screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    master, hub = cluster
    for user in ("alice", "bob"):  # boss, the hub's admin, is made by its config
        hub.api("POST", f"/users/{user}")
    alice = Client(master.url, _token(hub, "alice"))
    nb = alice.post("/api/v1/notebooks", {"config": {"resources": {"slots": 0}}})["notebook"]["id"]
    wait_for(lambda: alice.get(f"/api/v1/notebooks/{nb}")["notebook"]["state"] == "STATE_RUNNING",
             timeout=120, what="alice's det notebook running")

    # alice, signed in at the hub, follows her det notebook's link on the master.
    context = _hub_sign_in(browser, hub, "alice")
    page = context.new_page()
    try:
        page.goto(f"{master.url}/proxy/{nb}/lab")
        expect(page.locator(".jp-LabShell")).to_be_visible(timeout=90_000)
        assert f"/proxy/{nb}/lab" in page.url and "det_ticket" not in page.url, page.url
        expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=60_000)
        screenshot(page, "hub-sso-det-notebook")
        # Not an admin: the master's own JupyterLab is not for her, and she is told why.
        page.goto(f"{master.url}/det-jupyter/hub/login?next=/lab")
        expect(page.locator("#hub-signin-message")).to_contain_text("Only admins log in here")
    finally:
        context.close()

    # bob, signed in as himself, gets the proxy's 404 for alice's link.
    context = _hub_sign_in(browser, hub, "bob")
    page = context.new_page()
    try:
        response = page.goto(f"{master.url}/proxy/{nb}/lab")
        assert response is not None and response.status == 404, (response and response.status, page.url)
        assert page.locator(".jp-LabShell").count() == 0
    finally:
        context.close()

    # The hub's admin signs in to the master's JupyterLab from its login page.
    context = _hub_sign_in(browser, hub, "boss")
    page = context.new_page()
    try:
        page.goto(f"{master.url}/lab")
        page.locator("#hub_login").click()
        expect(page.locator(".jp-LabShell")).to_be_visible(timeout=90_000)
        assert page.url.startswith(master.url) and "/lab" in page.url, page.url
        expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=60_000)
        # The Lab session is boss's det session: the sidebar needs no second login.
        open_sidebar(page)
        log_in_if_asked(page)
        screenshot(page, "hub-sso-master-lab")
    finally:
        context.close()
