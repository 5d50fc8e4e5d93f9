#!/usr/bin/env python3
"""Writes memcached_etc.cdf: Facebook's Memcached "ETC" value sizes, the Memcached workload of
Pyrrha (NSDI '25) §6 ("Memcached is composed of small flows, where most of the flows are smaller
than 1KB", cited as Homa [67]; Homa's workload W1).

Origin of every number (nothing here is fitted or chosen by us):

* Atikoglu, Xu, Frachtenberg, Jiang, Paleczny, "Workload Analysis of a Large-Scale Key-Value
  Store", ACM SIGMETRICS 2012: the ETC pool's value sizes. Below 15 bytes the measured
  distribution; from 15 bytes on the paper's fit, a Generalized Pareto distribution with
  location 15 B (cumulative 0.47 there), scale sigma = 214.476 and shape k = 0.348238.
* Homa's simulation artefact (PlatformLab/HomaSimulation, RpcTransportDesign/OMNeT++Simulation/
  homatransport/sizeDistributions/FacebookKeyValueMsgSizeDist.txt and .r) tabulates the
  cumulative probabilities of sizes 1..15 B from that paper (size 0 folded into size 1); they
  are HEAD below.
* Pyrrha's ns-3 artefact (NASA-NJU/Pyrrha-NS3, scratch/third.cc, getCdfFromFile(4), "W1")
  reads that same table and appends the Generalized Pareto tail as TAIL below does: 1000 equal
  probability steps from 0.47 to 0.999, size = round(15 + ((1 - 0.47) / (1 - p))^k - 1) * sigma
  / k), equal sizes merged (the later probability kept), the last point's probability set to 1.
  The increments are accumulated in double arithmetic, so the last step taken is p = 0.998471
  (not 0.999) and the distribution ends at 4120 B.

Output format (SOURCES.md): "<bytes> <cumulative percent>" per line, from "0 0" to 100.
Run from the repository root: python3 deploy/workloads/gen_memcached_etc.py
"""

import math
import os

# Cumulative probability of value sizes 1..15 bytes (Homa's FacebookKeyValueMsgSizeDist.txt).
HEAD = [
    (1, 0.00583), (2, 0.18403), (3, 0.27642), (4, 0.27660), (5, 0.30400),
    (6, 0.30465), (7, 0.31071), (8, 0.31094), (9, 0.31931), (10, 0.32768),
    (11, 0.41757), (12, 0.41849), (13, 0.42175), (14, 0.44155), (15, 0.47),
]
# Atikoglu et al.'s Generalized Pareto fit of ETC value sizes above 15 bytes.
K = 0.348238
SIGMA = 214.476
MAX_PROB = 0.999
STEPS = 1000
LAST_STEP = None


def points():
    pts = list(HEAD)
    size_offset, prob_offset = pts[-1]
    incr = (MAX_PROB - prob_offset) / STEPS
    prob = prob_offset + incr
    # The artefact's loop, in the same double arithmetic (accumulated increments).
    while prob <= MAX_PROB:
        x = size_offset + (((1 - prob_offset) / (1 - prob)) ** K - 1) * SIGMA / K
        size = math.floor(x + 0.5)  # C's round(): halves away from zero (x > 0)
        if size != pts[-1][0]:
            pts.append((size, prob))
        else:
            pts[-1] = (size, prob)
        prob += incr
    global LAST_STEP
    LAST_STEP = pts[-1][1]
    pts[-1] = (pts[-1][0], 1.0)
    return [(0, 0.0)] + pts


def main():
    pts = points()
    mean = sum((b[1] - a[1]) * (a[0] + b[0]) / 2 for a, b in zip(pts, pts[1:]))
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "memcached_etc.cdf")
    with open(out, "w") as f:
        for size, p in pts:
            f.write(f"{size} {p * 100:.6g}\n")
    print(f"{out}: {len(pts)} points, last step p = {LAST_STEP:.6f}, max {pts[-1][0]} B, "
          f"piecewise-linear mean {mean:.1f} B")


if __name__ == "__main__":
    main()
