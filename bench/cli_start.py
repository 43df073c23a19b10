"""How long ``signoff --help`` takes next to ``python -c pass``; print the figures.

    python bench/cli_start.py [--runs 7]

Each command runs ``--runs`` times as a fresh process (the same interpreter as this script,
``-m bot.cli`` for the CLI, as the installed ``signoff`` script does it) and the median wall
time of each is printed with their ratio. The target is a ratio of at most 5: the CLI imports
the chat SDKs and the web server only in the commands that need them. Figures are printed,
never asserted; ``python -X importtime -m bot.cli --help`` shows where the time goes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def wall_time(command: list[str]) -> float:
    """Seconds from start to exit of one ``command`` (its output is thrown away)."""
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def median_time(command: list[str], runs: int) -> float:
    wall_time(command)  # warm the file cache and the bytecode cache first
    return statistics.median(wall_time(command) for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each command (default 7)")
    args = parser.parse_args()
    bare = median_time([sys.executable, "-c", "pass"], args.runs)
    cli = median_time([sys.executable, "-m", "bot.cli", "--help"], args.runs)
    print(f"median of {args.runs} runs")
    print(f"{'python -c pass':<16} {bare * 1000:8.0f} ms")
    print(f"{'signoff --help':<16} {cli * 1000:8.0f} ms")
    print(f"{'ratio':<16} {cli / bare:8.1f} x   (target: at most 5 x)")


if __name__ == "__main__":
    main()
