"""Replay the golden transcripts against the Node.js clients: kcl-client and the real npm aws-kcl.

* ``node --test clients/node/test/``: kcl-client's own unit tests;
* ``clients/node/conformance.js``: kcl-client's conformance processor, every transcript plus a >10 MB line;
* ``tests/fixtures/awskcl_conformance.js``: the same behaviour on aws-kcl 2.3.2 (``NODE_MODULES``).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.paths import FIXTURES, NODE_MODULES, REPO
from tests.support.requirements import require_path, require_tool
from tests.support.transcripts import Transcript, client_transcripts, large_batch, replay

CONFORMANCE = REPO / "clients" / "node" / "conformance.js"
AWSKCL_CONFORMANCE = FIXTURES / "awskcl_conformance.js"
TRANSCRIPTS = client_transcripts(
    lanes=True
)  # kcl-client's conformance processor is a factory: it takes lanes
AWSKCL_TRANSCRIPTS = client_transcripts()  # aws-kcl never takes them

# What the real aws-kcl 2.3.2 cannot do, by transcript name.
AWSKCL_LIMITS = {
    "aggregated": (
        "aws-kcl's checkpointer.checkpoint(sequenceNumber, cb) never sends subSequenceNumber, so it cannot "
        "checkpoint at sub-sequence 1 inside a KPL aggregate (the request reads as sub-sequence null = 0)"
    ),
    # `channel_offered` passes: aws-kcl ignores the offer in initialize.
    "channel": "aws-kcl cannot write the log/metric lines of kcl-daemon's channel",
    "dead_letter": "aws-kcl cannot write the deadLetter line of kcl-daemon's channel",
}


def as_sent_by_awskcl(transcript: Transcript) -> Transcript:
    """``transcript`` as it goes with aws-kcl, whose checkpoint requests never carry a subSequenceNumber.

    The daemon reads ``(sequenceNumber, null)`` as ``(sequenceNumber, 0)`` and echoes the request in its
    reply, so a checkpoint at a record with sub-sequence 0 is the same checkpoint with ``null`` on the
    wire. Only that case is rewritten; a checkpoint inside an aggregate (sub-sequence > 0) stays and fails.
    """
    entries = []
    for entry in transcript.entries:
        side = "child" if "child" in entry else "daemon" if "daemon" in entry else None
        message = entry.get(side) if side else None
        if (
            message is not None
            and message["action"] == "checkpoint"
            and message.get("sequenceNumber") is not None
            and message.get("subSequenceNumber") == 0
        ):
            entry = {side: {**message, "subSequenceNumber": None}}
        entries.append(entry)
    return Transcript(transcript.name, transcript.about, tuple(entries))


def by_name(transcripts: list[Transcript], limits: dict[str, str] | None = None) -> list[object]:
    """One param per transcript, named after it; those in ``limits`` are strict expected failures."""
    limits = limits or {}
    return [
        pytest.param(
            t,
            id=t.name,
            marks=[pytest.mark.xfail(reason=limits[t.name], raises=AssertionError, strict=True)]
            if t.name in limits
            else [],
        )
        for t in transcripts
    ]


@pytest.mark.clients
def test_node_unit_tests() -> None:
    node = require_tool("node")
    result = subprocess.run(
        [node, "--test", "clients/node/test/"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]


@pytest.mark.clients
@pytest.mark.parametrize("transcript", by_name(TRANSCRIPTS))
def test_conformance_processor(transcript: Transcript) -> None:
    replay(transcript, [require_tool("node"), str(CONFORMANCE)], cwd=REPO)


@pytest.mark.clients
def test_conformance_processor_large_batch() -> None:
    replay(large_batch(), [require_tool("node"), str(CONFORMANCE)], cwd=REPO)


@pytest.mark.clients
@pytest.mark.parametrize("transcript", by_name([*AWSKCL_TRANSCRIPTS, large_batch()], AWSKCL_LIMITS))
def test_real_aws_kcl(transcript: Transcript) -> None:
    node = require_tool("node")
    require_path(NODE_MODULES / "aws-kcl", "the npm aws-kcl 2.3.2 package")
    env = {**os.environ, "NODE_PATH": str(NODE_MODULES)}
    replay(as_sent_by_awskcl(transcript), [node, str(AWSKCL_CONFORMANCE)], cwd=REPO, env=env)
