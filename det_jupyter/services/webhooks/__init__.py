"""Webhooks (Determined 0.38.1's): stored definitions, the events that reach them, their
bodies and signatures, and delivery off every request path.

Public modules:

- ``service`` — ``WebhookService``: definitions, and the events (experiment states, metrics,
  task logs) that trigger them.
- ``payloads`` — pure: ``Webhook``, ``Trigger``, which webhooks an event reaches, bodies,
  signatures.

Private: ``_shipper`` (a bounded queue and sender threads).

Depends on: ``common``.
"""

__all__ = ["payloads", "service"]
