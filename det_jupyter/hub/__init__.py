"""JupyterHub integration: ``DetSpawner`` (the ``jupyterhub.spawners`` entry point ``det``)
runs each hub user's single-user server as a det notebook task of the det user of the same
name (docs/jupyterhub.md). Needs the ``jupyterhub`` package (``pip install 'det-jupyter[hub]'``)."""

from ._spawner import DetSpawner

__all__ = ["DetSpawner"]
