"""The task-isolation escalation suite (tests/integration/test_task_isolation.py), with its trials
as pods of the Kubernetes resource manager on the real test bed (tests/_k8s.py): a non-admin
user's trial tries every route to more rights we know of, beside a victim trial of the admin's,
and every one fails. The suite's own tests run here unchanged, on this module's cluster, except
the two about an agent (its command line, its task directories): there is none here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import _k8s
from tests._master import wait_for
from tests.integration import test_task_isolation as suite
from tests.integration.test_task_isolation import (  # noqa: F401 - collected here, on this cluster
    attack,
    test_it_runs_unprivileged_and_cannot_get_root,
    test_it_sees_only_its_own_processes,
    test_its_tokens_act_as_its_owner_and_only_as_its_owner,
    test_no_secret_of_the_master_or_another_task_reaches_the_trial,
    test_the_data_dir_and_other_tasks_are_out_of_reach,
    test_the_environment_is_built_not_inherited,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

IMAGE = "local/hostusr:1"


@pytest.fixture(scope="module")
def cluster(k8s_cluster: _k8s.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[suite.Cluster]:
    work = tmp_path_factory.mktemp("k8s-isolation")
    with _k8s.namespace(k8s_cluster) as ns, _k8s.k8s_master(
            k8s_cluster, work, ns, slot_resource_requests={"cpu": 0.5}) as master:
        admin = master.admin()
        wait_for(lambda: admin.get("/api/v1/agents")["agents"], what="the node as an agent")
        # No agent directory: each task has its pod's own (the victim's is another pod's).
        yield suite.Cluster(master, admin, work / "no-agent", None, IMAGE)
