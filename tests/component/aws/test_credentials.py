"""Credentials providers: every Java spelling parsed, mapped onto boto3, and resolved offline."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kcl_daemon.aws.clients import ClientSettings, build_clients, client_settings_from, make_client
from kcl_daemon.aws.credentials import AssumeRoleProvider, credential_providers, is_anonymous, session_for
from kcl_daemon.aws.lean.client import lean_client_for
from kcl_daemon.config.providers import ProviderKind, ProviderSpec, describe, parse_providers
from kcl_daemon.config.settings import Settings
from kcl_daemon.errors import ConfigError

ROLE = "arn:aws:iam::123456789012:role/reader"
K = ProviderKind


@pytest.fixture(autouse=True)
def clean_aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No real credentials, config or endpoints leak in; instance metadata is never asked."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_DEFAULT_REGION",
        "AWS_REGION",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_KINESIS",
        "AWS_ENDPOINT_URL_DYNAMODB",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.parametrize(
    ("value", "kinds"),
    [
        ("DefaultCredentialsProvider", [K.DEFAULT]),
        ("DefaultAWSCredentialsProviderChain", [K.DEFAULT]),
        ("software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider", [K.DEFAULT]),
        ("com.amazonaws.auth.DefaultAWSCredentialsProviderChain", [K.DEFAULT]),
        ("defaultcredentialsprovider", [K.DEFAULT]),
        ("EnvironmentVariableCredentialsProvider", [K.ENVIRONMENT]),
        ("SystemPropertyCredentialsProvider", [K.ENVIRONMENT]),
        ("SystemPropertiesCredentialsProvider", [K.ENVIRONMENT]),
        ("ProfileCredentialsProvider", [K.PROFILE]),
        ("ProfileCredentialsProvider|dev", [K.PROFILE]),
        ("InstanceProfileCredentialsProvider", [K.INSTANCE_PROFILE]),
        ("ContainerCredentialsProvider", [K.CONTAINER]),
        ("EC2ContainerCredentialsProviderWrapper", [K.CONTAINER, K.INSTANCE_PROFILE]),
        ("WebIdentityTokenFileCredentialsProvider", [K.WEB_IDENTITY]),
        ("WebIdentityTokenCredentialsProvider", [K.WEB_IDENTITY]),
        (f"StsAssumeRoleCredentialsProvider|{ROLE}|s1", [K.ASSUME_ROLE]),
        (f"KclStsAssumeRoleCredentialsProvider|{ROLE}|s1", [K.ASSUME_ROLE]),
        (f"STSAssumeRoleSessionCredentialsProvider|{ROLE}|s1", [K.ASSUME_ROLE]),
        (f"KclSTSAssumeRoleSessionCredentialsProvider|{ROLE}|s1", [K.ASSUME_ROLE]),
        (
            f"software.amazon.kinesis.multilang.auth.KclStsAssumeRoleCredentialsProvider|{ROLE}|s1",
            [K.ASSUME_ROLE],
        ),
        ("AnonymousCredentialsProvider", [K.ANONYMOUS]),
        ("AnonymousAWSCredentials", [K.ANONYMOUS]),
        (
            " EnvironmentVariableCredentialsProvider , ProfileCredentialsProvider|dev,"
            "DefaultCredentialsProvider ",
            [K.ENVIRONMENT, K.PROFILE, K.DEFAULT],
        ),
    ],
)
def test_every_provider_spelling(value: str, kinds: list[ProviderKind]) -> None:
    assert [spec.kind for spec in parse_providers(value).chain] == kinds


def test_provider_arguments() -> None:
    (profile,) = parse_providers("ProfileCredentialsProvider|dev").chain
    assert profile.profile == "dev"
    (unnamed,) = parse_providers("ProfileCredentialsProvider").chain
    assert unnamed.profile is None
    (role,) = parse_providers(
        f"StsAssumeRoleCredentialsProvider|{ROLE}|my-session|externalId=xyz"
        "|endpoint=sts.eu-west-1.amazonaws.com^eu-west-1"
    ).chain
    assert role == ProviderSpec(
        K.ASSUME_ROLE,
        "StsAssumeRoleCredentialsProvider",
        role_arn=ROLE,
        session_name="my-session",
        external_id="xyz",
        sts_endpoint="https://sts.eu-west-1.amazonaws.com",
        sts_region="eu-west-1",
    )
    (regional,) = parse_providers(
        f"StsAssumeRoleCredentialsProvider|{ROLE}|s1|endpointRegion=us-west-2"
    ).chain
    assert regional.sts_region == "us-west-2"
    assert regional.sts_endpoint is None
    assert "xyz" not in describe((role,))
    assert describe((role,)).startswith(f"assume-role {ROLE} as my-session (with external id)")


@pytest.mark.parametrize(
    ("value", "note"),
    [
        ("SystemPropertyCredentialsProvider", "no Java system properties"),
        ("EnvironmentVariableCredentialsProvider|x", "takes no arguments"),
        ("ProfileCredentialsProvider|a|b", "arguments after the profile name are ignored"),
        (f"StsAssumeRoleCredentialsProvider|{ROLE}|s1|extra", "not key=value are ignored"),
        (f"StsAssumeRoleCredentialsProvider|{ROLE}|s1|colour=red", "unknown option 'colour'"),
    ],
)
def test_notes(value: str, note: str) -> None:
    assert any(note in n for n in parse_providers(value).notes)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "is empty"),
        ("DefaultCredentialsProvider,,EnvironmentVariableCredentialsProvider", "empty element"),
        ("com.example.CustomProvider", "unknown credentials provider 'com.example.CustomProvider'"),
        ("ClasspathPropertiesFileCredentialsProvider", "unknown credentials provider"),
        ("StsAssumeRoleCredentialsProvider", "needs a role ARN and a session name"),
        (f"StsAssumeRoleCredentialsProvider|{ROLE}", "needs a role ARN and a session name"),
        ("StsAssumeRoleCredentialsProvider|reader|s1", "is not an IAM role ARN"),
        (f"StsAssumeRoleCredentialsProvider|{ROLE}|a b", "not a valid role session name"),
        (f"StsAssumeRoleCredentialsProvider|{ROLE}|s1|endpointRegion=mars", "is not an AWS region"),
        (f"StsAssumeRoleCredentialsProvider|{ROLE}|s1|endpoint=https://", "has no host"),
        ("AnonymousCredentialsProvider,DefaultCredentialsProvider", "cannot be combined"),
    ],
)
def test_bad_provider_values(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_providers(value)


def test_bad_values_report_every_problem() -> None:
    with pytest.raises(
        ValueError, match=r"unknown credentials provider 'A'.*unknown credentials provider 'B'"
    ):
        parse_providers("A,B")


# --- mapping onto boto3 ------------------------------------------------------------------------------


def methods(value: str) -> list[str]:
    chain = parse_providers(value).chain
    core = session_for(None, "us-east-1")._session  # the botocore session
    return [str(p.METHOD) for p in credential_providers(chain, core, "us-east-1")]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("EnvironmentVariableCredentialsProvider", ["env"]),
        ("SystemPropertyCredentialsProvider", ["env"]),
        ("InstanceProfileCredentialsProvider", ["iam-role"]),
        ("ContainerCredentialsProvider", ["container-role"]),
        ("EC2ContainerCredentialsProviderWrapper", ["container-role", "iam-role"]),
        ("WebIdentityTokenFileCredentialsProvider", ["assume-role-with-web-identity"]),
        (f"StsAssumeRoleCredentialsProvider|{ROLE}|s1", ["kcl-assume-role"]),
        ("EnvironmentVariableCredentialsProvider,InstanceProfileCredentialsProvider", ["env", "iam-role"]),
        ("AnonymousCredentialsProvider", []),
    ],
)
def test_restricted_chains(value: str, expected: list[str]) -> None:
    assert methods(value) == expected


def test_default_and_profile_chains(tmp_path: Path) -> None:
    default = methods("DefaultCredentialsProvider")
    assert default[0] == "env"
    assert {"iam-role", "container-role", "shared-credentials-file"} <= set(default)
    assert methods("ProfileCredentialsProvider") == []  # no default profile anywhere: nothing to read
    (tmp_path / "credentials").write_text("[dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = s\n")
    profile = methods("ProfileCredentialsProvider|dev")
    assert "env" not in profile
    assert "iam-role" not in profile
    assert "shared-credentials-file" in profile
    # a duplicate provider is tried once
    assert methods("EnvironmentVariableCredentialsProvider,DefaultCredentialsProvider").count("env") == 1


def test_environment_provider_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    chain = parse_providers("EnvironmentVariableCredentialsProvider").chain
    credentials = session_for(chain, "us-east-1").get_credentials()
    assert credentials is not None
    assert credentials.access_key == "AKIDENV"


def test_environment_provider_does_not_fall_back_to_files(tmp_path: Path) -> None:
    (tmp_path / "credentials").write_text(
        "[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = s\n"
    )
    chain = parse_providers("EnvironmentVariableCredentialsProvider").chain
    assert session_for(chain, "us-east-1").get_credentials() is None
    assert session_for(None, "us-east-1").get_credentials().access_key == "AKIDFILE"  # type: ignore[union-attr]


def test_profile_provider_reads_the_named_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "credentials").write_text(
        "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s\n"
        "[dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = s\n"
    )
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")  # a profile provider ignores the environment
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    named = session_for(parse_providers("ProfileCredentialsProvider|dev").chain, "us-east-1")
    assert named.get_credentials().access_key == "AKIDDEV"  # type: ignore[union-attr]
    unnamed = session_for(parse_providers("ProfileCredentialsProvider").chain, "us-east-1")
    assert unnamed.get_credentials().access_key == "AKIDDEFAULT"  # type: ignore[union-attr]
    monkeypatch.setenv("AWS_PROFILE", "dev")
    from_env = session_for(parse_providers("ProfileCredentialsProvider").chain, "us-east-1")
    assert from_env.get_credentials().access_key == "AKIDDEV"  # type: ignore[union-attr]


def test_missing_profile_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="credentials profile 'nope' is not in"):
        session_for(parse_providers("ProfileCredentialsProvider|nope").chain, "us-east-1")


def test_chain_order_falls_through(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "credentials").write_text("[dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = s\n")
    chain = parse_providers("EnvironmentVariableCredentialsProvider, ProfileCredentialsProvider|dev").chain
    assert session_for(chain, "us-east-1").get_credentials().access_key == "AKIDDEV"  # type: ignore[union-attr]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    assert session_for(chain, "us-east-1").get_credentials().access_key == "AKIDENV"  # type: ignore[union-attr]


def test_assume_role_fetches_and_refreshes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDBASE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    # moto here, not at the top: its import costs every pytest-xdist worker half a second at collection
    from moto import mock_aws

    chain = parse_providers(f"StsAssumeRoleCredentialsProvider|{ROLE}|kcl|externalId=e1").chain
    with mock_aws():
        credentials = session_for(chain, "us-east-1").get_credentials()
        assert credentials is not None
        assert credentials.method == "kcl-assume-role"
        frozen = credentials.get_frozen_credentials()
        assert frozen.access_key != "AKIDBASE"
        assert frozen.token
        provider = AssumeRoleProvider(chain[0], "us-east-1")
        fetched = provider.fetch()
        assert set(fetched) == {"access_key", "secret_key", "token", "expiry_time"}


def test_assume_role_uses_the_sts_options() -> None:
    (spec,) = parse_providers(
        f"StsAssumeRoleCredentialsProvider|{ROLE}|kcl|endpoint=http://localhost:9^eu-west-1"
    ).chain
    provider = AssumeRoleProvider(spec, "us-east-1")
    assert provider.region == "eu-west-1"
    client = provider._client()
    assert client.meta.endpoint_url == "http://localhost:9"
    assert client.meta.region_name == "eu-west-1"


def test_anonymous() -> None:
    chain = parse_providers("AnonymousCredentialsProvider").chain
    assert is_anonymous(chain)
    assert not is_anonymous(None)
    assert not is_anonymous(parse_providers("DefaultCredentialsProvider").chain)
    clients = build_clients(ClientSettings(region="us-east-1", credentials=chain))
    config = clients.kinesis.meta.config
    assert config.signature_version is not None  # type: ignore[attr-defined]  # botocore.UNSIGNED


# --- client settings, endpoints and the environment ------------------------------------------------


def test_client_settings_from_settings() -> None:
    settings = Settings(
        region_name="eu-west-1",
        kinesis_endpoint="http://k:1",
        aws_credentials_provider="EnvironmentVariableCredentialsProvider",
        aws_credentials_provider_dynamodb="ProfileCredentialsProvider|dev",
    )
    client = client_settings_from(settings)
    assert client.region == "eu-west-1"
    assert client.kinesis_endpoint == "http://k:1"
    assert client.dynamodb_endpoint is None
    assert client.credentials == parse_providers("EnvironmentVariableCredentialsProvider").chain
    assert client.dynamodb_credentials == parse_providers("ProfileCredentialsProvider|dev").chain
    assert client.cloudwatch_credentials is None
    unset = client_settings_from(Settings())
    assert (unset.region, unset.credentials, unset.kinesis_endpoint) == (None, None, None)


@pytest.mark.parametrize(
    ("service", "endpoint", "expected_endpoint"),
    [
        ("kinesis", None, "http://k:1"),  # each service its own configured endpoint
        ("dynamodb", None, "http://d:2"),
        ("cloudwatch", None, "http://c:3"),
        ("sqs", None, "https://sqs.eu-west-1.amazonaws.com"),  # none configured: boto3's
        ("kinesis", "http://other:4", "http://other:4"),  # an explicit endpoint wins
    ],
)
def test_the_client_factory(service: str, endpoint: str | None, expected_endpoint: str) -> None:
    settings = ClientSettings(
        region="eu-west-1",
        kinesis_endpoint="http://k:1",
        dynamodb_endpoint="http://d:2",
        cloudwatch_endpoint="http://c:3",
        connect_timeout_s=0.7,
        read_timeout_s=3.0,
    )
    client = make_client(settings, service, endpoint=endpoint)
    assert client.meta.endpoint_url == expected_endpoint
    config = client.meta.config
    assert (config.connect_timeout, config.read_timeout) == (0.7, 3.0)
    assert config.retries["total_max_attempts"] == 1  # botocore's retries off: the named policies retry
    assert client.meta.region_name == "eu-west-1"


@pytest.mark.parametrize(
    ("service", "expected"),
    [("kinesis", 30.0), ("dynamodb", 5.0), ("cloudwatch", 5.0)],
)
def test_each_service_has_its_own_read_timeout_unless_one_is_set(
    monkeypatch: pytest.MonkeyPatch, service: str, expected: float
) -> None:
    """Kinesis waits as long as Java's polling requests (30 s), DynamoDB within its policies' budget;
    the lean path takes the same timeout from the client it is built from."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    settings = ClientSettings(
        region="eu-west-1", kinesis_endpoint="http://k:1", dynamodb_endpoint="http://d:2"
    )
    client = make_client(settings, service)
    assert client.meta.config.read_timeout == expected
    lean = lean_client_for(client)
    if service != "cloudwatch":  # a query-protocol service: never on the lean path
        assert lean is not None and lean.pool.read_timeout_s == expected
    set_everywhere = make_client(replace(settings, read_timeout_s=7.0), service)
    assert set_everywhere.meta.config.read_timeout == 7.0


def test_the_fan_out_reader_keeps_the_short_read_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the polling reads wait Java's 30 s: a SubscribeToShard stream silent for the read timeout ends
    and is renewed, and a stopping fan-out reader waits for its blocked read to time out."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    settings = ClientSettings(
        region="eu-west-1", kinesis_endpoint="http://k:1", dynamodb_endpoint="http://d:2"
    )
    clients = build_clients(settings, subscriptions=True)
    assert clients.kinesis.meta.config.read_timeout == 30.0
    assert clients.subscriptions is not None and clients.subscriptions.meta.config.read_timeout == 5.0
    assert build_clients(settings).subscriptions is None
    explicit = build_clients(replace(settings, read_timeout_s=0.5), subscriptions=True).subscriptions
    assert explicit is not None and explicit.meta.config.read_timeout == 0.5


def test_the_client_factory_names_a_missing_region() -> None:
    with pytest.raises(ConfigError, match="no AWS region: set option region"):
        make_client(ClientSettings(), "kinesis", region_hint="set option region")


def test_client_settings_from_reports_a_bad_provider_with_its_source() -> None:
    settings = Settings(
        aws_credentials_provider="Nope", sources={"AwsCredentialsProvider": "app.properties:3"}
    )
    with pytest.raises(ConfigError, match=r"app\.properties:3: AwsCredentialsProvider names an unknown"):
        client_settings_from(settings)


@pytest.mark.parametrize(
    ("env", "kinesis", "dynamodb"),
    [
        ({}, "https://kinesis.us-east-1.amazonaws.com", "https://dynamodb.us-east-1.amazonaws.com"),
        ({"AWS_ENDPOINT_URL": "http://localhost:4566"}, "http://localhost:4566", "http://localhost:4566"),
        (
            {"AWS_ENDPOINT_URL_KINESIS": "http://k:4567", "AWS_ENDPOINT_URL_DYNAMODB": "http://d:4568"},
            "http://k:4567",
            "http://d:4568",
        ),
        (
            {"AWS_ENDPOINT_URL": "http://all:1", "AWS_ENDPOINT_URL_KINESIS": "http://k:2"},
            "http://k:2",
            "http://all:1",
        ),
    ],
)
def test_boto3_endpoint_variables_apply_when_unset(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], kinesis: str, dynamodb: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    clients = build_clients(client_settings_from(Settings(region_name="us-east-1")))
    assert clients.kinesis.meta.endpoint_url == kinesis
    assert clients.dynamodb.meta.endpoint_url == dynamodb


def test_configured_endpoints_beat_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://env:1")
    settings = Settings(
        region_name="us-east-1", kinesis_endpoint="http://k:9", dynamodb_endpoint="http://d:9"
    )
    clients = build_clients(client_settings_from(settings))
    assert clients.kinesis.meta.endpoint_url == "http://k:9"
    assert clients.dynamodb.meta.endpoint_url == "http://d:9"


def test_region_comes_from_boto3_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-southeast-2")
    clients = build_clients(client_settings_from(Settings()))
    assert clients.kinesis.meta.region_name == "ap-southeast-2"


def test_no_region_anywhere_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no AWS region"):
        build_clients(client_settings_from(Settings()))


def test_per_client_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "credentials").write_text("[dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = s\n")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    settings = Settings(
        region_name="us-east-1",
        aws_credentials_provider="EnvironmentVariableCredentialsProvider",
        aws_credentials_provider_dynamodb="ProfileCredentialsProvider|dev",
    )
    clients = build_clients(client_settings_from(settings))
    assert clients.kinesis._request_signer._credentials.access_key == "AKIDENV"  # type: ignore[attr-defined]
    assert clients.dynamodb._request_signer._credentials.access_key == "AKIDDEV"  # type: ignore[attr-defined]
