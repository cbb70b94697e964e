"""Run the daemon with no AWS account and no network: an embedded moto backend on 127.0.0.1, a
provisioned sample stream, and a sample producer. Needs the ``local`` extra (moto's server).

:func:`local_stack` is the entry point; :class:`EmbeddedBackend` and :class:`Producer` are its parts.

May import: ``inspection``, ``aws``, ``config``, ``core`` and the root utilities.
"""

from kcl_daemon.local.embedded import EmbeddedBackend, LocalBackendUnavailable
from kcl_daemon.local.producer import Producer, ProducerStats, partition_keys_for
from kcl_daemon.local.stack import LocalStack, local_stack

__all__ = [
    "EmbeddedBackend",
    "LocalBackendUnavailable",
    "LocalStack",
    "Producer",
    "ProducerStats",
    "local_stack",
    "partition_keys_for",
]
