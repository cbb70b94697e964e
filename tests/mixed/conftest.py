"""Mixed fleets with the real Java MultiLangDaemons: the emulator fixtures of tests/integration."""

from tests.integration.conftest import (  # noqa: F401 - fixtures, registered by being imported here
    aws_clients,
    aws_env,
    backend,
    dynalite_endpoint,
    emulator_logs,
    kinesalite_endpoint,
    lease_table,
    make_stream,
    moto_endpoint,
    pytest_terminal_summary,
)
