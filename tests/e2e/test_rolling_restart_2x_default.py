"""The rolling restart of ``tests.support.rolling`` at the default failover (10 s), 2.x lease mode (the
taker, no leader, no worker metrics): no lease moves, no record is processed twice (issue 28, point 1).
About 2 minutes, most of it the 2.x fleet settling by steals every 20 s: its own file, so that
pytest-xdist runs it beside other files.
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
    pytest.mark.timeout(420),
]
__all__ = ["make_fleet"]  # the fixture


def test_rolling_restart_with_grace_moves_no_lease(
    make_fleet: Callable[[int, str], RollingFleet],
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
) -> None:
    check_rolling_restart(make_fleet, aws_clients, lease_table, 10000, "2.x")
