"""Compares the answers of both engines and prints the benchmark table (Markdown).

Usage: report.py OURS.json DUCK.json [OURS.json DUCK.json ...], one pair per data size.
Exits 1 if any answer differs (row counts or any value; AVG to 1e-12 relative).
"""
import json
import sys


def same(a, b):
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return "." in a + b and abs(x - y) <= 1e-12 * max(abs(x), abs(y))


def compare(ours, duck):
    """Per query: (rows, None) when equal, else (rows, what differs)."""
    out = {}
    for name, q in ours["queries"].items():
        a, b = q["rows"], duck["queries"][name]["rows"]
        if len(a) != len(b):
            out[name] = (len(a), f"{len(a)} rows vs {len(b)}")
            continue
        bad = next(
            ((i, r, s) for i, (r, s) in enumerate(zip(a, b))
             if len(r) != len(s) or not all(same(x, y) for x, y in zip(r, s))),
            None,
        )
        out[name] = (len(a), None if bad is None else f"row {bad[0]}: {bad[1]} vs {bad[2]}")
    return out


def main(paths):
    ok = True
    for ours_path, duck_path in zip(paths[::2], paths[1::2]):
        ours, duck = json.load(open(ours_path)), json.load(open(duck_path))
        n = ours["rows"]
        if duck["rows"] != n:
            print(f"row counts differ: {n} vs {duck['rows']}")
            ok = False
        checks = compare(ours, duck)
        print(f"\n### {n:,} rows ({ours['engine']} vs {duck['engine']}, 1 thread)\n")
        print("| query | ours (ms) | DuckDB (ms) | ours / DuckDB | result rows | answers |")
        print("|---|---:|---:|---:|---:|---|")
        for name, q in ours["queries"].items():
            a, b = q["median_s"] * 1e3, duck["queries"][name]["median_s"] * 1e3
            rows, diff = checks[name]
            ok &= diff is None
            print(f"| {name} | {a:.1f} | {b:.1f} | {a / b:.3f}x | {rows:,} | "
                  f"{'equal' if diff is None else 'DIFFER: ' + diff} |")
        print(f"| load | {ours['load_s'] * 1e3:.0f} | {duck['load_s'] * 1e3:.0f} | "
              f"{ours['load_s'] / duck['load_s']:.3f}x | | |")
        print()
        print("| memory per row | ours | DuckDB |")
        print("|---|---:|---:|")
        print(f"| resident (RSS growth over the load) | {ours['rss_bytes'] / n:.1f} B | "
              f"{duck['rss_bytes'] / n:.1f} B |")
        print(f"| held by the store (live heap / `duckdb_memory()`) | {ours['heap_bytes'] / n:.1f} B | "
              f"{duck['db_bytes'] / n:.1f} B |")
    if not ok:
        print("\nANSWERS DIFFER", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
