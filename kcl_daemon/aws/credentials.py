"""Credentials: the Java daemon's provider chains (``AwsCredentialsProvider``) as boto3 sessions.

Each :class:`~kcl_daemon.config.providers.ProviderSpec` becomes one or more of botocore's own credential
providers, tried in order like Java's ``AwsCredentialsProviderChain``:

==================  ==================================================================================
DEFAULT             boto3's whole default chain (environment, profile, SSO, web identity, container, IMDS)
ENVIRONMENT         ``env`` (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)
PROFILE             the providers of one profile in ~/.aws/config and ~/.aws/credentials (static keys,
                    credential_process, SSO, role_arn); no name: AWS_PROFILE or ``default``
INSTANCE_PROFILE    ``iam-role`` (EC2 instance metadata)
CONTAINER           ``container-role`` (ECS/EKS container credentials endpoint)
WEB_IDENTITY        ``assume-role-with-web-identity`` (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN)
ASSUME_ROLE         sts:AssumeRole, called with the default chain's credentials and refreshed before
                    the role credentials expire (Java's KclStsAssumeRoleCredentialsProvider)
ANONYMOUS           unsigned requests (see :func:`is_anonymous`)
==================  ==================================================================================

Nothing here logs a credential; the external id is never logged either.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Final, TypeAlias

import boto3
import botocore.session
from botocore.credentials import (
    CredentialProvider,
    CredentialResolver,
    Credentials,
    DeferredRefreshableCredentials,
    create_credential_resolver,
)
from botocore.exceptions import ProfileNotFound

from kcl_daemon.config.providers import ProviderKind, ProviderSpec, describe
from kcl_daemon.errors import ConfigError

if TYPE_CHECKING:
    from mypy_boto3_sts import STSClient
    from mypy_boto3_sts.type_defs import AssumeRoleRequestTypeDef

logger = logging.getLogger(__name__)

#: a boto3 session, for the layers above that may not import boto3
Session: TypeAlias = boto3.session.Session

#: botocore provider names (``METHOD``) that read one profile of the shared files
PROFILE_METHODS: Final = frozenset(
    {
        "assume-role",
        "assume-role-with-web-identity",
        "sso",
        "login",
        "shared-credentials-file",
        "custom-process",
        "config-file",
    }
)
KIND_METHODS: Final[dict[ProviderKind, frozenset[str]]] = {
    ProviderKind.ENVIRONMENT: frozenset({"env"}),
    ProviderKind.INSTANCE_PROFILE: frozenset({"iam-role"}),
    ProviderKind.CONTAINER: frozenset({"container-role"}),
    ProviderKind.WEB_IDENTITY: frozenset({"assume-role-with-web-identity"}),
}


class AssumeRoleProvider(CredentialProvider):
    """sts:AssumeRole with the default chain's credentials; botocore refreshes before expiry."""

    METHOD = "kcl-assume-role"

    def __init__(self, spec: ProviderSpec, region: str | None) -> None:
        super().__init__()
        assert spec.role_arn is not None
        assert spec.session_name is not None
        self.spec = spec
        self.region = spec.sts_region or region
        self._sts: STSClient | None = None
        self._lock = threading.Lock()

    def load(self) -> Credentials:
        return DeferredRefreshableCredentials(refresh_using=self.fetch, method=self.METHOD)

    def _client(self) -> STSClient:
        with self._lock:
            if self._sts is None:
                self._sts = boto3.session.Session().client(
                    "sts", region_name=self.region, endpoint_url=self.spec.sts_endpoint
                )
            return self._sts

    def fetch(self) -> dict[str, str]:
        spec = self.spec
        assert spec.role_arn is not None
        assert spec.session_name is not None
        request: AssumeRoleRequestTypeDef = {"RoleArn": spec.role_arn, "RoleSessionName": spec.session_name}
        if spec.external_id:
            request["ExternalId"] = spec.external_id
        logger.info("assuming role %s as session %s", spec.role_arn, spec.session_name)
        response = self._client().assume_role(**request)
        creds = response["Credentials"]
        return {
            "access_key": creds["AccessKeyId"],
            "secret_key": creds["SecretAccessKey"],
            "token": creds["SessionToken"],
            "expiry_time": creds["Expiration"].isoformat(),
        }


def is_anonymous(chain: tuple[ProviderSpec, ...] | None) -> bool:
    return bool(chain) and all(spec.kind is ProviderKind.ANONYMOUS for spec in chain or ())


def _profile_providers(profile: str | None, region: str | None) -> list[CredentialProvider]:
    explicit = profile or os.environ.get("AWS_PROFILE")
    session = botocore.session.Session(profile=explicit or "default")
    if (explicit or "default") not in session.available_profiles:
        if explicit is None:
            return []  # no default profile: nothing to read, like an empty ~/.aws
        raise ConfigError([f"credentials profile {explicit!r} is not in the AWS config or credentials files"])
    resolver = create_credential_resolver(session, region_name=region)
    return [p for p in resolver.providers if p.METHOD in PROFILE_METHODS]


def credential_providers(
    chain: tuple[ProviderSpec, ...], core: botocore.session.Session, region: str | None
) -> list[CredentialProvider]:
    """The botocore providers for ``chain``, in order (duplicates of one provider kept once)."""
    default = create_credential_resolver(core, region_name=region)
    providers: list[CredentialProvider] = []
    for spec in chain:
        match spec.kind:
            case ProviderKind.DEFAULT:
                found = list(default.providers)
            case ProviderKind.PROFILE:
                found = _profile_providers(spec.profile, region)
            case ProviderKind.ASSUME_ROLE:
                found = [AssumeRoleProvider(spec, region)]
            case ProviderKind.ANONYMOUS:
                found = []
            case _:
                found = [p for p in default.providers if p.METHOD in KIND_METHODS[spec.kind]]
        providers.extend(p for p in found if all(p is not q for q in providers))
    return providers


def static_session(
    access_key_id: str, secret_access_key: str, session_token: str | None, region: str | None
) -> boto3.session.Session:
    """A boto3 session with these keys: no environment variable, shared file or instance metadata is
    consulted for credentials."""
    return boto3.session.Session(
        aws_access_key_id=access_key_id,
        aws_secret_access_key=secret_access_key,
        aws_session_token=session_token,
        region_name=region,
    )


def profile_session(profile: str, region: str | None) -> boto3.session.Session:
    """A boto3 session for one named profile of the shared files; raises :class:`ConfigError` naming
    the profile when it does not exist."""
    try:
        return boto3.session.Session(profile_name=profile, region_name=region)
    except ProfileNotFound as exc:
        raise ConfigError([f"profile: {exc}"]) from None


def session_for(chain: tuple[ProviderSpec, ...] | None, region: str | None) -> boto3.session.Session:
    """A boto3 session whose credentials come from ``chain`` (None: boto3's default chain)."""
    core = botocore.session.Session()
    if chain:
        core.register_component(
            "credential_provider", CredentialResolver(credential_providers(chain, core, region))
        )
        logger.debug("credentials: %s", describe(chain))
    return boto3.session.Session(botocore_session=core, region_name=region)
