#!/usr/bin/env python3
"""Writes a synthetic cellular capacity trace in Mahimahi's format.

Not a recording: a seeded random walk of the link rate (one step every
100 ms between 1 and 24 Mbit/s of full-size packets), with two fades to no
capacity at all (300 ms at 4.0 s, 150 ms at 7.5 s), turned into delivery
opportunities: one line per 1500-byte packet, the millisecond it may leave
at. The file loops; its last line is its period (10 s).

    scripts/gen-mahimahi-trace.py > conf/links/synthetic-cellular.mahimahi
"""

import random
import sys

PERIOD_MS = 10_000
PACKET_BITS = 1500 * 8
FADES = [(4000, 300), (7500, 150)]  # (start ms, length ms)


def main() -> None:
    rng = random.Random(35)
    rate = 10e6
    credit = 0.0
    lines = []
    for ms in range(1, PERIOD_MS + 1):
        if ms % 100 == 1:
            rate = min(24e6, max(1e6, rate * rng.uniform(0.75, 1.3)))
        if any(s <= ms < s + n for s, n in FADES):
            continue
        credit += rate / 1000 / PACKET_BITS
        while credit >= 1.0:
            lines.append(ms)
            credit -= 1.0
    if not lines or lines[-1] != PERIOD_MS:
        lines.append(PERIOD_MS)
    sys.stdout.write("".join(f"{ms}\n" for ms in lines))
    mean = len(lines) * PACKET_BITS / (PERIOD_MS / 1000)
    print(f"{len(lines)} opportunities, mean {mean / 1e6:.3f} Mbit/s of "
          f"1500-byte packets", file=sys.stderr)


if __name__ == "__main__":
    main()
