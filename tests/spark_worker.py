"""One local Spark in a worker process of its own, on pyspark 4.1 from the runners' cache: the
plumbing that Spark's Iceberg reader (:class:`iceberg_catalogs.SparkIceberg`) and Spark with
Delta Lake (:class:`spark_delta.SparkDelta`) share.

::

    class SparkDelta(SparkWorker):      what a subclass gives
        name = "Spark's Delta reader"   in every error message
        log_name = "spark-delta"        the log's name (spark-delta.log) and the temporary dirs' prefix
        app_name = "..."                Spark's application name
        paths = staticmethod(...)       () -> (pyspark 4.1 directory, jars): see spark_paths
        mask = staticmethod(...)        (text, conf) -> text with the conf's secret values masked
        session_conf(cls)               the Spark's own settings (run in the worker)
        read(session, request)          a request that is not SQL, in its new session (in the worker)

The worker is this file run with pyspark 4.1 first on its path (``--spark-worker``), the
subclass named by its module's file and its name. Its first answer (the hello) gives Spark's
version; then each request, a JSON line on its stdin, runs in a new ``spark.newSession()``
configured with the request's ``conf`` (``"sql"``: statements in order, the last one's rows;
otherwise the subclass's :meth:`SparkWorker.read`) and its table comes back as an Arrow IPC
file; answers are JSON lines on a pipe of its own. Its log (Spark's included) is ``log_path``.

:func:`local_session` is the tests' local Spark (``local[1]``, UTC, no UI, loopback, one
shuffle partition), the worker's and conftest's in-process ``spark`` fixture's alike.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import pyarrow as pa

#: The pyspark of the worker (scripts/fetch-runners.sh).
SPARK_VERSION = "4.1.4"
#: The settings of every local Spark of the tests.
LOCAL_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "1",
}


class SparkSetupError(RuntimeError):
    """Spark's Iceberg or Delta reader is missing (run ``make runners``) or did not start."""


def local_session(app_name: str, conf: Optional[Mapping[str, str]] = None) -> Any:
    """A local ``SparkSession`` (``local[1]``, :data:`LOCAL_CONF` and ``conf``), logging errors only."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").appName(app_name).config(map={**LOCAL_CONF, **(conf or {})})
    session = spark.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def spark_paths(
    runner: str, jar_files: Sequence[str], jars_what: str, name: str, cache: Optional[str] = None
) -> Tuple[str, List[str]]:
    """(the pyspark 4.1 directory to put first on the worker's path, the jars of ``runner``), from
    the runners' cache that ``scripts/fetch-runners.sh`` fills; a :class:`SparkSetupError` naming
    what is missing when its stamps or any of ``jar_files`` are not there."""
    cache = cache or os.environ.get("BEAM_S3_SINK_CACHE") or os.path.expanduser("~/.cache/beam-s3-sink")
    python, lib = os.path.join(cache, "pyspark-4.1"), os.path.join(cache, runner, "lib")
    jars = sorted(glob.glob(os.path.join(lib, "*.jar")))
    missing = []
    if not (os.path.exists(os.path.join(python, ".stamp")) and os.path.isdir(os.path.join(python, "pyspark"))):
        missing.append(f"pyspark {SPARK_VERSION} in {python}")
    names = " ".join(os.path.basename(j) for j in jars)
    if not os.path.exists(os.path.join(cache, runner, ".stamp")) or not all(f in names for f in jar_files):
        missing.append(f"{jars_what} in {lib}")
    if missing:
        raise SparkSetupError(
            f"{name} is not fetched ({'; '.join(missing)}): run `make runners` (scripts/fetch-runners.sh)"
        )
    return python, jars


class SparkWorker:
    """One local Spark in a worker process for its whole life: SQL statements (:meth:`sql`) and
    the subclass's requests (:meth:`_request`), each in a new Spark session with the request's
    settings."""

    name = "Spark"
    log_name = "spark"
    app_name = "beam-s3-sink-spark"
    paths: Callable[[], Tuple[str, List[str]]]
    mask: Callable[[str, Mapping[str, str]], str]

    def __init__(self, log_dir: Optional[str] = None, timeout: float = 180.0) -> None:
        python, jars = self.paths()
        self.log_path = os.path.join(log_dir or tempfile.mkdtemp(prefix=f"{self.log_name}-"), f"{self.log_name}.log")
        self._dir = tempfile.mkdtemp(prefix=f"{self.log_name}-io-")
        self._lock = threading.Lock()
        read_fd, write_fd = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([python] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env["SPARK_HOME"] = os.path.join(python, "pyspark")
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        worker = [os.path.abspath(sys.modules[type(self).__module__].__file__ or ""), type(self).__name__]
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--spark-worker", str(write_fd), *worker, json.dumps(jars)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                pass_fds=(write_fd,),
                start_new_session=True,
            )
        os.close(write_fd)
        self._answers = os.fdopen(read_fd, "r", encoding="utf-8")
        try:
            hello = self._answer(timeout)
        except BaseException:
            self.stop()
            raise
        self.spark_version = hello.get("spark")
        self.started_in = time.monotonic() - started

    def _answer(self, timeout: float) -> Dict[str, Any]:
        result: List[str] = []
        reader = threading.Thread(target=lambda: result.append(self._answers.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not result or not result[0]:
            state = "did not answer" if reader.is_alive() else f"exited ({self.process.poll()})"
            raise SparkSetupError(f"{self.name} {state}; its log's tail:\n{self.log_tail()}")
        return json.loads(result[0])

    def sql(self, conf: Mapping[str, str], statements: Sequence[str], timeout: float = 600.0) -> pa.Table:
        """``spark.sql(s)`` for each of ``statements`` in order, in one new session configured
        with ``conf``; the last one's rows as Arrow (``.toArrow()``)."""
        what = f"Spark SQL ({len(statements)} statement(s))"
        return self._request({"conf": dict(conf), "sql": list(statements)}, what, timeout)

    def _request(self, request: Dict[str, Any], what: str, timeout: float) -> pa.Table:
        out = os.path.join(self._dir, f"{uuid.uuid4().hex}.arrow")
        conf = request["conf"]
        with self._lock:
            if self.process.poll() is not None:
                raise SparkSetupError(f"{self.name} exited ({self.process.returncode}):\n{self.log_tail()}")
            assert self.process.stdin is not None
            self.process.stdin.write((json.dumps({**request, "out": out}) + "\n").encode())
            self.process.stdin.flush()
            answer = self._answer(timeout)
        if "error" in answer:
            raise RuntimeError(self.mask(f"{what} failed: {answer['error']}", conf))
        try:
            with pa.memory_map(out) as source:
                return pa.ipc.open_file(source).read_all()
        finally:
            os.unlink(out)

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.close()
                self.process.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(10)
        self._answers.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- in the worker process ---------------------------------------------------------------

    @classmethod
    def session_conf(cls) -> Dict[str, str]:
        """The worker's Spark's own settings (jars aside), called in the worker."""
        return {}

    @staticmethod
    def read(session: Any, request: Dict[str, Any]) -> Any:
        """A request that is not SQL, run in the worker in its new ``session``: a DataFrame."""
        raise NotImplementedError


def _serve(answer_fd: int, worker: type, jars: List[str]) -> None:
    """The worker's loop (run by :class:`SparkWorker` with pyspark 4.1 first on its path)."""
    answers = os.fdopen(answer_fd, "w", encoding="utf-8")

    def send(message: Dict[str, Any]) -> None:
        answers.write(json.dumps(message) + "\n")
        answers.flush()

    spark = local_session(worker.app_name, {"spark.jars": ",".join(jars), **worker.session_conf()})
    send({"spark": spark.version})
    for line in sys.stdin:
        request = json.loads(line)
        try:
            session = spark.newSession()
            for key, value in request["conf"].items():
                session.conf.set(key, value)
            if "sql" in request:
                for number, statement in enumerate(request["sql"], 1):
                    try:
                        frame = session.sql(statement)
                    except Exception as exc:  # noqa: BLE001 - which statement, then the error
                        raise RuntimeError(f"statement {number} ({statement[:300]!r}): {exc}") from exc
            else:
                frame = worker.read(session, request)
            table = frame.toArrow()
            with pa.OSFile(request["out"], "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
            send({"rows": table.num_rows})
        except Exception as exc:  # noqa: BLE001 - reported to the test, which raises it
            send({"error": f"{type(exc).__name__}: {str(exc)[:4000]}"})
    spark.stop()


def _worker_class(module_file: str, name: str) -> type:
    """The :class:`SparkWorker` subclass ``name`` of the module at ``module_file``."""
    sys.path.insert(0, os.path.dirname(module_file))
    return getattr(importlib.import_module(os.path.splitext(os.path.basename(module_file))[0]), name)


if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "--spark-worker":
    _serve(int(sys.argv[2]), _worker_class(sys.argv[3], sys.argv[4]), json.loads(sys.argv[5]))
