"""The IAM policies under deploy/iam/ against the code: every action the AWS layer can call is in a policy
(or set aside with a reason), each policy holds exactly its case's actions, and nothing is granted that
the code never calls. The actions are found by reading ``kcl_daemon/aws/`` (tests.support.aws_calls), so
a new call without its policy fails here."""

from __future__ import annotations

import json

import pytest

from kcl_daemon.aws import iam
from tests.support.aws_calls import actions_in, operation_actions, sources_of
from tests.support.paths import REPO

AWS = REPO / "kcl_daemon" / "aws"
POLICIES = REPO / "deploy" / "iam"
REGENERATE = "python -c 'from kcl_daemon.aws.iam import write_policies; write_policies(\"deploy/iam\")'"


@pytest.fixture(scope="module")
def operations() -> dict[str, set[str]]:
    return operation_actions()


def policy_actions() -> set[str]:
    found: set[str] = set()
    for path in POLICIES.glob("*.json"):
        for statement in json.loads(path.read_text())["Statement"]:
            found.update(statement["Action"])
    return found


def missing_from_policies(sources: dict[str, str], operations: dict[str, set[str]]) -> dict[str, set[str]]:
    called = actions_in(sources, operations)
    granted = policy_actions() | set(iam.NOT_IN_POLICIES)
    return {
        action: where
        for action, where in called.items()
        if action not in granted and not set(iam.AUTHORISED_BY_PARTS.get(action, ("-",))) <= granted
    }


def test_every_action_the_aws_layer_calls_is_in_a_policy(operations: dict[str, set[str]]) -> None:
    missing = missing_from_policies(sources_of(AWS.glob("*.py")), operations)
    assert not missing, (
        "called but in no policy under deploy/iam/ (add a row to kcl_daemon/aws/iam.py, then "
        f"{REGENERATE}): {missing}"
    )


def test_an_action_added_to_the_aws_layer_without_the_policy_fails(operations: dict[str, set[str]]) -> None:
    sources = sources_of(AWS.glob("*.py"))
    sources["new_feature.py"] = (
        "def archive(client, table):\n"
        "    client.batch_write_item(RequestItems={table: []})\n"
        "    client.meta.events.register('x', print)\n"  # not an operation: ignored
    )
    assert missing_from_policies(sources, operations) == {"dynamodb:BatchWriteItem": {"new_feature.py"}}


def test_the_policies_grant_nothing_the_code_never_calls(operations: dict[str, set[str]]) -> None:
    called = set(actions_in(sources_of(AWS.glob("*.py")), operations))
    for action in list(called):
        called.update(iam.AUTHORISED_BY_PARTS.get(action, ()))
    assert policy_actions() <= called, policy_actions() - called
    assert {row.action for row in iam.ACTIONS} <= called
    assert set(iam.NOT_IN_POLICIES) <= called


@pytest.mark.parametrize("case", iam.CASES, ids=lambda case: case.name)
def test_each_policy_file_is_its_case(case: iam.Case) -> None:
    path = POLICIES / f"{case.name}.json"
    assert json.loads(path.read_text()) == iam.policy_document(case), f"regenerate: {REGENERATE}"


def test_the_cases_differ_as_documented() -> None:
    def actions(name: str, resource: str) -> set[str]:
        document = iam.policy_document(next(c for c in iam.CASES if c.name == name))
        return {a for s in document["Statement"] if s["Resource"] == resource for a in s["Action"]}  # type: ignore[union-attr,index]

    coordinator = iam.RESOURCE_ARNS[iam.Resource.COORDINATOR_TABLE]
    index = iam.RESOURCE_ARNS[iam.Resource.LEASE_TABLE_INDEX]
    # 2.x reads where coordinator state could be, writes none of it, never queries the GSI
    assert actions("kcl-daemon-2x", coordinator) == {"dynamodb:DescribeTable", "dynamodb:GetItem"}
    assert actions("kcl-daemon-2x", index) == set()
    # 3.x on the 3.0-3.4 layout writes the lock and Migration3.0 in the side table
    assert {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"} <= actions(
        "kcl-daemon-3x", coordinator
    )
    assert actions("kcl-daemon-3x", index) == {"dynamodb:Query"}
    # on a single table it only looks for the side table
    assert actions("kcl-daemon-3x-single-table", coordinator) == {
        "dynamodb:DescribeTable",
        "dynamodb:GetItem",
    }
    assert "kinesis:SubscribeToShard" in actions(
        "kcl-daemon-fanout", iam.RESOURCE_ARNS[iam.Resource.STREAM_CONSUMER]
    )
