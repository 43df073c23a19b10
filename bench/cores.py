"""How much work 1, 2 and 3 busy Python processes get done here at once; print the figures.

    python bench/cores.py [--seconds 3] [--rounds 3]

Each process runs the same pure-Python loop (dict and string work, no I/O) for ``--seconds``
and counts its iterations. The ratio of 2 processes' total to 1 process's is the most that 2
replicas can gain over 1 on this machine when each replica is bound by its own core and
nothing else runs: ``bench/replicas.py``'s ratio also shares the cores with PostgreSQL and its
driver, so it stays below this one. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time


def spin(
    seconds: float, started: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue[int]
) -> None:
    started.wait()
    deadline = time.perf_counter() + seconds
    done = 0
    table: dict[str, int] = {}
    while time.perf_counter() < deadline:
        for i in range(1_000):
            key = f"k{i % 97}"
            table[key] = table.get(key, 0) + i
        done += 1
    out.put(done)


def measure(processes: int, seconds: float) -> int:
    """The loops the ``processes`` processes completed together in ``seconds``."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(processes)
    out: multiprocessing.Queue[int] = ctx.Queue()
    procs = [ctx.Process(target=spin, args=(seconds, barrier, out)) for _ in range(processes)]
    for p in procs:
        p.start()
    total = sum(out.get() for _ in procs)
    for p in procs:
        p.join()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; {args.seconds:g} s per measurement, {args.rounds} rounds")
    print(f"{'processes':>9}  {'loops/s':>10}  {'x one':>6}")
    ratios: dict[int, list[float]] = {2: [], 3: []}
    for _ in range(args.rounds):
        one = measure(1, args.seconds) / args.seconds
        print(f"{1:>9}  {one:>10,.0f}  {1:>6.2f}")
        for n in (2, 3):
            rate = measure(n, args.seconds) / args.seconds
            ratios[n].append(rate / one)
            print(f"{n:>9}  {rate:>10,.0f}  {rate / one:>6.2f}")
    print(
        "medians: "
        + "; ".join(f"{n} processes x{statistics.median(r):.2f}" for n, r in ratios.items())
    )


if __name__ == "__main__":
    main()
