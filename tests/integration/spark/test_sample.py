"""The sample pipeline (samples/spark/pipeline.py) on the embedded local backend, run on the tests'
cluster: every even n the producer sent ends up once in the output stream and once in parquet."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import REPO

# the first Spark test on a worker also waits for its SparkSession (JVMs) to start: 300 s, not 120
pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(300)]


def load_sample() -> Any:
    spec = importlib.util.spec_from_file_location("spark_sample", REPO / "samples" / "spark" / "pipeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_sample_pipeline_writes_every_even_record_to_both_sinks(
    spark_session: Any, tmp_path: Path
) -> None:
    pytest.importorskip("moto")
    summary = load_sample().run(spark_session, tmp_path, seconds=4.0, rate_per_s=100.0)
    assert summary.produced > 100
    assert sorted(summary.in_parquet) == sorted(summary.expected)
    assert set(summary.in_stream) == summary.expected  # at least once: duplicates would be allowed
