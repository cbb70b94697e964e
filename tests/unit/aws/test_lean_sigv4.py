"""The lean path's SigV4 signer gives the headers botocore's ``SigV4Auth`` gives for the same request:
same moment, credentials (with and without a session token), region, service, host, target and body."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from botocore import auth as botocore_auth  # noqa: TID251 - the reference signer
from botocore.awsrequest import AWSRequest  # noqa: TID251
from botocore.credentials import Credentials  # noqa: TID251
from hypothesis import given, settings
from hypothesis import strategies as st

from kcl_daemon.aws.lean.sigv4 import FrozenCredentials, Signer, amz_date

JSON = "application/x-amz-json-1.1"
SIGNED = ("authorization", "x-amz-date", "x-amz-security-token")


def _botocore(
    monkeypatch: pytest.MonkeyPatch,
    moment: datetime,
    url: str,
    target: str,
    body: bytes,
    creds: FrozenCredentials,
    service: str,
    region: str,
) -> dict[str, str]:
    monkeypatch.setattr(botocore_auth, "get_current_datetime", lambda: moment.replace(tzinfo=None))
    request = AWSRequest(
        method="POST", url=url, data=body, headers={"Content-Type": JSON, "X-Amz-Target": target}
    )
    botocore_auth.SigV4Auth(
        Credentials(creds.access_key, creds.secret_key, creds.token), service, region
    ).add_auth(request)
    return {k.lower(): v for k, v in request.headers.items() if k.lower() in SIGNED}


def _lean(
    signer: Signer, moment: datetime, host: str, target: str, body: bytes, creds: FrozenCredentials
) -> dict[str, str]:
    headers = signer.headers(host, target, JSON, body, creds, amz_date(moment))
    assert headers["Content-Type"] == JSON and headers["X-Amz-Target"] == target
    return {k.lower(): v for k, v in headers.items() if k.lower() in SIGNED}


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://127.0.0.1:4567/", "127.0.0.1:4567"),
        ("https://kinesis.eu-west-1.amazonaws.com/", "kinesis.eu-west-1.amazonaws.com"),
        ("https://kinesis.eu-west-1.amazonaws.com:443/", "kinesis.eu-west-1.amazonaws.com"),
    ],
)
@pytest.mark.parametrize("token", [None, "FwoGZXIvYXdzEJr//session+token="])
def test_the_signature_is_botocores(
    monkeypatch: pytest.MonkeyPatch, url: str, host: str, token: str | None
) -> None:
    moment = datetime(2026, 12, 6, 23, 59, 59, tzinfo=UTC)
    creds = FrozenCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    body = b'{"ShardIterator":"AAAA/bbbb+cc==","Limit":10000}'
    target = "Kinesis_20131202.GetRecords"
    signer = Signer("kinesis", "eu-west-1")
    expected = _botocore(monkeypatch, moment, url, target, body, creds, "kinesis", "eu-west-1")
    assert _lean(signer, moment, host, target, body, creds) == expected
    assert ("x-amz-security-token" in expected) == (token is not None)


def test_the_cached_key_follows_the_day_and_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new day, or a rotated secret, derives a new signing key: the cache never signs with a stale one."""
    signer = Signer("dynamodb", "us-east-1")
    target, body, url, host = (
        "DynamoDB_20120810.UpdateItem",
        b"{}",
        "http://localhost:8000/",
        "localhost:8000",
    )
    for moment, secret in [
        (datetime(2026, 12, 6, 23, 59, 59, tzinfo=UTC), "s1"),
        (datetime(2026, 12, 7, 0, 0, 0, tzinfo=UTC), "s1"),
        (datetime(2026, 12, 7, 0, 0, 1, tzinfo=UTC), "s2"),
    ]:
        creds = FrozenCredentials("AK", secret, None)
        expected = _botocore(monkeypatch, moment, url, target, body, creds, "dynamodb", "us-east-1")
        assert _lean(signer, moment, host, target, body, creds) == expected


@settings(max_examples=40, deadline=None)
@given(
    body=st.binary(max_size=300),
    access=st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=4, max_size=20),
    secret=st.text("abcdefghijklmnopqrstuvwxyz0123456789+/", min_size=1, max_size=40),
    token=st.none() | st.text("abcdefghijklmnopqrstuvwxyz0123456789+/=", min_size=1, max_size=60),
    seconds=st.integers(min_value=1_600_000_000, max_value=2_000_000_000),
)
def test_any_body_and_credentials_sign_as_botocore_does(
    body: bytes, access: str, secret: str, token: str | None, seconds: int
) -> None:
    moment = datetime.fromtimestamp(seconds, UTC)
    creds = FrozenCredentials(access, secret, token)
    with pytest.MonkeyPatch.context() as monkeypatch:
        expected = _botocore(
            monkeypatch,
            moment,
            "http://127.0.0.1:4567/",
            "Kinesis_20131202.GetShardIterator",
            body,
            creds,
            "kinesis",
            "us-east-1",
        )
    lean = _lean(
        Signer("kinesis", "us-east-1"),
        moment,
        "127.0.0.1:4567",
        "Kinesis_20131202.GetShardIterator",
        body,
        creds,
    )
    assert lean == expected
