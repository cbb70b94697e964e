"""The deployment recipes under deploy/, checked against the daemon itself: the manifests parse, their kill
timeouts are longer than the daemon's longest graceful stop (computed from the recipe's own properties),
their probes ask the paths the daemon serves on the port it listens on, every command line they run is
one the CLI accepts, and the Dockerfile (which cannot be built here: there is no container engine) is
checked statically: slim Python base, a non-root user, the CLI as entrypoint, no credentials."""

from __future__ import annotations

import configparser
import json
import re
import shlex
from typing import Any

import pytest
import yaml

from kcl_daemon.cli import main
from kcl_daemon.config.settings import REQUIRED_FOR_RUN, Settings, graceful_stop_budget_s, load_settings
from kcl_daemon.errors import ExitStatus
from kcl_daemon.metrics.prometheus import HEALTHZ, READYZ
from tests.support.paths import REPO

DEPLOY = REPO / "deploy"
PORT = 9102


def run_arguments(args: list[str]) -> dict[str, Any]:
    """Parse ``args`` as `kcl-daemon run ...` would (a bad option fails here); returns the parameters."""
    assert args[0] == "run", args
    command = main.commands["run"]
    context = command.make_context("run", list(args[1:]), resilient_parsing=False)
    return dict(context.params)


@pytest.fixture(scope="module")
def kubernetes() -> dict[str, dict[str, Any]]:
    documents = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "kcl-daemon.yaml").read_text()))
    return {document["kind"]: document for document in documents}


@pytest.fixture(scope="module")
def recipe_settings(
    kubernetes: dict[str, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Settings:
    """The recipes' app.properties (the ConfigMap's), read by the daemon's own loader."""
    path = tmp_path_factory.mktemp("recipe") / "app.properties"
    path.write_text(kubernetes["ConfigMap"]["data"]["app.properties"])
    return load_settings(path, required=REQUIRED_FOR_RUN)


def container(kubernetes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    containers = kubernetes["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def test_kubernetes_grace_period_covers_the_graceful_stop(
    kubernetes: dict[str, dict[str, Any]], recipe_settings: Settings
) -> None:
    grace = kubernetes["Deployment"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert recipe_settings.shutdown_grace_s == 30
    assert grace > recipe_settings.shutdown_grace_s
    assert grace > graceful_stop_budget_s(recipe_settings), graceful_stop_budget_s(recipe_settings)


def test_kubernetes_probes_ask_the_daemon_s_paths_on_its_port(kubernetes: dict[str, dict[str, Any]]) -> None:
    spec = container(kubernetes)
    params = run_arguments(spec["args"])
    assert params["metrics_port"] == PORT and params["metrics_host"] == "0.0.0.0"  # noqa: S104
    ports = {port["name"]: port["containerPort"] for port in spec["ports"]}
    assert ports == {"metrics": PORT}
    assert spec["livenessProbe"]["httpGet"] == {"path": HEALTHZ, "port": "metrics"}
    assert spec["startupProbe"]["httpGet"] == {"path": HEALTHZ, "port": "metrics"}
    assert spec["readinessProbe"]["httpGet"] == {"path": READYZ, "port": "metrics"}
    assert params["worker_id"] == "$(KCL_WORKER_ID)"
    assert {"name": "KCL_WORKER_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in spec["env"]


def test_kubernetes_prestop_adds_nothing_to_sigterm(kubernetes: dict[str, dict[str, Any]]) -> None:
    command = container(kubernetes)["lifecycle"]["preStop"]["exec"]["command"]
    assert command == ["/bin/true"]  # no sleep, no signal, no script: SIGTERM does the whole stop


def test_kubernetes_runs_as_the_image_s_non_root_user(kubernetes: dict[str, dict[str, Any]]) -> None:
    pod = kubernetes["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == dockerfile_user()[0] != 0
    assert kubernetes["ServiceAccount"]["metadata"]["name"] == pod["serviceAccountName"]


def test_kubernetes_resources_are_set(kubernetes: dict[str, dict[str, Any]]) -> None:
    resources = container(kubernetes)["resources"]
    assert resources["requests"]["cpu"] and resources["requests"]["memory"]
    assert resources["limits"]["memory"]


def test_ecs_task_definition(recipe_settings: Settings) -> None:
    task = json.loads((DEPLOY / "ecs" / "task-definition.json").read_text())
    (spec,) = task["containerDefinitions"]
    assert graceful_stop_budget_s(recipe_settings) < spec["stopTimeout"] <= 120  # 120 s: Fargate's maximum
    assert spec["linuxParameters"]["initProcessEnabled"] is True
    assert spec["user"].split(":")[0] == str(dockerfile_user()[0])
    params = run_arguments(spec["command"])
    assert params["metrics_port"] == PORT
    assert f"127.0.0.1:{PORT}{HEALTHZ}" in " ".join(spec["healthCheck"]["command"])
    assert {"containerPort": PORT, "protocol": "tcp", "name": "metrics"} in spec["portMappings"]


def test_systemd_unit(recipe_settings: Settings) -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string((DEPLOY / "systemd" / "kcl-daemon.service").read_text())
    service = unit["Service"]
    assert service["KillMode"] == "mixed" and service["KillSignal"] == "SIGTERM"
    assert float(service["TimeoutStopSec"]) > graceful_stop_budget_s(recipe_settings)
    assert service["Restart"] == "on-failure"
    assert set(service["RestartPreventExitStatus"].split()) == {
        str(ExitStatus.CONFIG.value),
        str(ExitStatus.INTERRUPTED.value),
    }
    argv = shlex.split(service["ExecStart"])
    assert argv[0].endswith("/kcl-daemon")
    assert run_arguments(argv[1:])["metrics_port"] == PORT
    assert service["User"] != "root"


def dockerfile_lines() -> list[str]:
    text = (DEPLOY / "Dockerfile").read_text()
    joined = re.sub(r"\\\n\s*", " ", text)  # continuation lines
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def instructions(name: str) -> list[str]:
    return [line[len(name) :].strip() for line in dockerfile_lines() if line.split()[0].upper() == name]


def dockerfile_user() -> tuple[int, int]:
    user = instructions("USER")[-1]
    uid, _, gid = user.partition(":")
    return int(uid), int(gid or uid)


def test_dockerfile_base_images_are_slim_python() -> None:
    args = dict(arg.split("=", 1) for arg in instructions("ARG") if "=" in arg)
    bases = [
        line.split()[0].replace("${PYTHON_VERSION}", args["PYTHON_VERSION"]) for line in instructions("FROM")
    ]
    assert bases and all(re.fullmatch(r"python:3\.1[1-9]-slim", base) for base in bases), bases


def test_dockerfile_runs_the_cli_as_a_non_root_user() -> None:
    uid, gid = dockerfile_user()
    assert uid != 0 and gid != 0
    entrypoint = json.loads(instructions("ENTRYPOINT")[-1])  # the exec form: signals reach the process
    assert entrypoint[-1] == "kcl-daemon" and entrypoint[0] == "/usr/bin/tini"
    params = run_arguments(json.loads(instructions("CMD")[-1]))
    assert params["metrics_port"] == PORT and instructions("EXPOSE") == [str(PORT)]
    assert HEALTHZ in instructions("HEALTHCHECK")[0]


def test_dockerfile_holds_no_credentials() -> None:
    secret = re.compile(
        r"(AWS_ACCESS_KEY_ID|AWS_SECRET|AWS_SESSION_TOKEN|PASSWORD|SECRET|TOKEN|AKIA[0-9A-Z]{16})", re.I
    )
    for name in ("ENV", "ARG", "LABEL"):
        for line in instructions(name):
            assert not secret.search(line), line
    assert not any(".aws" in line for line in instructions("COPY") + instructions("ADD"))


def test_every_recipe_is_documented() -> None:
    page = (REPO / "docs" / "deployment.md").read_text()
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file()):
        assert str(path.relative_to(REPO)) in page, (
            f"{path.relative_to(REPO)} is not described in docs/deployment.md"
        )
