"""The Go client (clients/go): its own tests, the golden transcripts against its conformance processor,
and the sample processor's build. Everything builds offline, with the Go caches inside the checkout."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.requirements import require_tool
from tests.support.transcripts import Transcript, client_transcripts, large_batch, replay

pytestmark = pytest.mark.clients

CLIENT = REPO / "clients" / "go"
SAMPLE = REPO / "samples" / "go"
GO_CACHE = REPO / ".cache" / "go"


@pytest.fixture(scope="session")
def go_env() -> dict[str, str]:
    """The environment for every go command: standard library only, no network, caches in .cache/go."""
    require_tool("go")
    return {
        **os.environ,
        "GOCACHE": str(GO_CACHE / "build"),
        "GOPATH": str(GO_CACHE / "path"),
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",
        "GOTOOLCHAIN": "local",
    }


def go(env: dict[str, str], cwd: Path, *args: str) -> None:
    result = subprocess.run(["go", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"go {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="session")
def conformance(go_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    binary = tmp_path_factory.mktemp("go") / "conformance"
    go(go_env, CLIENT, "build", "-o", str(binary), "./cmd/conformance")
    return binary


def test_vet(go_env: dict[str, str]) -> None:
    go(go_env, CLIENT, "vet", "./...")


def test_unit_tests(go_env: dict[str, str]) -> None:
    go(go_env, CLIENT, "test", "./...")


@pytest.mark.parametrize("transcript", client_transcripts(lanes=True), ids=lambda t: t.name)
def test_transcript(transcript: Transcript, conformance: Path) -> None:
    replay(transcript, [str(conformance)])


def test_large_batch(conformance: Path) -> None:
    replay(large_batch(), [str(conformance)])


def test_sample_builds(go_env: dict[str, str], tmp_path: Path) -> None:
    go(go_env, SAMPLE, "vet", ".")
    go(go_env, SAMPLE, "build", "-o", str(tmp_path / "sample-processor"), ".")
    assert (tmp_path / "sample-processor").is_file()
