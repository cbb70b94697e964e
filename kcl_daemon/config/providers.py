"""The Java daemon's credentials-provider values, parsed into plain data (no boto3 here).

Syntax (contract §2.5)::

    value    := provider ("," provider)*      tried in order, the first that yields credentials wins
    provider := name ("|" arg)*               name: simple or fully qualified Java class name

Java resolves the name to a class and constructs it; we map the common SDK v1 and v2 names onto
boto3's own providers (:mod:`kcl_daemon.aws.credentials` does the mapping). An unknown name is an
error, never a silent skip. Names match case-insensitively.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit


class ProviderKind(enum.StrEnum):
    DEFAULT = "default"  # boto3's whole default chain
    ENVIRONMENT = "environment"  # AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN
    PROFILE = "profile"  # shared config/credentials files, one profile (SSO, credential_process, roles)
    INSTANCE_PROFILE = "instance-profile"  # EC2 instance metadata (IMDS)
    CONTAINER = "container"  # ECS/EKS container credentials endpoint
    WEB_IDENTITY = "web-identity"  # AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (EKS IRSA)
    ASSUME_ROLE = "assume-role"  # sts:AssumeRole with the default chain's credentials, refreshed
    ANONYMOUS = "anonymous"  # unsigned requests


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    kind: ProviderKind
    written: str  # the name as written, for messages
    profile: str | None = None
    role_arn: str | None = None
    session_name: str | None = None
    external_id: str | None = None
    sts_endpoint: str | None = None
    sts_region: str | None = None


#: lower-cased simple class name -> what it maps to (several kinds: a chain of them)
_NAMES: Final[dict[str, tuple[ProviderKind, ...]]] = {
    "defaultcredentialsprovider": (ProviderKind.DEFAULT,),
    "defaultawscredentialsproviderchain": (ProviderKind.DEFAULT,),
    "environmentvariablecredentialsprovider": (ProviderKind.ENVIRONMENT,),
    # There are no Java system properties without a JVM: read the environment instead.
    "systempropertycredentialsprovider": (ProviderKind.ENVIRONMENT,),
    "systempropertiescredentialsprovider": (ProviderKind.ENVIRONMENT,),
    "profilecredentialsprovider": (ProviderKind.PROFILE,),
    "instanceprofilecredentialsprovider": (ProviderKind.INSTANCE_PROFILE,),
    "containercredentialsprovider": (ProviderKind.CONTAINER,),
    "ec2containercredentialsproviderwrapper": (ProviderKind.CONTAINER, ProviderKind.INSTANCE_PROFILE),
    "webidentitytokenfilecredentialsprovider": (ProviderKind.WEB_IDENTITY,),
    "webidentitytokencredentialsprovider": (ProviderKind.WEB_IDENTITY,),
    "stsassumerolecredentialsprovider": (ProviderKind.ASSUME_ROLE,),
    "kclstsassumerolecredentialsprovider": (ProviderKind.ASSUME_ROLE,),
    "stsassumerolesessioncredentialsprovider": (ProviderKind.ASSUME_ROLE,),
    "kclstsassumerolesessioncredentialsprovider": (ProviderKind.ASSUME_ROLE,),
    "anonymouscredentialsprovider": (ProviderKind.ANONYMOUS,),
    "anonymousawscredentials": (ProviderKind.ANONYMOUS,),
}

SUPPORTED_NAMES: Final[tuple[str, ...]] = (
    "DefaultCredentialsProvider",
    "DefaultAWSCredentialsProviderChain",
    "EnvironmentVariableCredentialsProvider",
    "SystemPropertyCredentialsProvider",
    "SystemPropertiesCredentialsProvider",
    "ProfileCredentialsProvider|NAME",
    "InstanceProfileCredentialsProvider",
    "ContainerCredentialsProvider",
    "EC2ContainerCredentialsProviderWrapper",
    "WebIdentityTokenFileCredentialsProvider",
    "WebIdentityTokenCredentialsProvider",
    "StsAssumeRoleCredentialsProvider|ROLE_ARN|SESSION_NAME",
    "KclStsAssumeRoleCredentialsProvider|ROLE_ARN|SESSION_NAME",
    "STSAssumeRoleSessionCredentialsProvider|ROLE_ARN|SESSION_NAME",
    "KclSTSAssumeRoleSessionCredentialsProvider|ROLE_ARN|SESSION_NAME",
    "AnonymousCredentialsProvider",
)

_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$")
_SESSION_NAME = re.compile(r"^[\w+=,.@-]{2,64}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")


@dataclass(frozen=True, slots=True)
class ParsedProviders:
    chain: tuple[ProviderSpec, ...]
    notes: tuple[str, ...]  # things worth a warning, e.g. an ignored argument


def parse_providers(value: str) -> ParsedProviders:
    """Parse a provider value; raise :class:`ValueError` naming everything wrong with it."""
    problems: list[str] = []
    notes: list[str] = []
    chain: list[ProviderSpec] = []
    elements = [element.strip() for element in value.split(",")]
    if not any(elements):
        raise ValueError("is empty")
    for element in elements:
        if not element:
            problems.append("has an empty element between commas")
            continue
        name, *args = element.split("|")
        name = name.strip()
        simple = name.rsplit(".", 1)[-1]
        kinds = _NAMES.get(simple.lower())
        if kinds is None:
            problems.append(
                f"names an unknown credentials provider {name!r}; kcl-daemon maps "
                + ", ".join(SUPPORTED_NAMES)
                + " (anything else: configure boto3 itself, e.g. credential_process in ~/.aws/config)"
            )
            continue
        for kind in kinds:
            chain.append(_build(kind, name, [a.strip() for a in args], problems, notes))
    if any(spec.kind is ProviderKind.ANONYMOUS for spec in chain) and len(chain) > 1:
        problems.append("AnonymousCredentialsProvider cannot be combined with other providers")
    if problems:
        raise ValueError("; ".join(problems))
    return ParsedProviders(tuple(chain), tuple(notes))


def _build(
    kind: ProviderKind, name: str, args: list[str], problems: list[str], notes: list[str]
) -> ProviderSpec:
    if kind is ProviderKind.PROFILE:
        if len(args) > 1:
            notes.append(f"{name}: arguments after the profile name are ignored")
        profile = args[0] if args and args[0] else None
        return ProviderSpec(kind, name, profile=profile)
    if kind is ProviderKind.ASSUME_ROLE:
        return _assume_role(name, args, problems, notes)
    if args:
        notes.append(f"{name} takes no arguments; {len(args)} ignored")
    if name.rsplit(".", 1)[-1].lower().startswith("systempropert"):
        notes.append(f"{name}: there are no Java system properties; AWS_* environment variables are read")
    return ProviderSpec(kind, name)


def _assume_role(name: str, args: list[str], problems: list[str], notes: list[str]) -> ProviderSpec:
    positional = [a for a in args if "=" not in a]
    nested = [a for a in args if "=" in a]
    if len(positional) < 2:
        problems.append(f"{name} needs a role ARN and a session name: {name}|ROLE_ARN|SESSION_NAME")
        return ProviderSpec(ProviderKind.ASSUME_ROLE, name)
    role_arn, session_name, *extra = positional
    if not _ROLE_ARN.match(role_arn):
        problems.append(f"{name}: {role_arn!r} is not an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)")
    if not _SESSION_NAME.match(session_name):
        problems.append(f"{name}: {session_name!r} is not a valid role session name (2-64 of [\\w+=,.@-])")
    if extra:
        notes.append(f"{name}: {len(extra)} argument(s) that are not key=value are ignored")
    options: dict[str, str] = {}
    for token in nested:
        key, _, val = token.partition("=")
        if key.strip() not in ("endpoint", "endpointRegion", "externalId"):
            notes.append(
                f"{name}: unknown option {key.strip()!r} is ignored (endpoint, endpointRegion, externalId)"
            )
            continue
        options[key.strip()] = val.strip()
    endpoint: str | None = None
    region = options.get("endpointRegion") or None
    if "endpoint" in options:
        url, _, signing_region = options["endpoint"].partition("^")
        endpoint = url if "://" in url else f"https://{url}"
        if not urlsplit(endpoint).hostname:
            problems.append(f"{name}: endpoint {url!r} has no host")
        region = signing_region or region
    if region is not None and not _REGION.match(region):
        problems.append(f"{name}: {region!r} is not an AWS region")
    return ProviderSpec(
        ProviderKind.ASSUME_ROLE,
        name,
        role_arn=role_arn,
        session_name=session_name,
        external_id=options.get("externalId") or None,
        sts_endpoint=endpoint,
        sts_region=region,
    )


def describe(chain: tuple[ProviderSpec, ...]) -> str:
    """A one-line, secret-free description (an external id is never shown)."""
    parts: list[str] = []
    for spec in chain:
        text = spec.kind.value
        if spec.profile:
            text += f" {spec.profile}"
        if spec.role_arn:
            text += f" {spec.role_arn} as {spec.session_name}"
            if spec.external_id:
                text += " (with external id)"
            if spec.sts_endpoint:
                text += f" via {spec.sts_endpoint}"
        parts.append(text)
    return " -> ".join(parts)
