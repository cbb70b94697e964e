"""Every command maps errors to exit statuses through one context manager (``cli.exit_on_errors``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcl_daemon import cli
from kcl_daemon.errors import ConfigError, ExitStatus, RecordsFileError, TransientNetwork
from kcl_daemon.stopping import StoppedAtOnce


def status_of(exc: BaseException, **kwargs: object) -> tuple[int, str]:
    def body() -> None:
        raise exc

    with pytest.raises(SystemExit) as exited, cli.exit_on_errors(**kwargs):  # type: ignore[arg-type]
        body()
    code = exited.value.code
    assert isinstance(code, int)
    return code, ""


@pytest.mark.parametrize(
    ("error", "kwargs", "status", "message"),
    [
        (
            ConfigError(["failoverTimeMillis: not a number (app.properties:3)"]),
            {},
            ExitStatus.CONFIG,
            "1 problem",
        ),
        (RecordsFileError("records.jsonl:4: not JSON"), {}, ExitStatus.CONFIG, "records.jsonl:4"),
        (
            TransientNetwork("connect to http://u:secret@h:1"),
            {"doing": "cannot read t"},
            ExitStatus.FAILED,
            "***",
        ),
        (ValueError("bad checkpoint dir"), {"failures": (ValueError,)}, ExitStatus.FAILED, "bad checkpoint"),
    ],
)
def test_errors_map_to_one_status_each(
    error: Exception,
    kwargs: dict[str, object],
    status: ExitStatus,
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _ = status_of(error, **kwargs)
    assert code == status
    err = capsys.readouterr().err
    assert message in err
    assert "secret" not in err
    if "doing" in kwargs:
        assert err.startswith(f"kcl-daemon: {kwargs['doing']}: ")


def test_a_second_signal_exits_interrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        cli, "exit_promptly", lambda code, older=frozenset(): (_ for _ in ()).throw(SystemExit(code))
    )
    code, _ = status_of(StoppedAtOnce("second signal: stopped at once"))
    assert code == ExitStatus.INTERRUPTED == 130


def test_other_errors_are_not_swallowed() -> None:
    with pytest.raises(ZeroDivisionError), cli.exit_on_errors():
        _ = 1 / 0


def test_exit_statuses_are_defined_once() -> None:
    assert [(s.name, int(s)) for s in ExitStatus] == [
        ("OK", 0),
        ("FAILED", 1),
        ("CONFIG", 2),
        ("INTERRUPTED", 130),
    ]
    source = Path(cli.__file__).read_text(encoding="utf-8")
    assert "sys.exit(1)" not in source and "sys.exit(2)" not in source and "EXIT_" not in source
