"""One botocore data loader per test process, shared by every session (test helper).

botocore gives each session a loader of its own, and a loader reads and parses the service models and the
endpoint tables (megabytes of JSON) the first time a client of that session needs them. The daemon builds
one session per credential chain and keeps it; the tests build sessions by the hundred (a client factory
per case), so the same JSON was parsed again for each: half the CPU of the AWS component tests.
:func:`share_loaders` makes the sessions of this process share one loader per data path, so each file is
parsed once per process. Nothing the tests check changes: a loader only reads botocore's own data files,
and the clients of one session already share what it loaded. The daemons the tests start as processes
keep botocore's own behaviour. Independent of kcl_daemon.
"""

from __future__ import annotations

import threading
from typing import Any

import botocore.loaders  # noqa: TID251 - the test process shares botocore's model loader
import botocore.session  # noqa: TID251

_LOADERS: dict[Any, botocore.loaders.Loader] = {}
_LOCK = threading.Lock()


def _loader_for(session: botocore.session.Session) -> botocore.loaders.Loader:
    data_path = session.get_config_variable("data_path")
    with _LOCK:
        if data_path not in _LOADERS:
            _LOADERS[data_path] = botocore.loaders.create_loader(data_path)
        return _LOADERS[data_path]


def _register_shared_loader(self: botocore.session.Session) -> None:
    self._components.lazy_register_component("data_loader", lambda: _loader_for(self))


def share_loaders() -> None:
    """From now on, every botocore session of this process reads through the shared loader of its data
    path (``AWS_DATA_PATH``; botocore's own data when unset)."""
    botocore.session.Session._register_data_loader = _register_shared_loader  # type: ignore[method-assign]
