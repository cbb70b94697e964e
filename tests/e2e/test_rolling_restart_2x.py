"""A rolling restart with a restart grace moves no lease and duplicates nothing in 2.x lease mode (the
taker, no leader, no metrics), at a short failover (2 s) and at the default (10 s): the grace marked on
the leases keeps every other worker's taker off them, and the worker back takes its own at once
(``tests.support.rolling``; issue 28). About 45 s at 2 s, 100 s at 10 s.
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
]
__all__ = ["make_fleet"]  # the fixture
MODE = "2.x"


@pytest.mark.parametrize("failover_ms", [2000, 10000], ids=["failover-2s", "failover-default"])
def test_rolling_restart_with_grace_moves_no_lease(
    make_fleet: Callable[[int], RollingFleet],
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    failover_ms: int,
) -> None:
    check_rolling_restart(make_fleet, aws_clients, lease_table, failover_ms)
