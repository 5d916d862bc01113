"""The SDK's one exception hierarchy: every failure a user can see, with a readable message."""

from __future__ import annotations


class DetClientError(Exception):
    """Base of every error the SDK raises. ``str(exc)`` is one readable line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class MasterUnreachable(DetClientError):
    """The master did not answer (refused, timed out, DNS): check ``DET_MASTER``."""


class NotLoggedIn(DetClientError):
    """No credentials for this master and user: log in first (``login(...)``, ``det user login``)."""


class InvalidInput(DetClientError):
    """An argument was refused before anything was sent (a missing config file, a bad path)."""


class APIError(DetClientError):
    """The master answered with an HTTP error. ``status`` is the HTTP status and ``message``
    the master's own explanation; ``str()`` gives both."""

    def __init__(self, status: int, message: str, *, method: str = "", path: str = "") -> None:
        super().__init__(f"{message} (HTTP {status})")
        self.status = status
        self.message = message
        self.method = method
        self.path = path


class BadRequest(APIError):
    """400: the request or the configuration it carries is invalid."""


class Unauthenticated(APIError, NotLoggedIn):
    """401: the token is missing, expired or revoked, or the password is wrong."""


class Forbidden(APIError):
    """403: valid credentials that may not do this."""


class NotFound(APIError):
    """404: no such experiment, trial, checkpoint or route (or not visible to this user)."""


class Conflict(APIError):
    """409: the object is in a state that does not allow this."""


class PayloadTooLarge(APIError):
    """413: the context directory or the request body is over the master's limit."""


class ServerError(APIError):
    """5xx: the master failed or is unavailable for now."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequest, 401: Unauthenticated, 403: Forbidden, 404: NotFound, 409: Conflict,
    413: PayloadTooLarge,
}


def api_error(status: int, message: str, *, method: str = "", path: str = "") -> APIError:
    """The ``APIError`` subclass for an HTTP status."""
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else APIError)
    return cls(status, message, method=method, path=path)
