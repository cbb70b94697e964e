"""deadLetterDestination addresses: the four schemes, and clear errors for everything else."""

from __future__ import annotations

import pytest

from kcl_daemon.core.lifecycle.dead_letter_address import (
    BadDeadLetterAddress,
    DeadLetterAddress,
    Scheme,
    parse_dead_letter_address,
    policy_problems,
)


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("sqs://poison", DeadLetterAddress(Scheme.SQS, "poison")),
        (
            "sqs://https://sqs.us-east-1.amazonaws.com/123456789012/poison",
            DeadLetterAddress(Scheme.SQS, "https://sqs.us-east-1.amazonaws.com/123456789012/poison"),
        ),
        ("kinesis://dead-letters", DeadLetterAddress(Scheme.KINESIS, "dead-letters")),
        ("s3://my-bucket/poison", DeadLetterAddress(Scheme.S3, "my-bucket", "poison/")),
        ("s3://my-bucket", DeadLetterAddress(Scheme.S3, "my-bucket", "")),
        ("file:///var/lib/kcl/dead/", DeadLetterAddress(Scheme.FILE, "/var/lib/kcl/dead")),
        ("FILE:///tmp/x", DeadLetterAddress(Scheme.FILE, "/tmp/x")),
    ],
)
def test_addresses_parse(text: str, address: DeadLetterAddress) -> None:
    assert parse_dead_letter_address(text) == address


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("/tmp/dead", "has no scheme"),
        ("file://relative/dir", "absolute path"),
        ("kinesis://bad stream", "stream name"),
        ("s3://B/x", "bucket name"),
        ("sqs://bad queue", "queue URL or a queue name"),
        ("ftp://host/x", "not one of sqs, kinesis, s3, file"),
    ],
)
def test_bad_addresses_say_why(text: str, says: str) -> None:
    with pytest.raises(BadDeadLetterAddress, match=says):
        parse_dead_letter_address(text)


def test_dead_letter_needs_a_destination() -> None:
    assert policy_problems("RETRY", None) == []
    assert policy_problems("SKIP", None) == []
    assert policy_problems("DEAD_LETTER", "file:///tmp/x") == []
    assert "needs deadLetterDestination" in policy_problems("DEAD_LETTER", None)[0]
    assert "has no scheme" in policy_problems("RETRY", "nowhere")[0]
