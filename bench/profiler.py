"""py-spy on the service during one measured run: where the time per request goes.

``python -m bench --profile`` runs each scenario once more after its measured rounds, with
py-spy recording the service's process (and its workers) at 250 Hz, and writes a flame
graph (``<scenario>.svg``) and the collapsed stacks (``<scenario>.txt``, one
``frame;frame;... count`` line per stack) into the configuration's results directory.
That extra run is not in the table: py-spy samples from outside and slows the service.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SAMPLE_RATE_HZ = 250
PY_SPY_SLACK_S = 10


class PySpyMissing(RuntimeError):
    def __init__(self) -> None:
        super().__init__("py-spy is not installed: pip install py-spy")


def py_spy_path() -> str:
    path = shutil.which("py-spy")
    if path is None:
        raise PySpyMissing
    return path


def start(pid: int, duration_s: int, destination: Path) -> list[subprocess.Popen[bytes]]:
    """Two recorders of the same window: a flame graph and the raw collapsed stacks."""
    recorders = []
    for output_format, suffix in (("flamegraph", ".svg"), ("raw", ".txt")):
        argv = [
            py_spy_path(), "record", "--pid", str(pid), "--subprocesses", "--nonblocking",
            "--rate", str(SAMPLE_RATE_HZ), "--duration", str(duration_s),
            "--format", output_format, "--output", str(destination.with_suffix(suffix)),
        ]  # fmt: skip
        recorders.append(
            subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: S603 (our own argv)
        )
    return recorders


def finish(recorders: list[subprocess.Popen[bytes]], duration_s: int) -> None:
    for recorder in recorders:
        try:
            recorder.wait(timeout=duration_s + PY_SPY_SLACK_S)
        except subprocess.TimeoutExpired:
            recorder.kill()
