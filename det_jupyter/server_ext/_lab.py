"""Routes for the server's own browser users (Jupyter-authenticated, unlike the det API)."""

from __future__ import annotations

from pathlib import Path

from jupyter_server.base.handlers import APIHandler, JupyterHandler
from tornado import web

from ._identity import det_session


class LabSessionHandler(APIHandler):
    """``POST /det-jupyter/session``: a det session token for the det user this server's kernels
    act as (``DetJupyterApp.kernel_user``), for the JupyterLab sidebar. Authenticated by Jupyter
    (cookie or token, XSRF-checked), so it grants a browser user nothing their kernels do not
    already have; a Jupyter user who logged in with det credentials (``_identity``) gets their
    own det session instead. 404 when the server gives its users no det identity."""

    jupyter_auth = True  # the Jupyter server's own user (token or cookie), not a det credential

    @web.authenticated
    def post(self) -> None:
        session = det_session(self.current_user)
        if session is not None:  # logged in to Jupyter as a det user (_identity): that session
            self.set_header("Cache-Control", "no-store")
            self.finish({"token": session[1], "username": session[0]})
            return
        username = self.settings.get("det_kernel_user")
        if not username:
            raise web.HTTPError(404, "this server gives its users no det identity; log in")
        token = self.settings["det_master"].auth.session_for(username)
        self.set_header("Cache-Control", "no-store")
        self.finish({"token": token, "username": username})


CHART_MODULE = Path(__file__).resolve().parent.parent / "widgets" / "static" / "chart.js"


class ChartModuleHandler(JupyterHandler):
    """``GET /det-jupyter/chart.js``: the notebook widgets' chart module, for the JupyterLab
    dashboard (one implementation draws both). Jupyter-authenticated, like the Lab itself."""

    jupyter_auth = True

    @web.authenticated
    def get(self) -> None:
        self.set_header("Content-Type", "text/javascript; charset=utf-8")
        self.set_header("Cache-Control", "no-cache")
        self.finish(CHART_MODULE.read_bytes())
