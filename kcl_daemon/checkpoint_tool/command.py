"""`kcl-daemon checkpoint show|set`: read and change shards' checkpoints safely (see
:mod:`kcl_daemon.checkpoint_tool.plan` for the rules).

``set`` reads the chosen leases, resolves the target per shard (an ``AT_TIMESTAMP`` goes through the
stream, :mod:`kcl_daemon.checkpoint_tool.resolve`), reads them again a failover time later when any is
owned (to tell a live owner from a dead one), plans, prints the plan, and, unless ``--dry-run``, carries
it out. Every change is logged (who, lease, from, to, how, why) and recorded on the lease in
``kclDaemonCheckpointSet``.

The hand-off (``--handoff``) takes a live lease by the fleet's own protocol before writing:

* KCL 3.x leader mode (``Migration3.0`` says 3.x): a graceful hand-off to the tool (``leaseOwner`` :=
  tool, ``checkpointOwner`` := owner, contract §5.3). The owner's processor gets ``shutdownRequested``
  and checkpoints; the owner then assigns the lease to the tool. If it does not within the graceful
  hand-off timeout plus the failover time (a dead owner), the tool completes the assignment itself,
  as the leader would. Java 3.x owners do the same.
* KCL 2.x lease taking: a counter-fenced take, then the tool holds the lease (renewing it) for one
  failover time: by then the old owner has seen its renewal fail and stopped its processor, or has
  given the lease up by its own clock. Its processor may finish the batch it has, but no checkpoint of
  it can land after the take.

Then one write, fenced on the counter and the tool's ownership, sets the checkpoint and releases the
lease; whichever worker takes it next starts from the new checkpoint.
"""

from __future__ import annotations

import asyncio
import functools
import getpass
import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from kcl_daemon.aws.checkpoint_writes import AUDIT_ATTRIBUTE, CheckpointWriter
from kcl_daemon.aws.clients import AwsClients, build_clients, client_settings_from
from kcl_daemon.aws.coordinator_state import COORDINATOR_KEY, LEASE_TABLE_KEY, CoordinatorStore
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.streams import describe_stream_identity, retention_s
from kcl_daemon.checkpoint_tool.plan import Action, Step, audit_record, plan
from kcl_daemon.checkpoint_tool.resolve import resolve_at_timestamp
from kcl_daemon.clock import Clock, SystemClock
from kcl_daemon.config.settings import Settings
from kcl_daemon.core.leader.client_version import ClientVersion, parse_client_version
from kcl_daemon.core.leases.lease import Lease, LeaseKey
from kcl_daemon.core.sequence import LATEST, TRIM_HORIZON, ExtendedSequenceNumber, Sentinel
from kcl_daemon.core.shards.multi_stream import parse_stream_list
from kcl_daemon.errors import ConfigError, DependencyUnavailable, KclError, LeaseConflict
from kcl_daemon.retry import KINESIS

logger = logging.getLogger(__name__)

MIGRATION_KEY = "Migration3.0"
POLL_S = 0.25


def operator() -> str:
    """Who is changing checkpoints: the OS user at this host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True, slots=True)
class Selection:
    shards: tuple[str, ...] = ()
    all: bool = False
    stream: str | None = None


@dataclass(frozen=True, slots=True)
class Target:
    """``--to``: a sentinel, a sequence number, or AT_TIMESTAMP with ``timestamp``."""

    to: str
    timestamp: datetime | None = None

    def fixed(self) -> ExtendedSequenceNumber | None:
        """The checkpoint, when it does not depend on the shard (None for AT_TIMESTAMP)."""
        if self.to == Sentinel.AT_TIMESTAMP:
            return None
        if self.to == Sentinel.TRIM_HORIZON:
            return TRIM_HORIZON
        if self.to == Sentinel.LATEST:
            return LATEST
        sequence, _, sub = self.to.partition("/")
        return ExtendedSequenceNumber(sequence, int(sub) if sub else 0)


@dataclass(frozen=True, slots=True)
class SetOptions:
    handoff: bool = False
    dry_run: bool = False
    reason: str | None = None
    by: str = field(default_factory=operator)
    #: how long to watch owned leases to tell live owners from dead ones (None: failoverTimeMillis)
    wait_s: float | None = None


@dataclass(slots=True)
class Outcome:
    step: Step
    done: bool = False
    detail: str = ""

    def as_json(self) -> dict[str, object]:
        return {**self.step.as_json(), "done": self.done, "detail": self.detail}


@dataclass(slots=True)
class SetReport:
    outcomes: list[Outcome]
    dry_run: bool

    @property
    def ok(self) -> bool:
        return all(o.done or o.step.action is Action.NOTHING for o in self.outcomes) or (
            self.dry_run and all(o.step.action is not Action.REFUSE for o in self.outcomes)
        )

    def lines(self) -> list[str]:
        lines = []
        for o in self.outcomes:
            step = o.step
            move = f"{step.current} -> {step.target}" if step.target is not None else f"at {step.current}"
            if self.dry_run:
                state = (
                    "would " + str(step.action)
                    if step.action not in (Action.REFUSE, Action.NOTHING)
                    else str(step.action)
                )
            else:
                state = (
                    "done" if o.done else ("nothing to do" if step.action is Action.NOTHING else "NOT DONE")
                )
            lines.append(f"{step.lease_key}: {move}: {state} ({o.detail or step.reason})")
        return lines


class CheckpointTool:
    def __init__(self, settings: Settings, clients: AwsClients, *, clock: Clock | None = None) -> None:
        table = settings.lease_table_name
        if table is None:
            raise ConfigError(["checkpoint needs applicationName or tableName"])
        self.settings = settings
        self.table = CheckpointWriter(clients.dynamodb, table)
        self.kinesis = Kinesis(clients.kinesis)
        self._clients = clients
        self._clock = clock or SystemClock()

    @classmethod
    def from_settings(cls, settings: Settings) -> CheckpointTool:
        return cls(settings, build_clients(client_settings_from(settings)))

    # -- reading ---------------------------------------------------------------------------------

    def leases(self) -> dict[str, Lease]:
        found = self.table.list_leases(consistent=True)
        for problem in found.skipped:
            logger.warning("skipping lease item: %s", problem)
        return {lease.lease_key: lease for lease in found.leases}

    def lease_keys(self, selection: Selection, leases: dict[str, Lease]) -> list[str]:
        """The lease keys a selection names (``--shard`` may be a shard id or a whole lease key)."""
        if selection.all:
            return sorted(
                key
                for key, lease in leases.items()
                if selection.stream is None or _stream_name(lease) == selection.stream
            )
        keys = []
        for shard in selection.shards:
            if ":" in shard:
                keys.append(shard)
            elif self.settings.stream_names:
                keys.append(self._multi_stream_key(shard, selection.stream))
            else:
                keys.append(shard)
        return keys

    def _multi_stream_key(self, shard_id: str, stream: str | None) -> str:
        streams = parse_stream_list(self.settings.stream_names or "")
        if stream is None:
            if len(streams) != 1:
                raise ConfigError(
                    [f"--shard {shard_id}: several streams are configured; name one with --stream"]
                )
            stream = streams[0].name
        identity = KINESIS.call(describe_stream_identity, self._clients.kinesis, stream)
        if identity is None:
            raise ConfigError([f"--stream {stream}: no such stream"])
        return identity.lease_key(shard_id)

    def show(self, selection: Selection) -> list[Lease]:
        leases = self.leases()
        keys = self.lease_keys(selection, leases) if (selection.all or selection.shards) else sorted(leases)
        return [leases[key] for key in keys if key in leases]

    # -- set ---------------------------------------------------------------------------------------

    async def set(self, selection: Selection, target: Target, options: SetOptions) -> SetReport:
        first = await asyncio.to_thread(self.leases)
        keys = await asyncio.to_thread(self.lease_keys, selection, first)
        if not keys:
            raise ConfigError(["no lease selected: name shards with --shard, or use --all"])
        targets, problems = await asyncio.to_thread(self._targets, keys, first, target)
        owned = [k for k in keys if k in first and (first[k].lease_owner or first[k].checkpoint_owner)]
        wait = self.settings.failover_s if options.wait_s is None else options.wait_s
        second = None
        if owned and wait > 0:
            logger.info(
                "watching %d owned lease(s) for %.1fs to tell live owners from dead ones", len(owned), wait
            )
            await self._clock.sleep(wait)
            second = await asyncio.to_thread(self.leases)
        steps = plan(
            keys,
            first,
            second,
            targets,
            handoff=options.handoff,
            window_s=wait if second is not None else 0.0,
            failover_s=self.settings.failover_s,
            target_problems=problems,
        )
        outcomes = [Outcome(step) for step in steps]
        if options.dry_run:
            return SetReport(outcomes, True)
        latest = second or first
        for outcome in outcomes:
            if outcome.step.action in (Action.REFUSE, Action.NOTHING):
                continue
            try:
                await self._carry_out(outcome, latest[outcome.step.lease_key], options)
            except KclError as exc:
                outcome.detail = f"not changed: {exc}"
                logger.error("lease %s: checkpoint not changed: %s", outcome.step.lease_key, exc)  # noqa: TRY400
        return SetReport(outcomes, False)

    def _targets(
        self, keys: Sequence[str], leases: dict[str, Lease], target: Target
    ) -> tuple[dict[str, ExtendedSequenceNumber | None], dict[str, str]]:
        fixed = target.fixed()
        if fixed is not None:
            return dict.fromkeys(keys, fixed), {}
        assert target.timestamp is not None
        targets: dict[str, ExtendedSequenceNumber | None] = {}
        problems: dict[str, str] = {}
        retention: dict[str, float] = {}
        for key in keys:
            lease = leases.get(key)
            stream = None if lease is None else _stream_name(lease) or self.settings.effective_stream_name
            if lease is None or stream is None:
                targets[key] = None
                problems[key] = "no such lease" if lease is None else "no stream configured"
                continue
            try:
                if stream not in retention:
                    retention[stream] = self._retention_s(stream)
                resolved = resolve_at_timestamp(
                    self.kinesis, stream, lease.shard_id, target.timestamp, retention_s=retention[stream]
                )
            except KclError as exc:
                targets[key], problems[key] = None, f"cannot resolve AT_TIMESTAMP through the stream: {exc}"
                continue
            logger.info("lease %s: AT_TIMESTAMP %s -> checkpoint %s", key, resolved.note, resolved.checkpoint)
            targets[key] = resolved.checkpoint
        return targets, problems

    def _retention_s(self, stream: str) -> float:
        return KINESIS.call(retention_s, self._clients.kinesis, stream)

    async def _call(self, fn: Callable[[], Lease]) -> Lease:
        return await asyncio.to_thread(fn)

    async def _carry_out(self, outcome: Outcome, lease: Lease, options: SetOptions) -> None:
        step = outcome.step
        assert step.target is not None
        target = step.target
        if step.action is Action.HANDOFF:
            lease = await self._take_over(lease, options)
        audit = audit_record(
            options.by, int(time.time() * 1000), lease.checkpoint, target, options.reason, step.action
        )
        if lease.lease_owner is None and lease.checkpoint_owner is None:
            written = await self._call(lambda: self.table.rewrite_unowned(lease, target, audit))
        else:
            written = await self._call(lambda: self.table.rewrite_owned(lease, target, audit))
        outcome.done = True
        outcome.detail = f"{step.reason}; written, counter {written.lease_counter}, lease released"
        logger.info(
            "checkpoint of lease %s set from %s to %s by %s (%s)%s",
            lease.lease_key,
            lease.checkpoint,
            target,
            options.by,
            step.action,
            f": {options.reason}" if options.reason else "",
        )

    # -- hand-off ----------------------------------------------------------------------------------

    def tool_id(self, options: SetOptions) -> str:
        return f"kcl-daemon-checkpoint:{options.by}:{os.getpid()}"

    async def _leader_mode(self) -> bool:
        """Whether the fleet runs KCL 3.x leader-based assignment (Migration3.0 says 3.x)."""

        def read() -> object:
            app = self.settings.application_name or self.table.table_name
            legacy = CoordinatorStore(
                self._clients.dynamodb,
                self.settings.coordinator_state_table_name or f"{app}-CoordinatorState",
                COORDINATOR_KEY,
            )
            for store in (
                legacy,
                CoordinatorStore(self._clients.dynamodb, self.table.table_name, LEASE_TABLE_KEY),
            ):
                try:
                    item = store.get(MIGRATION_KEY)
                except DependencyUnavailable:
                    continue
                if item is not None:
                    return item.get("cv")
            return None

        cv = await asyncio.to_thread(read)
        try:
            version = parse_client_version(cv)  # type: ignore[arg-type]
        except ValueError:
            return False
        return version in (ClientVersion.V3X, ClientVersion.V3X_WITH_ROLLBACK)

    async def _take_over(self, lease: Lease, options: SetOptions) -> Lease:
        me = self.tool_id(options)
        if await self._leader_mode():
            return await self._handoff_3x(lease, me)
        return await self._take_2x(lease, me)

    async def _read(self, key: str) -> Lease:
        found = await asyncio.to_thread(self.table.get_lease, key, consistent=True)
        if found is None:
            raise LeaseConflict(f"lease {key} was deleted meanwhile")
        return found

    async def _handoff_3x(self, lease: Lease, me: str) -> Lease:
        """contract §5.3 with the tool as the new owner; see the module docstring."""
        timeout = self.settings.graceful_lease_handoff_timeout_s + self.settings.failover_s + 5.0
        deadline = self._clock.monotonic() + timeout
        while True:
            if lease.checkpoint_owner is None and lease.lease_owner == me:
                return lease
            if lease.checkpoint_owner is None and lease.lease_owner is not None:
                try:
                    owner = lease.lease_owner
                    lease = await self._call(functools.partial(self.table.initiate_handoff, lease, me))
                    logger.info(
                        "lease %s: hand-off from %s started (its processor gets shutdownRequested)",
                        lease.lease_key,
                        owner,
                    )
                except LeaseConflict:
                    lease = await self._read(lease.lease_key)
                    continue
            elif lease.lease_owner is None and lease.checkpoint_owner is None:
                return lease  # released meanwhile: written as an unowned lease
            if self._clock.monotonic() >= deadline:
                if lease.lease_owner == me:
                    logger.warning(
                        "lease %s: %s did not complete the hand-off in %.0fs; completing it",
                        lease.lease_key,
                        lease.checkpoint_owner,
                        timeout,
                    )
                    return await self._call(functools.partial(self.table.assign, lease, me))
                raise LeaseConflict(f"lease {lease.lease_key}: could not take it over in {timeout:.0f}s")
            await self._clock.sleep(POLL_S)
            lease = await self._read(lease.lease_key)

    async def _take_2x(self, lease: Lease, me: str) -> Lease:
        """A counter-fenced take, then hold the lease (renewing) for one failover time.

        The owner renews between our read and the take, and a worker short of leases may steal it
        from us while we hold it: either way the fence refuses our write, and we read the lease again
        and start over, until ``3 x failover + 5 s`` have passed."""
        failover = self.settings.failover_s
        timeout = 3 * failover + 5.0
        deadline = self._clock.monotonic() + timeout
        while True:
            try:
                return await self._take_and_hold_2x(lease, me)
            except LeaseConflict as exc:
                if self._clock.monotonic() >= deadline:
                    raise LeaseConflict(
                        f"lease {lease.lease_key}: could not take it over in {timeout:.0f}s: {exc}"
                    ) from exc
                logger.info("lease %s: the take-over was overtaken (%s); trying again", lease.lease_key, exc)
            lease = await self._read(lease.lease_key)
            if lease.lease_owner is None and lease.checkpoint_owner is None:
                return lease  # released meanwhile: written as an unowned lease

    async def _take_and_hold_2x(self, lease: Lease, me: str) -> Lease:
        owner = lease.lease_owner
        held = await self._call(lambda: self.table.take(lease, me))
        logger.info(
            "lease %s: taken from %s; holding it %.1fs so that it stops",
            lease.lease_key,
            owner,
            self.settings.failover_s,
        )
        until = self._clock.monotonic() + self.settings.failover_s
        every = self.settings.failover_s / 3
        while self._clock.monotonic() < until:
            await self._clock.sleep(min(every, max(until - self._clock.monotonic(), 0.0)))
            held = await self._call(functools.partial(self.table.renew, held))
        return held


def _stream_name(lease: Lease) -> str | None:
    stream = lease.stream
    if stream is None:
        return None
    parsed = LeaseKey.parse(f"{stream}:x").stream
    return None if parsed is None else parsed.stream_name


def audit_of(lease: Lease) -> dict[str, object] | None:
    """The last ``kclDaemonCheckpointSet`` record of a lease, as plain values (None: never set)."""
    raw = lease.extra.get(AUDIT_ATTRIBUTE)
    if not isinstance(raw, dict) or "M" not in raw:
        return None
    plain: dict[str, object] = {}
    for name, value in raw["M"].items():
        if isinstance(value, dict) and value:
            kind, inner = next(iter(value.items()))
            plain[name] = int(inner) if kind == "N" else inner
    return plain
