"""The cheaper replace gives what ``dataclasses.replace`` gives for the lease keeper's records."""

from __future__ import annotations

import dataclasses

import pytest

from kcl_daemon.core.leases.keeping import Kept, Op, Write
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.slotted import replace
from kcl_daemon.core.sequence import TRIM_HORIZON

LEASE = Lease("s", TRIM_HORIZON, "w", 3)


@pytest.mark.parametrize(
    ("record", "changes"),
    [
        (Kept(LEASE, 1.0, "w"), {"confirmed_at": 2.0}),
        (Kept(LEASE, 1.0, "w"), {"validated": False, "renew_asked": True}),
        (Write(Op.RENEW, LEASE), {"next_at": 5.0, "failures": 2}),
        (Kept(LEASE, 1.0, "w"), {}),
    ],
)
def test_it_is_dataclasses_replace(record: object, changes: dict[str, object]) -> None:
    replaced = replace(record, **changes)
    assert replaced == dataclasses.replace(record, **changes)  # type: ignore[type-var]
    assert replaced is not record


def test_it_refuses_a_field_that_does_not_exist() -> None:
    with pytest.raises(TypeError, match="Kept has no field 'confirmed'"):
        replace(Kept(LEASE, 1.0, "w"), confirmed=2.0)
