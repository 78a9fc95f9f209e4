#!/usr/bin/python3
"""nvsim-plot.py - draw nvsim CSV results like the paper's figures.

usage: nvsim-plot.py CSV OUTDIR [--policy P] [--title T] [--mram BYTES]
                      [--prefix NAME-]

  fig3_time_vs_dram.png    time vs DRAM size, one line per policy, for the
                           MRAM size with the most DRAM points (paper Fig. 3)
  fig5_time_vs_total.png   time vs total memory (MRAM+DRAM), one line per
                           MRAM size (Fig. 5), one panel per policy: every
                           policy of the CSV, or only P with --policy P
  fig6_energy_vs_total.png energy vs total memory, same panels (Fig. 6)

Exit 2 (one line on stderr) when the CSV cannot be read or is not nvsim's,
1 when it has no rows, or none for the --policy or --mram given.
"""
import argparse
import csv
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIB = 1 << 20
INTS = ("mram_bytes", "dram_bytes", "accesses", "flash_reads",
        "flash_writes")
FLOATS = ("time_s", "energy_j", "mram_hit_rate")


def fail(msg, code=1):
    """One line on stderr, no traceback: the user's input is at fault."""
    print("nvsim-plot: " + msg, file=sys.stderr)
    sys.exit(code)


def parse_row(path, line, r):
    for k in INTS + FLOATS:
        v = r[k]
        if v is None:
            fail(f"{path} line {line}: too few fields", 2)
        try:
            r[k] = int(v) if k in INTS else float(v)
        except ValueError:
            fail(f"{path} line {line}: {k} {v!r} is not a number", 2)
    return r


def load(path):
    try:
        with open(path, newline="") as f:
            rd = csv.DictReader(f)
            need = ("policy",) + INTS + FLOATS
            if rd.fieldnames is None:
                fail(f"{path}: empty, not an nvsim CSV", 2)
            missing = [k for k in need if k not in rd.fieldnames]
            if missing:
                fail(f"{path}: not an nvsim CSV (no column "
                     f"{', '.join(missing)} in its header)", 2)
            rows = []
            for r in rd:
                rows.append(parse_row(path, rd.line_num, r))
    except UnicodeDecodeError:
        fail(f"{path}: not text, not an nvsim CSV", 2)
    except (OSError, csv.Error) as e:
        fail(f"{path}: {getattr(e, 'strerror', None) or e}", 2)
    return rows


def mib(b):
    return b / MIB


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("outdir")
    ap.add_argument("--policy", default=None)
    ap.add_argument("--title", default="")
    ap.add_argument("--mram", type=int, default=None,
                    help="MRAM size (bytes) of figure 3")
    ap.add_argument("--prefix", default="", help="file name prefix")
    a = ap.parse_args()
    rows = load(a.csv)
    if not rows:
        fail("no rows in " + a.csv)
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    mrams = sorted({r["mram_bytes"] for r in rows})
    # An option that matches no row would draw empty figures: refuse it.
    if a.policy is not None and a.policy not in policies:
        fail(f"no rows for policy '{a.policy}' (the CSV has: "
             f"{', '.join(policies)})")
    if a.mram is not None and a.mram not in mrams:
        fail(f"no rows for --mram {a.mram} (the CSV has MRAM sizes in "
             f"bytes: {', '.join(str(m) for m in mrams)})")
    try:
        os.makedirs(a.outdir, exist_ok=True)
    except OSError as e:
        fail(f"{a.outdir}: {e.strerror or e}", 2)
    t = (a.title + ": ") if a.title else ""

    # Figure 3: time vs DRAM size, per policy, at one MRAM size.
    m3 = a.mram if a.mram is not None else max(
        mrams, key=lambda m: (len({r["dram_bytes"] for r in rows
                                   if r["mram_bytes"] == m}), m))
    fig, ax = plt.subplots(figsize=(5, 3.6), dpi=90)
    for p in policies:
        pts = sorted((r["dram_bytes"], r["time_s"]) for r in rows
                     if r["policy"] == p and r["mram_bytes"] == m3)
        ax.plot([mib(x) for x, _ in pts], [y for _, y in pts], marker="o",
                ms=3, label=p)
    ax.set_xlabel("DRAM (MiB)")
    ax.set_ylabel("estimated time (s)")
    ax.set_title(f"{t}time vs DRAM, MRAM {mib(m3):g} MiB", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_yscale("log")   # before the layout, which sizes its labels
    fig.tight_layout()
    fig.savefig(os.path.join(a.outdir, a.prefix + "fig3_time_vs_dram.png"))
    plt.close(fig)

    # Figures 5 and 6: time / energy vs total memory, a line per MRAM
    # size; a panel per policy (every policy of the CSV, or --policy's),
    # on one y scale so that the panels compare.
    pols = [a.policy] if a.policy is not None else policies
    for key, name, ylabel in (("time_s", "fig5_time_vs_total.png",
                               "estimated time (s)"),
                              ("energy_j", "fig6_energy_vs_total.png",
                               "memory energy (J)")):
        fig, axes = plt.subplots(1, len(pols), figsize=(4.2 * len(pols) + 0.8, 3.6),
                                 dpi=90, sharey=True, squeeze=False)
        for ax, p in zip(axes[0], pols):
            for m in mrams:
                pts = sorted((r["mram_bytes"] + r["dram_bytes"], r[key])
                             for r in rows if r["policy"] == p and
                             r["mram_bytes"] == m)
                if not pts:
                    continue
                label = "DRAM only" if m == 0 else f"MRAM {mib(m):g} MiB"
                ax.plot([mib(x) for x, _ in pts], [y for _, y in pts],
                        marker="o", ms=3, label=label)
            ax.set_xlabel("total memory MRAM+DRAM (MiB)")
            ax.set_title(f"{t}{p}", fontsize=9)
            ax.set_yscale("log")
            ax.legend(fontsize=8)
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel(ylabel)
        fig.tight_layout()
        fig.savefig(os.path.join(a.outdir, a.prefix + name))
        plt.close(fig)
    print(f"nvsim-plot: wrote 3 figures to {a.outdir}")


if __name__ == "__main__":
    main()
