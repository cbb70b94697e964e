"""A rolling restart with a restart grace moves no lease and duplicates nothing at a short failover
(2 s), in KCL 3.x leader mode and in 2.x lease mode (``tests.support.rolling``; issue 28, point 1).

Four daemons in two zones, eight shards; each worker stays down for a failover time and a second, so
its leases have expired in every other worker's eyes before it is back: only the grace, marked on the
leases themselves as the worker stops, keeps them where they are (the leader does not judge the worker
quiet or dead; the 2.x takers leave its leases alone). About 40 s per mode. The default failover runs in
``test_rolling_restart_default.py`` and ``test_rolling_restart_2x_default.py`` (beside other files).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.rolling import RollingFleet, check_rolling_restart, make_fleet

pytestmark = [
    pytest.mark.integration,
    pytest.mark.e2e,
    pytest.mark.parametrize("backend", ["kinesalite+dynalite"], indirect=True),
    pytest.mark.timeout(300),
]
__all__ = ["make_fleet"]  # the fixture


@pytest.mark.parametrize("mode", ["3.x", "2.x"])
def test_rolling_restart_with_grace_moves_no_lease(
    make_fleet: Callable[[int, str], RollingFleet],
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    mode: str,
) -> None:
    check_rolling_restart(make_fleet, aws_clients, lease_table, 2000, mode)
