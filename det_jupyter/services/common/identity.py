"""What a task needs to know of the master it belongs to."""

from __future__ import annotations


class MasterIdentity:
    """The master's URL, ids and preemption timeout, as tasks are told them.

    One object, shared by every service that builds task specs. Its URL is known only once the
    server has bound its port: the app calls ``set_url`` then, before any task is launched.
    """

    def __init__(self, url: str, master_id: str, cluster_id: str, preemption_timeout_s: float = 3600.0) -> None:
        self._url = url
        self.master_id = master_id
        self.cluster_id = cluster_id
        self.preemption_timeout_s = preemption_timeout_s

    @property
    def url(self) -> str:
        return self._url

    def set_url(self, url: str) -> None:
        self._url = url

    def __repr__(self) -> str:
        return f"MasterIdentity(url={self._url!r}, master_id={self.master_id!r}, cluster_id={self.cluster_id!r})"
