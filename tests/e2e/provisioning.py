"""What the end-to-end tests provision before a server starts, through the operators' own
command line (in this process: ``run_cli_in_process``, the same ``main``)."""

from __future__ import annotations

from tests.cli.support import run_cli_in_process

# two smart plugs of the user's, and one nobody owns
PLUGS = (("SN-1", "aa:bb:cc:dd:ee:01", True), ("SN-2", "aa:bb:cc:dd:ee:02", True),
         ("SN-3", "aa:bb:cc:dd:ee:03", False))  # fmt: skip


def ok(result) -> None:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"


def client_and_user(
    database_url: str, *, client_id: str, secret: str, username: str, password: str
) -> None:
    """``clients create`` and ``users create`` (the password typed at the prompt, twice)."""
    ok(run_cli_in_process("clients", "create", client_id, "--secret", secret,
                          database_url=database_url))  # fmt: skip
    ok(run_cli_in_process("users", "create", username, input=f"{password}\n{password}\n",
                          database_url=database_url))  # fmt: skip


def plugs(database_url: str, *, owner: str) -> None:
    """``controllers add`` for each of PLUGS, the first two owned by ``owner``."""
    for serial, mac, owned in PLUGS:
        ok(run_cli_in_process("controllers", "add", serial, "--mac", mac, "--type", "smart_plug",
                              *(["--owner", owner] if owned else []),
                              database_url=database_url))  # fmt: skip
