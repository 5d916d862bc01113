"""Routes for the server's own browser users (Jupyter-authenticated, unlike the det API)."""

from __future__ import annotations

from jupyter_server.base.handlers import APIHandler
from tornado import web


class LabSessionHandler(APIHandler):
    """``POST /det-jupyter/session``: a det session token for the det user this server's kernels
    act as (``DetJupyterApp.kernel_user``), for the JupyterLab sidebar. Authenticated by Jupyter
    (cookie or token, XSRF-checked), so it grants a browser user nothing their kernels do not
    already have. 404 when the server gives its users no det identity."""

    jupyter_auth = True  # the Jupyter server's own user (token or cookie), not a det credential

    @web.authenticated
    def post(self) -> None:
        username = self.settings.get("det_kernel_user")
        if not username:
            raise web.HTTPError(404, "this server gives its users no det identity; log in")
        token = self.settings["det_master"].auth.session_for(username)
        self.set_header("Cache-Control", "no-store")
        self.finish({"token": token, "username": username})
