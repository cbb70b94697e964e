"""What a new Spark source runner costs before its first plan: its imports, in fresh processes.

Spark starts the streaming source runner as a new Python process for every query, with
``$SPARK_HOME/python/lib/pyspark.zip`` first on its path. This starts ``--runs`` fresh interpreters
per row (the rows taking turns) and reports the best and median wall and CPU seconds (the children's
user + system time) of:

* Python alone;
* pyspark's runner module imported from the installed ``pyspark.zip`` (sources only: compiled on
  every start), from a copy that carries bytecode (``bench/_spark_home.py``), and from site-packages;
* the runner module and ``kcl_daemon.spark.source`` (what unpickling the data source loads) from the
  installed zip, for this checkout and, with ``--compare DIR``, for another checkout; for these, also
  the source's own import, timed inside the process (best / median).

No emulator, no Spark session: only imports.

    .venv/bin/python bench/spark_runner_start.py --compare /path/to/other/checkout
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: bench

from bench._spark_home import compiled_spark_home

CHECKOUT = Path(__file__).resolve().parents[1]
RUNNER = "import pyspark.sql.streaming.python_streaming_source_runner"


def timed_once(path: list[str], code: str) -> tuple[float, float, float | None]:
    """Wall and CPU seconds of one fresh interpreter running ``code`` with ``path`` as PYTHONPATH, and
    what it printed (the seconds of the source's own import, measured inside it), if anything."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    inner = float(done.stdout) if done.stdout.strip() else None
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, inner


def checkout_path(root: Path) -> list[str]:
    return [str(root), str(root / "protocol"), str(root / "clients" / "python")]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--compare", type=Path, help="another checkout whose source import to time too")
    args = parser.parse_args()
    import pyspark

    installed_zip = str(Path(pyspark.__file__).parent / "python" / "lib" / "pyspark.zip")
    source = (
        f"{RUNNER}; import time; t = time.perf_counter(); import kcl_daemon.spark.source; "
        "print(time.perf_counter() - t)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        compiled_zip = str(compiled_spark_home(Path(tmp)) / "python" / "lib" / "pyspark.zip")
        rows: dict[str, tuple[list[str], str]] = {
            "Python alone": ([], "pass"),
            "runner, pyspark from the installed zip": ([installed_zip], RUNNER),
            "runner, pyspark from a compiled zip": ([compiled_zip], RUNNER),
            "runner, pyspark from site-packages": ([], RUNNER),
            "runner + source, installed zip": ([installed_zip, *checkout_path(CHECKOUT)], source),
        }
        if args.compare:
            rows[f"runner + source of {args.compare}"] = (
                [installed_zip, *checkout_path(args.compare.resolve())],
                source,
            )
        print(f"fresh interpreters, {args.runs} each: wall s (best / median), CPU s (best / median)")
        walls: dict[str, list[float]] = {name: [] for name in rows}
        cpus: dict[str, list[float]] = {name: [] for name in rows}
        inners: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.runs):  # the rows take turns, so a busy moment does not fall on one row
            for name, (path, code) in rows.items():
                wall, cpu, inner = timed_once(path, code)
                walls[name].append(wall)
                cpus[name].append(cpu)
                if inner is not None:
                    inners[name].append(inner)
        for name in rows:
            own = inners[name]
            print(
                f"  {name:<48} {min(walls[name]):.3f} / {statistics.median(walls[name]):.3f}   "
                f"{min(cpus[name]):.3f} / {statistics.median(cpus[name]):.3f}"
                + (f"   source import {min(own):.3f} / {statistics.median(own):.3f}" if own else "")
            )


if __name__ == "__main__":
    main()
