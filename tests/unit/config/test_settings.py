"""Loading settings: every problem at once, units, Java-compatible keys, YAML."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcl_daemon.config.keys import KEYS
from kcl_daemon.config.settings import Settings, load_settings
from kcl_daemon.errors import ConfigError


def write(tmp_path: Path, text: str, name: str = "app.properties") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_values_units_and_sources(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "executableName = node  app.js --x\ntimeoutInSeconds = 2.5\n"
        "childRestartBackoffMillis = 250\ncallProcessRecordsEvenForEmptyRecordList = yes\n",
    )
    settings = load_settings(path)
    assert settings.executable == ("node", "app.js", "--x")
    assert settings.action_timeout_s == 2.5
    assert settings.child_restart_backoff_s == 0.25
    assert settings.call_process_records_even_for_empty_record_list is True
    assert settings.sources["timeoutInSeconds"] == f"{path}:2"
    assert settings.sources["maxRecords"] == "default"


def test_explicit_false_and_zero_are_honoured(tmp_path: Path) -> None:
    settings = load_settings(
        write(
            tmp_path,
            "executableName=x\ncallProcessRecordsEvenForEmptyRecordList=false\nchildRestartBackoffMillis=0\n",
        )
    )
    assert settings.call_process_records_even_for_empty_record_list is False
    assert settings.child_restart_backoff_s == 0.0


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "maxRecords = ten\ntimeoutInSeconds = -1\ncallProcessRecordsEvenForEmptyRecordList = perhaps\n",
    )
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    problems = info.value.problems
    assert len(problems) == 4
    assert f"{path}:1: maxRecords 'ten' is not a whole number" in problems
    assert any("timeoutInSeconds" in p and "minimum" in p for p in problems)
    assert any("'perhaps' is not a boolean" in p for p in problems)
    assert any("required key executableName is missing" in p for p in problems)


def test_unknown_keys_warn_but_java_keys_do_not(tmp_path: Path) -> None:
    settings = load_settings(
        write(
            tmp_path,
            "executableName=x\nfailoverTimeMillis=10000\nAWSCredentialsProvider=DefaultCredentialsProvider\n"
            "maxActiveThreads=8\nfailovertimemillis=5\n",
        )
    )
    assert settings.warnings == (
        f"{tmp_path / 'app.properties'}:5: unknown key 'failovertimemillis' is ignored - did you mean "
        "'failoverTimeMillis'?",
    )
    assert settings.ignored == {"maxActiveThreads": ("8", f"{tmp_path / 'app.properties'}:4")}


def test_yaml(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "executableName: python3 app.py\nmaxRecords: 500\ncallProcessRecordsEvenForEmptyRecordList: true\n",
        name="app.yaml",
    )
    settings = load_settings(path)
    assert settings.executable == ("python3", "app.py")
    assert settings.max_records == 500
    assert settings.call_process_records_even_for_empty_record_list is True


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("app.yaml", "- a\n- b\n", "must be a mapping"),
        ("app.yaml", "a: [unclosed\n", "invalid YAML"),
        ("app.properties", "a=\\uZZZZ\n", "app.properties:1: malformed"),
    ],
)
def test_unreadable_files(tmp_path: Path, name: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(write(tmp_path, text, name=name))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "nope.properties")


def test_key_table_matches_settings_fields() -> None:
    fields = set(Settings.__dataclass_fields__) - {"sources", "warnings", "ignored"}
    assert {key.field for key in KEYS} == fields


#: Settings fields no concern's slice carries: the AWS clients' (``aws.clients.client_settings_from``),
#: the loader's bookkeeping, keys accepted and not acted on, and the raw values behind ``effective_*``.
NOT_IN_A_SLICE = {
    "aws_credentials_provider",
    "aws_credentials_provider_cloudwatch",
    "aws_credentials_provider_dynamodb",
    "region_name",
    "ignored",
    "warnings",
    "list_shards_backoff_s",
    "max_list_shards_retry_attempts",
    "processing_language",
    "skip_shard_sync_at_worker_initialization_if_leases_exist",
    "validate_sequence_number_before_checkpointing",
    "leader_lock_duration_s",
    "leader_lock_heartbeat_s",
    "lease_assignment_interval_s",
    "lease_expiry_check_interval_s",
    "stream_name",
    "table_name",
}


def test_each_setting_reaches_its_concern_through_a_slice() -> None:
    """A new key lands in a concern's slice (config/slices.py), or on purpose in NOT_IN_A_SLICE."""
    import ast
    import dataclasses

    from kcl_daemon.config import slices

    tree = ast.parse(Path(slices.__file__).read_text(encoding="utf-8"))
    read = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "settings"
    }
    fields = {field.name for field in dataclasses.fields(Settings)}
    assert fields - read == NOT_IN_A_SLICE
    settings = Settings(application_name="app", failover_s=4.0, leader_lock_duration_s=8.0, stream_name="s")
    assert settings.leases().expiry_check_s == settings.effective_lease_expiry_check_s == 0.4
    assert settings.leases().assignment_interval_s == 8.0
    assert (settings.leader().lock_duration_s, settings.leader().lock_heartbeat_s) == (8.0, 2.0)
    assert settings.tables() == slices.TableNames("app", "app-CoordinatorState", "app-WorkerMetricStats")
    assert Settings().tables() is None
    assert settings.shards().stream_name == settings.retrieval().stream_name == "s"
