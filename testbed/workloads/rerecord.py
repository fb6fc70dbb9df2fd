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
    a = ap.parse_args()
    if a.what == "merge":
        merge(a.new, a.out)
    else:
        substitute(a.merged, a.dir, pool=a.what == "pool")


if __name__ == "__main__":
    main()
