"""Resource managers: where tasks run.

- ``base`` — the seams: ``ResourceManager`` (what the services call), ``AllocationPort`` and
  ``TaskLogPort`` (what a resource manager calls back), ``Container``, ``Pools``.
- ``agents`` — ``AgentRM``: det-agents over websockets, placed by the pools' scheduler policies.

Imports only ``det_jupyter.scheduler``, ``det_agent.wire`` and its own modules; the pools'
configuration is parsed in ``det_jupyter.config.resources``.
"""

__all__ = ["agents", "base"]
