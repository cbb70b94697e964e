"""A Spark home whose ``python/lib/pyspark.zip`` carries compiled bytecode, for the benchmarks'
``--compiled-pyspark-zip``.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the path of every Python process it starts,
and the zip (pip's pyspark ships it so) holds only sources: Python compiles every pyspark module it
imports from it, on every start, and never keeps the result. Processes forked from pyspark's worker
daemon pay that once per session; those Spark starts fresh pay it each time (the streaming source
runner: once per query). This builds, under ``root``, a Spark home of links to the installed one with
a copy of the zip that holds a ``.pyc`` next to each ``.py`` (zipimport uses them), and returns it;
set ``SPARK_HOME`` to it before the session starts.
"""

from __future__ import annotations

import os
import py_compile
import warnings
import zipfile
from pathlib import Path

import pyspark


def compiled_spark_home(root: Path) -> Path:
    installed = Path(pyspark.__file__).parent
    home = root / "spark-home"
    lib = home / "python" / "lib"
    lib.mkdir(parents=True)
    for entry in installed.iterdir():
        if entry.name != "python":
            (home / entry.name).symlink_to(entry)
    for entry in (installed / "python").iterdir():
        if entry.name != "lib":
            (home / "python" / entry.name).symlink_to(entry)
    for entry in (installed / "python" / "lib").iterdir():
        if entry.name != "pyspark.zip":
            (lib / entry.name).symlink_to(entry)
    sources = root / "pyspark-sources"
    with zipfile.ZipFile(installed / "python" / "lib" / "pyspark.zip") as original:
        original.extractall(sources)
    with (
        zipfile.ZipFile(lib / "pyspark.zip", "w", zipfile.ZIP_STORED) as compiled,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")  # SyntaxWarnings of pyspark's own tests
        for path in sorted(sources.rglob("*")):
            name = str(path.relative_to(sources))
            compiled.write(path, name)
            if path.suffix == ".py":
                try:
                    py_compile.compile(str(path), cfile=str(path.with_suffix(".pyc")), doraise=True)
                except py_compile.PyCompileError:
                    continue  # left to compile at import, as before
                compiled.write(path.with_suffix(".pyc"), name[:-3] + ".pyc")
    os.utime(lib / "pyspark.zip")
    return home
