"""A throwaway PostgreSQL cluster that one test owns: its own data directory, port and socket.

Tests that stop the database under a running server must never touch the machine's shared
PostgreSQL, so they make their own with ``initdb`` and drive it with ``pg_ctl``. It listens
on 127.0.0.1 only, trusts every local connection, and keeps its unix socket in its own
directory; durability is switched off because the cluster lives for one test.

initdb and postgres refuse to run as root, and tests run as root in CI: then every server
command runs as the ``postgres`` OS user, which owns the directory. Every command is bounded
by a timeout, and the cluster is stopped and removed when the block ends, however it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg

from tests.processes import free_port

POSTGRES_BIN_GLOB = "/usr/lib/postgresql/*/bin"
POSTGRES_OS_USER = "postgres"
COMMAND_TIMEOUT_S = 60
PG_CTL_WAIT_S = 30
CONNECT_TIMEOUT_S = 10
# appended to postgresql.conf, so that a restart keeps them: fast, small, local-only. fsync
# off survives a killed server (the OS still has the files); synchronous_commit stays on,
# or an immediate stop would lose the last commits, and the test checks that none is lost
SERVER_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "full_page_writes": "off",
    "shared_buffers": "'16MB'",
    "max_connections": "50",
    "logging_collector": "off",
}


def postgres_bin_dir() -> Path | None:
    """The newest installed server's bin directory (it must hold initdb), or None."""
    candidates = [Path(p) for p in glob.glob(POSTGRES_BIN_GLOB) if Path(p, "initdb").exists()]
    if not candidates:
        return None

    def version(path: Path) -> tuple[int, ...]:
        name = path.parent.name
        return tuple(int(part) for part in name.split(".") if part.isdigit())

    return max(candidates, key=version)


def _running_as_root() -> bool:
    return os.geteuid() == 0


class PostgresInstance:
    """One cluster in ``root``: ``data/`` holds it, ``root`` the socket, ``server.log`` its log."""

    def __init__(self, root: Path, bin_dir: Path, port: int) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self.port = port
        self.data_dir = root / "data"
        self.log_path = root / "server.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def _run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """A server program, as the postgres OS user when we are root, bounded in time."""
        command = [str(self.bin_dir / program), *args]
        if _running_as_root():
            command = ["runuser", "-u", POSTGRES_OS_USER, "--", *command]
        # no PG* variable from the caller's shell may point the tools at another server
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        result = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            cwd=self.root,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"{program} {' '.join(args)} exited with {result.returncode}:\n"
                f"{result.stdout}\n{result.stderr}\n{self.log()}"
            )
        return result

    def initdb(self) -> None:
        self._run(
            "initdb",
            "--pgdata",
            str(self.data_dir),
            "--username",
            "postgres",
            "--auth",
            "trust",
            "--encoding",
            "UTF8",
            "--locale",
            "C",
            "--no-sync",
            "--no-instructions",
        )
        settings = {
            **SERVER_SETTINGS,
            "port": str(self.port),
            "unix_socket_directories": f"'{self.root}'",
        }
        # appending keeps the file's owner (postgres), so the server can still read it
        with (self.data_dir / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# tests/pg_instance.py\n")
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())

    def start(self) -> None:
        """Start on the same data directory and port; returns once connections are accepted."""
        self._standby_signal.unlink(missing_ok=True)
        self._pg_ctl_start()

    def start_refusing_connections(self) -> None:
        """Start a server that listens but refuses every session, as one in recovery does.

        It runs as a standby without hot standby, so each connection attempt is answered
        with SQLSTATE 57P03 ("the database system is not accepting connections"), the same
        answer a server gives while it starts up or shuts down, but for as long as the test
        needs. ``stop()`` then ``start()`` brings the ordinary server back.
        """
        self._standby_signal.touch()
        if _running_as_root():
            shutil.chown(self._standby_signal, POSTGRES_OS_USER, POSTGRES_OS_USER)
        self._pg_ctl_start("--options", "-c hot_standby=off")

    @property
    def _standby_signal(self) -> Path:
        return self.data_dir / "standby.signal"

    def _pg_ctl_start(self, *options: str) -> None:
        self._run(
            "pg_ctl",
            "--pgdata",
            str(self.data_dir),
            "--log",
            str(self.log_path),
            *options,
            "--wait",
            "--timeout",
            str(PG_CTL_WAIT_S),
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` ends sessions cleanly, ``immediate`` as a crash would."""
        self._run(
            "pg_ctl",
            "--pgdata",
            str(self.data_dir),
            "--mode",
            mode,
            "--wait",
            "--timeout",
            str(PG_CTL_WAIT_S),
            "stop",
        )

    def is_running(self) -> bool:
        status = self._run("pg_ctl", "--pgdata", str(self.data_dir), "status", check=False)
        return status.returncode == 0

    def execute(self, statement: str, database: str = "postgres") -> None:
        async def run() -> None:
            connection = await asyncpg.connect(self.url(database), timeout=CONNECT_TIMEOUT_S)
            try:
                await connection.execute(statement)
            finally:
                await connection.close()

        asyncio.run(run())

    def create_database(self, name: str) -> str:
        """A new empty database; returns its URL."""
        self.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        """Stop the server however it can be stopped, then remove everything it wrote."""
        if self.data_dir.exists():
            try:
                if self.is_running():
                    self.stop(mode="immediate")
            except (RuntimeError, subprocess.TimeoutExpired):
                self._kill_postmaster()
        shutil.rmtree(self.root, ignore_errors=True)

    def _kill_postmaster(self) -> None:
        """Last resort: its backends exit on their own once the postmaster is gone."""
        with contextlib.suppress(FileNotFoundError, ValueError, IndexError, ProcessLookupError):
            pid_line = (self.data_dir / "postmaster.pid").read_text().splitlines()[0]
            os.kill(int(pid_line), signal.SIGKILL)


@contextmanager
def private_postgresql() -> Iterator[PostgresInstance]:
    """A started cluster of our own on a free port; stopped and removed when the block ends."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        raise RuntimeError(f"no PostgreSQL server installed ({POSTGRES_BIN_GLOB}/initdb)")
    # the system temp directory, not pytest's: the postgres user must be able to reach it
    root = Path(tempfile.mkdtemp(prefix="devicecontrol-pg-"))
    if _running_as_root():
        owner = pwd.getpwnam(POSTGRES_OS_USER)
        os.chown(root, owner.pw_uid, owner.pw_gid)
    instance = PostgresInstance(root, bin_dir, free_port())
    try:
        instance.initdb()
        instance.start()
        yield instance
    finally:
        instance.destroy()
