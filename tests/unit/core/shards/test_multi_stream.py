"""Several streams per application, the pure parts: the streamNames list, former streams, the
``initialize`` fields (daemon codec and the Python client) and the configuration checks."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_client._messages import Initialize as ClientInitialize
from kcl_client._messages import decode as client_decode
from kcl_daemon.config.settings import REQUIRED_FOR_RUN, load_settings
from kcl_daemon.core.sequence import Sentinel
from kcl_daemon.core.shards.multi_stream import (
    StreamSpec,
    former_streams_due,
    parse_stream_list,
    recreated_stream,
    stream_fields,
)
from kcl_daemon.core.stream_identity import StreamIdentity
from kcl_daemon.errors import ConfigError
from kcl_daemon.run import plan_worker, run_from_settings
from kcl_protocol import Initialize, decode_daemon_line, encode_daemon_message

A = "123456789012:orders:1700000000"
B = "123456789012:clicks:1700000001"


@pytest.mark.parametrize(
    ("text", "specs"),
    [
        ("orders", (StreamSpec("orders"),)),
        (" orders , clicks ", (StreamSpec("orders"), StreamSpec("clicks"))),
        (
            "orders=TRIM_HORIZON,clicks=latest",
            (StreamSpec("orders", Sentinel.TRIM_HORIZON), StreamSpec("clicks", Sentinel.LATEST)),
        ),
        (
            "a.b_c-d=AT_TIMESTAMP@1700000000",
            (StreamSpec("a.b_c-d", Sentinel.AT_TIMESTAMP, datetime.fromtimestamp(1700000000, tz=UTC)),),
        ),
    ],
)
def test_stream_lists_parse(text: str, specs: tuple[StreamSpec, ...]) -> None:
    assert parse_stream_list(text) == specs


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty entry"),
        ("a,,b", "empty entry"),
        ("a,", "empty entry"),
        ("a:b", "is not 1-128"),
        ("a,a=LATEST", "listed twice"),
        ("a=TRIM", "'TRIM' is not LATEST, TRIM_HORIZON"),
        ("a=AT_TIMESTAMP@soon", "whole epoch seconds"),
        ("=LATEST", "is not 1-128"),
    ],
)
def test_bad_stream_lists_say_which_entry(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_stream_list(text)


def test_a_stream_without_a_position_uses_the_application_s() -> None:
    stamp = datetime(2024, 1, 1, tzinfo=UTC)
    assert StreamSpec("a").position_or(Sentinel.AT_TIMESTAMP, stamp) == (Sentinel.AT_TIMESTAMP, stamp)
    assert StreamSpec("a", Sentinel.LATEST).position_or(Sentinel.TRIM_HORIZON, None) == (
        Sentinel.LATEST,
        None,
    )


def test_former_streams_wait_before_deletion_and_forget_a_stream_that_returns() -> None:
    first = former_streams_due([A, A, B, None], [A], {}, now=100.0, wait_s=60.0)
    assert first.delete == () and first.first_seen == {B: 100.0}
    later = former_streams_due([A, B], [A], first.first_seen, now=159.0, wait_s=60.0)
    assert later.delete == () and later.first_seen == {B: 100.0}
    due = former_streams_due([A, B], [A], later.first_seen, now=160.0, wait_s=60.0)
    assert due.delete == (B,) and due.first_seen == {}
    back = former_streams_due([A, B], [A, B], first.first_seen, now=500.0, wait_s=60.0)
    assert back.delete == () and back.first_seen == {}
    assert former_streams_due([B], [], {}, now=0.0, wait_s=0.0).delete == (B,)


identities = st.sampled_from([A, B, "000000000000:x:1", "000000000000:x:2"])


@given(
    leases=st.lists(st.one_of(st.none(), identities)),
    current=st.lists(identities),
    seen=st.dictionaries(identities, st.floats(0, 1000)),
    now=st.floats(0, 2000),
    wait_s=st.floats(0, 1000),
)
def test_former_streams_never_touch_current_or_single_stream_leases(
    leases: list[str | None], current: list[str], seen: dict[str, float], now: float, wait_s: float
) -> None:
    result = former_streams_due(leases, current, seen, now, wait_s)
    assert not set(result.delete) & set(current)
    assert set(result.delete) <= {s for s in leases if s is not None}
    assert not set(result.delete) & set(result.first_seen)
    for stream in result.delete:
        assert now - seen.get(stream, now) >= wait_s
    assert set(result.delete) | set(result.first_seen) == {s for s in leases if s is not None} - set(current)


def test_initialize_names_the_stream_only_for_multi_stream_leases() -> None:
    assert stream_fields(None) == {}
    single = json.loads(encode_daemon_message(Initialize("shardId-1", "LATEST", 0, **stream_fields(None))))
    assert single == {
        "action": "initialize",
        "shardId": "shardId-1",
        "sequenceNumber": "LATEST",
        "subSequenceNumber": 0,
    }
    message = Initialize("shardId-1", "LATEST", 0, **stream_fields(A))
    wire = encode_daemon_message(message)
    assert json.loads(wire)["streamName"] == "orders"
    assert json.loads(wire)["streamIdentifier"] == A
    assert decode_daemon_line(wire) == message


def test_the_python_client_reads_the_stream_fields() -> None:
    decoded = client_decode(
        {
            "action": "initialize",
            "shardId": "s",
            "sequenceNumber": None,
            "subSequenceNumber": None,
            "streamName": "orders",
            "streamIdentifier": A,
        }
    )
    assert isinstance(decoded, ClientInitialize)
    assert (decoded.stream_name, decoded.stream_identifier) == ("orders", A)
    plain = client_decode(
        {"action": "initialize", "shardId": "s", "sequenceNumber": None, "subSequenceNumber": None}
    )
    assert isinstance(plain, ClientInitialize) and plain.stream_name is None


def _properties(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "app.properties"
    path.write_text(f"executableName = /bin/cat\napplicationName = app\n{body}")
    return path


def test_stream_names_plan_a_multi_stream_worker(tmp_path: Path) -> None:
    settings = load_settings(
        _properties(
            tmp_path,
            "streamNames = orders, clicks=TRIM_HORIZON\nformerStreamsLeasesDeletionWaitMillis = 5000\n",
        ),
        required=REQUIRED_FOR_RUN,
    )
    plan = plan_worker(settings, worker_id="w")
    assert plan.streams == (StreamSpec("orders"), StreamSpec("clicks", Sentinel.TRIM_HORIZON))
    assert plan.former_streams_wait_s == 5.0
    single = plan_worker(
        load_settings(_properties(tmp_path, "streamName = orders\n"), required=REQUIRED_FOR_RUN),
        worker_id="w",
    )
    assert single.streams == () and single.stream_name == "orders"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("streamNames = orders\nstreamName = orders\n", "remove streamName/streamArn"),
        ("streamNames = orders=SOMETIME\n", "app.properties:3: streamNames entry 'orders=SOMETIME'"),
    ],
)
def test_bad_stream_names_are_configuration_errors(tmp_path: Path, body: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        load_settings(_properties(tmp_path, body), required=REQUIRED_FOR_RUN)


def test_a_lease_of_a_re_created_stream_is_not_read() -> None:
    orders = StreamIdentity("123456789012", "orders", 1700000000)
    assert recreated_stream(A, orders) is None
    assert recreated_stream(A, None) is None  # deleted or not looked up yet: reading ends the shards
    again = StreamIdentity("123456789012", "orders", 1800000000)
    assert "orders was re-created (123456789012:orders:1800000000)" in (recreated_stream(A, again) or "")


def test_local_mode_refuses_several_streams(tmp_path: Path) -> None:
    settings = load_settings(
        _properties(tmp_path, "streamNames = orders, clicks\n"), required=REQUIRED_FOR_RUN
    )
    with pytest.raises(ConfigError, match="local mode embeds one stream"):
        run_from_settings(settings, local=True)
