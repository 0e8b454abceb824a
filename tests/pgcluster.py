"""A throwaway PostgreSQL cluster for the tests, from Debian's binaries.

``initdb`` makes a cluster in a temporary folder and ``pg_ctl`` starts it on a free
port of 127.0.0.1 (and a socket in that folder), trusting local connections, without
fsync (a test's data need not survive a power cut). PostgreSQL refuses to run as root:
as root, the binaries run as the ``postgres`` user the Debian package makes (through
``runuser``), and the folder is theirs. One cluster per test process
(:func:`shared_cluster`), started on first use and stopped at the end of the test
session (the ``pg_cluster`` fixture; at the process's exit otherwise): a pytest-xdist
worker that does not end within seconds is ended without its exit handlers. A cluster
whose process died anyway is stopped by the next one started (:func:`_reap_stale`).
Each test module takes a database of its own (:func:`new_database`).

`make test` installs Debian's postgresql where it is missing and it can; without it the
tests that need PostgreSQL fail saying so (never a skip)."""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

SUPERUSER = "atlas"
_held: dict[str, object] = {}
_lock = threading.Lock()


def pg_bin() -> Path | None:
    """The folder of PostgreSQL's server binaries: ``$ATLAS_PG_BIN``, Debian's newest
    ``/usr/lib/postgresql/<version>/bin``, else ``initdb`` on the ``PATH``."""
    env = os.environ.get("ATLAS_PG_BIN")
    if env and (Path(env) / "initdb").is_file():
        return Path(env)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3])
                   if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A running cluster: ``url(database)`` is its SQLAlchemy URL; ``stop()`` ends it."""

    def __init__(self) -> None:
        binaries = pg_bin()
        if binaries is None:
            raise AssertionError("PostgreSQL's server binaries (initdb, pg_ctl) are not installed: `make test` "
                                 "installs Debian's postgresql where it can; else run 'sudo apt-get install "
                                 "postgresql' or set ATLAS_PG_BIN to the folder holding initdb.")
        self.bin = binaries
        self.run_as: list[str] = []
        root = os.geteuid() == 0          # the postgres user must reach the folder: under /tmp, not $TMPDIR
        _reap_stale(Path("/tmp" if root else tempfile.gettempdir()), binaries, root)
        self.folder = Path(tempfile.mkdtemp(prefix="atlas-pg-", dir="/tmp" if root else None))
        (self.folder / "owner.pid").write_text(str(os.getpid()))
        if root:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                raise AssertionError("PostgreSQL refuses to run as root and there is no 'postgres' user to run "
                                     "it as: install Debian's postgresql package (it makes one).") from None
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            self.run_as = ["runuser", "-u", "postgres", "--"]
        self.data = self.folder / "data"
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--locale=C",
                  "--no-sync")
        for attempt in range(3):          # a free port another process took meanwhile: another port
            self.port = _free_port()
            options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
                       "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100 "
                       "-c shared_buffers=16MB")
            try:
                self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-o", options,
                          "-w", "-t", "120", "start")
                break
            except AssertionError:
                if attempt == 2:
                    raise

    def _run(self, tool: str, *args: str) -> None:
        out = subprocess.run([*self.run_as, str(self.bin / tool), *args], capture_output=True, text=True,
                             timeout=180, cwd=self.folder)
        if out.returncode != 0:
            log = self.folder / "server.log"
            raise AssertionError(f"{tool} failed ({out.returncode}): {out.stderr[-2000:]}"
                                 + (f"\n{log.read_text()[-2000:]}" if log.exists() else ""))

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def sql(self, statement: str, database: str = "postgres") -> None:
        """Run one statement outside a transaction (CREATE DATABASE, DROP DATABASE)."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user=SUPERUSER, dbname=database,
                             autocommit=True) as con:
            con.execute(statement)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def _reap_stale(base: Path, binaries: Path, root: bool) -> None:
    """Stop and remove the clusters of test processes that died without stopping theirs."""
    for pid_file in base.glob("atlas-pg-*/owner.pid"):
        try:
            os.kill(int(pid_file.read_text()), 0)
            continue                                   # its process lives: its cluster is in use
        except ProcessLookupError:
            pass
        except (ValueError, OSError):
            continue
        folder = pid_file.parent
        subprocess.run([*(["runuser", "-u", "postgres", "--"] if root else []), str(binaries / "pg_ctl"), "-D",
                        str(folder / "data"), "-m", "immediate", "-w", "stop"], capture_output=True, timeout=60,
                       cwd="/")
        shutil.rmtree(folder, ignore_errors=True)


def shared_cluster() -> Cluster:
    """This process's cluster, started on first use (about 2 s) and stopped at its exit."""
    with _lock:
        cluster = _held.get("cluster")
        if cluster is None:
            cluster = _held["cluster"] = Cluster()
            atexit.register(cluster.stop)
        return cluster


def stop_shared_cluster() -> None:
    with _lock:
        cluster = _held.pop("cluster", None)
    if cluster is not None:
        atexit.unregister(cluster.stop)
        cluster.stop()


@pytest.fixture(scope="session")
def pg_cluster():
    """This process's cluster, stopped when the test session ends."""
    yield shared_cluster()
    stop_shared_cluster()


def new_database(name: str) -> str:
    """A new, empty database in this process's cluster; its SQLAlchemy URL."""
    cluster = shared_cluster()
    cluster.sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    cluster.sql(f'CREATE DATABASE "{name}"')
    return cluster.url(name)


_numbers = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def new_history(request, tmp_path):
    """A maker of empty audit history databases of one backend (SQLAlchemy URLs): each
    test that takes it runs on an embedded SQLite file and on a real PostgreSQL server."""
    if request.param == "postgresql":
        request.getfixturevalue("pg_cluster")

    def make() -> str:
        n = next(_numbers)
        if request.param == "sqlite":
            return f"sqlite:///{tmp_path / f'history{n}.sqlite'}"
        return new_database(f"history_{os.getpid()}_{n}")

    make.backend = request.param
    return make
