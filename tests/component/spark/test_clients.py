"""Where the Spark source sends its DynamoDB calls: never to the Kinesis endpoint by accident, and a
table it cannot reach is named with the options that say where it is (a real botocore client against a
local server that answers as a Kinesis-only endpoint does)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from kcl_daemon.errors import ConfigError, LeaseConflict, TransientNetwork
from kcl_daemon.spark import clients
from kcl_daemon.spark.options import Credentials, SourceOptions, StartingPosition, StartKind

KEYS = Credentials(access_key_id="test", secret_key="test")  # noqa: S106 - an emulator's dummy key


def options(**extra: object) -> SourceOptions:
    return SourceOptions(
        stream_name="stream",
        starting_position=StartingPosition(StartKind.TRIM_HORIZON),
        region="eu-west-1",
        credentials=KEYS,
        **extra,  # type: ignore[arg-type]
    )


class KinesisOnly(http.server.BaseHTTPRequestHandler):
    """Answers every call as kinesalite answers an operation it does not know."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b"<UnknownOperationException/>"
        self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def kinesis_only() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), KinesisOnly)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_kinesis_endpoint_is_never_the_dynamodb_endpoint() -> None:
    ends = clients.metadata_table_for(options(endpoint_url="http://127.0.0.1:9"))
    assert ends._client.meta.endpoint_url == "https://dynamodb.eu-west-1.amazonaws.com"
    table = clients.lease_table_for(options(endpoint_url="http://127.0.0.1:9", lease_table_name="app"))
    assert table._client.meta.endpoint_url == "https://dynamodb.eu-west-1.amazonaws.com"
    kinesis = clients.kinesis_for(options(endpoint_url="http://127.0.0.1:9"))
    assert kinesis._client.meta.endpoint_url == "http://127.0.0.1:9"


def test_dynamodb_goes_where_its_own_options_say() -> None:
    chosen = options(
        endpoint_url="http://127.0.0.1:9",
        dynamodb_endpoint_url="http://127.0.0.1:8",
        dynamodb_region="us-east-2",
    )
    client = clients.metadata_table_for(chosen)._client
    assert (client.meta.endpoint_url, client.meta.region_name) == ("http://127.0.0.1:8", "us-east-2")


def test_a_table_behind_a_kinesis_only_endpoint_names_the_option(kinesis_only: str) -> None:
    chosen = options(endpoint_url=kinesis_only, dynamodb_endpoint_url=kinesis_only)
    ends = clients.metadata_table_for(chosen)
    with pytest.raises(ConfigError) as raised, clients.reaching_table(chosen, ends.table_name):
        ends.create_if_missing(wait_s=1.0)
    text = str(raised.value)
    assert f"table {ends.table_name} could not be reached at {kinesis_only}" in text
    assert "dynamoDbEndpointUrl" in text and "endpointUrl is for Kinesis only" in text


def test_a_retriable_failure_keeps_its_class_with_the_advice() -> None:
    advice = r"no dynamoDbEndpointUrl set.*Set option dynamoDbEndpointUrl"
    with pytest.raises(TransientNetwork, match=advice), clients.reaching_table(options(), "app"):
        raise TransientNetwork("describe table app: connection refused")


def test_a_conflict_proves_the_table_is_there() -> None:
    with pytest.raises(LeaseConflict, match=r"\] taken$"), clients.reaching_table(options(), "app"):
        raise LeaseConflict("taken")
