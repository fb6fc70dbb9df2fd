#!/usr/bin/env python3
"""A second recording of rows the testbed datasets already hold, set beside the first.

Usage:
  rerecord.py merge NEW.csv... --out OUT.csv
      Each row of NEW.csv (written by `suite.py collectives` or `suite.py mpi`) matched to the
      row of data/runs/testbed_*.csv it records again (same method, op, bytes, ranks, topology
      and topology_set; a row two datasets both hold is refused); OUT.csv holds the new rows
      with `rerecords` (the dataset), `recorded_median_secs` and `recorded_date_utc` added,
      and the moves of the medians are printed.
  rerecord.py substitute OUT.csv [OUT.csv ...] --dir DIR
      Copies of the datasets OUT.csv re-records with its medians (and launch medians) in place
      of the recorded ones, for `dtsim validate DIR/*.csv`: which groups a second recording
      moves across the bar with the model unchanged (docs/testbed.md, "How reproducible a
      recorded row is"). The scored datasets are not touched.
  rerecord.py pool OUT.csv [OUT.csv ...] --dir DIR
      The same copies with each re-recorded row measured by both recordings together: its
      median the mean of the recordings' medians, its min and max theirs, its launch medians
      all of theirs (where both have them), its repetitions summed: what `dtsim validate`
      scores when a row's one recording is not taken as its truth (docs/testbed.md, "Eleven
      more topologies recorded a second time").
  rerecord.py compare RECORDED SECOND [POOLED] [--median-pct 3] [--max-pct 10]
      Reads `dtsim validate --out` folders of the datasets as recorded, of the substituted
      copies and (optionally) of the pooled ones, and prints per folder the groups within the
      bar and the rows' mean |error|, then for the groups whose measured rows differ (recorded
      twice): how many are within in both, outside in both, within in one only; the same by
      topology; and every group outside in both with its worst row's error in each
      (docs/testbed.md, "Every topology recorded a second time").
"""
import argparse
import csv
import glob
import os
import statistics
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# What a substituted row takes from its second recording.
MEASURED = ("measured_secs", "measured_min_secs", "measured_max_secs", "launch_medians_secs",
            "repeats")


def key(row):
    """The row a recording measures: method, op, size, ranks, topology and what it set on it."""
    return (row["method"], row["op"], row["bytes"], row["ranks"], row["topology"],
            row.get("topology_set", ""))


def write_csv(path, rows, fields):
    """`rows` to `path` whole or not at all (a temporary file renamed over it)."""
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def datasets():
    """Every scored testbed dataset: {name: [rows]}."""
    out = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "data", "runs", "testbed_*.csv"))):
        with open(path, newline="") as f:
            out[os.path.basename(path)[:-4]] = list(csv.DictReader(f))
    return out


def merge(new_paths, out_path):
    recorded = {}
    for name, rows in datasets().items():
        for r in rows:
            if key(r) in recorded:
                sys.exit(f"{key(r)} is a row of both {recorded[key(r)][0]} and {name}: "
                         "which one a second recording re-records is ambiguous")
            recorded[key(r)] = (name, r)
    merged, moves = [], []
    for path in new_paths:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if key(r) not in recorded:
                    print(f"{path}: {key(r)} records no dataset row, left out", file=sys.stderr)
                    continue
                name, old = recorded[key(r)]
                move = 100 * (float(r["measured_secs"]) / float(old["measured_secs"]) - 1)
                moves.append(abs(move))
                print(f"{name:28} {r['method']:38} {int(r['bytes']):>9} B  "
                      f"{float(old['measured_secs']) * 1e3:9.2f} -> "
                      f"{float(r['measured_secs']) * 1e3:9.2f} ms ({move:+.1f}%)")
                r = dict(r, rerecords=name, recorded_median_secs=old["measured_secs"],
                         recorded_date_utc=old["date_utc"])
                merged.append(r)
    if not merged:
        sys.exit("no row of the new recordings matches a dataset row")
    fields = []
    for r in merged:
        fields += [f for f in r if f not in fields]
    write_csv(out_path, merged, fields)
    m = sorted(moves)
    print(f"{len(m)} rows: |move| median {statistics.median(m):.1f}%, "
          f"90th percentile {m[int(0.9 * (len(m) - 1))]:.1f}%, max {m[-1]:.1f}%; "
          f"over 3%: {sum(x > 3 for x in m)}, over 10%: {sum(x > 10 for x in m)}")


def second(old, new):
    """`new`'s measured fields in place of `old`'s (module doc, `substitute`)."""
    return {f: new[f] for f in MEASURED if f in new}


def pooled(old, new):
    """`old`'s measured fields with `new`'s recording pooled in (module doc, `pool`)."""
    both = [float(old["measured_secs"]), float(new["measured_secs"])]
    out = {"measured_secs": repr(statistics.mean(both))}
    for f, pick in (("measured_min_secs", min), ("measured_max_secs", max)):
        vals = [float(r[f]) for r in (old, new) if r.get(f)]
        if vals:
            out[f] = repr(pick(vals))
    launches = [r.get("launch_medians_secs", "") for r in (old, new)]
    out["launch_medians_secs"] = ";".join(launches) if all(launches) else ""
    out["repeats"] = str(int(old["repeats"]) + int(new["repeats"]))
    return out


def substitute(merged_paths, out_dir, pool=False):
    measured = pooled if pool else second
    again = []
    for merged_path in merged_paths:
        with open(merged_path, newline="") as f:
            again += list(csv.DictReader(f))
    by_dataset = {}
    for r in again:
        if key(r) in by_dataset.get(r["rerecords"], {}):
            sys.exit(f"{key(r)} is re-recorded twice in {', '.join(merged_paths)}")
        by_dataset.setdefault(r["rerecords"], {})[key(r)] = r
    os.makedirs(out_dir, exist_ok=True)
    all_rows = datasets()
    for name, new in by_dataset.items():
        if name not in all_rows:
            sys.exit(f"{', '.join(merged_paths)}: rerecords {name!r}, which is not in data/runs/")
        rows = all_rows[name]
        replaced = 0
        for i, r in enumerate(rows):
            if key(r) in new:
                rows[i] = dict(r, **measured(r, new[key(r)]))
                replaced += 1
        path = os.path.join(out_dir, name + ".csv")
        write_csv(path, rows, list(rows[0].keys()))
        how = "pooled with" if pool else "from"
        print(f"{path}: {replaced} of {len(rows)} rows {how} the second recording")
    print(f"then: dtsim validate data/runs/<dataset>.csv --out A and "
          f"dtsim validate {out_dir}/<dataset>.csv --out B, and compare their errors.csv")


def read_validation(folder):
    """A `dtsim validate --out` folder: ({group: errors.csv row}, {group: [scored rows]}), groups
    keyed by (dataset, group) and the unscored barrier dataset left out."""
    groups, rows = {}, {}
    with open(os.path.join(folder, "errors.csv"), newline="") as f:
        for r in csv.DictReader(f):
            if r["dataset"] != "testbed_barrier":
                groups[(r["dataset"], r["group"])] = r
    with open(os.path.join(folder, "predictions.csv"), newline="") as f:
        for r in csv.DictReader(f):
            if r["scored"] == "true" and r["dataset"] != "testbed_barrier":
                rows.setdefault((r["dataset"], r["group"]), []).append(r)
    return groups, rows


def topology_of(group):
    """`allreduce @ star4_200mbit (generator.n=8)` -> `star4_200mbit n=8`."""
    _, _, where = group.partition(" @ ")
    name, _, sets = where.partition(" (")
    for s in sets.rstrip(")").split(";"):
        if s.strip().startswith("generator.n="):
            name += " n=" + s.strip().split("=")[1]
    return name


def compare(folders, median_pct, max_pct):
    def within(g):
        return (float(g["median_abs_error_pct"]) <= median_pct
                and float(g["max_abs_error_pct"]) <= max_pct)

    def mean_abs(rows):
        return statistics.mean(abs(float(r["error_pct"])) for r in rows)

    runs = [read_validation(f) for f in folders]
    for folder, (groups, rows) in zip(folders, runs):
        every = [r for rs in rows.values() for r in rs]
        print(f"{folder}: {sum(map(within, groups.values()))} of {len(groups)} groups within, "
              f"mean |error| {mean_abs(every):.3f}% over {len(every)} rows")
    (g0, r0), (g1, r1) = runs[0], runs[1]
    twice = [k for k in g0 if k in g1 and any(
        a["measured_secs"] != b["measured_secs"] for a, b in zip(r0[k], r1[k]))]
    sides = {(a, b): sum(1 for k in twice if (within(g0[k]), within(g1[k])) == (a, b))
             for a in (True, False) for b in (True, False)}
    print(f"{len(twice)} groups recorded twice: within in both {sides[True, True]}, outside in "
          f"both {sides[False, False]}, within the first only {sides[True, False]}, the second "
          f"only {sides[False, True]}")
    by_topology = {}
    for k in twice:
        by_topology.setdefault(topology_of(k[1]), []).append(k)
    print("topology, groups, within and mean |error| per folder:")
    for t, keys in sorted(by_topology.items()):
        cells = [f"{sum(within(g[k]) for k in keys)} / "
                 f"{mean_abs([r for k in keys for r in rs[k]]):.2f}%" for g, rs in runs]
        print(f"  {t:34} {len(keys):3}  " + "  ".join(cells))
    print("outside in both (worst row's error, recorded / second):")
    for k in sorted(twice):
        if not within(g0[k]) and not within(g1[k]):
            w0, w1 = (max(rs[k], key=lambda r: abs(float(r["error_pct"]))) for rs in (r0, r1))
            print(f"  {k[0]:36} {k[1]:64} {w0['label']} {float(w0['error_pct']):+.1f}% / "
                  f"{w1['label']} {float(w1['error_pct']):+.1f}%")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    m = sub.add_parser("merge")
    m.add_argument("new", nargs="+")
    m.add_argument("--out", required=True)
    for name in ("substitute", "pool"):
        s = sub.add_parser(name)
        s.add_argument("merged", nargs="+")
        s.add_argument("--dir", required=True)
    c = sub.add_parser("compare")
    c.add_argument("folders", nargs="+", help="validate folders: recorded, second [, pooled]")
    c.add_argument("--median-pct", type=float, default=3.0)
    c.add_argument("--max-pct", type=float, default=10.0)
    a = ap.parse_args()
    if a.what == "merge":
        merge(a.new, a.out)
    elif a.what == "compare":
        if len(a.folders) < 2:
            sys.exit("compare: give at least the recorded and the second recording's folders")
        compare(a.folders, a.median_pct, a.max_pct)
    else:
        substitute(a.merged, a.dir, pool=a.what == "pool")


if __name__ == "__main__":
    main()
