"""DuckDB side of the benchmark: the six queries of QUERIES.md on the same CSV, one thread.

Usage: duck.py CSV RUNS OUT.json. Writes load time, memory, medians and the answers
(rows as strings, in the SQL's column order) for bench/report.py.
"""
import json
import statistics
import sys
import time
from datetime import date, timedelta

import duckdb


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def main(csv, runs, out):
    runs = int(runs)
    rss0 = rss()
    con = duckdb.connect()
    con.execute("SET threads=1")
    t = time.perf_counter()
    con.execute(
        "CREATE TABLE autocomplete(api_key TEXT, hour TIMESTAMP, language TEXT, ide TEXT, "
        "version TEXT, num_acceptances BIGINT, num_lines_accepted BIGINT, "
        "num_bytes_accepted BIGINT)"
    )
    con.execute(f"COPY autocomplete FROM '{csv}' (HEADER)")
    load_s = time.perf_counter() - t
    rss1 = rss()
    rows = con.execute("SELECT count(*) FROM autocomplete").fetchone()[0]
    db_bytes = con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()[0]
    d0 = con.execute("SELECT min(hour)::DATE FROM autocomplete").fetchone()[0]
    d30, d90 = (d0 + timedelta(days=30)).isoformat(), (d0 + timedelta(days=90)).isoformat()
    queries = {
        "Q1": "SELECT SUM(num_acceptances), SUM(num_lines_accepted), SUM(num_bytes_accepted), "
        "COUNT(DISTINCT api_key) FROM autocomplete",
        "Q2": "SELECT language, SUM(num_acceptances), SUM(num_lines_accepted), "
        "SUM(num_bytes_accepted) FROM autocomplete "
        f"WHERE CAST(hour AS DATE) BETWEEN DATE '{d30}' AND DATE '{d90}' "
        "GROUP BY language ORDER BY language",
        "Q3": "SELECT CAST(hour AS DATE) AS d, ide, SUM(num_acceptances), COUNT(DISTINCT api_key) "
        "FROM autocomplete GROUP BY d, ide ORDER BY d, ide",
        "Q4": "SELECT api_key, SUM(num_lines_accepted), MAX(num_bytes_accepted), "
        "AVG(num_acceptances) FROM autocomplete WHERE language = 'PYTHON' "
        "GROUP BY api_key ORDER BY api_key",
        "Q5": "SELECT ide, COUNT(DISTINCT (api_key, CAST(hour AS DATE))), "
        "COUNT(DISTINCT (api_key, hour)) FROM autocomplete GROUP BY ide ORDER BY ide",
        "Q6": "SELECT CAST(hour - INTERVAL 8 HOUR AS DATE) AS d, SUM(num_bytes_accepted) "
        "FROM autocomplete WHERE list_transform(string_split(version, '.'), "
        "lambda x: CAST(x AS INTEGER)) >= [1, 10, 0] GROUP BY d ORDER BY d",
    }
    results = {}
    for name, sql in queries.items():
        times, answer = [], None
        for _ in range(runs):
            t = time.perf_counter()
            answer = con.execute(sql).fetchall()
            times.append(time.perf_counter() - t)
        render = lambda v: v.isoformat() if isinstance(v, date) else repr(v) if isinstance(v, float) else str(v)
        results[name] = {
            "median_s": statistics.median(times),
            "runs_s": times,
            "rows": [[render(v) for v in row] for row in answer],
        }
        print(f"{name}: {results[name]['median_s']:.4f} s ({len(answer)} rows)", file=sys.stderr)
    report = {
        "engine": f"duckdb {duckdb.__version__}",
        "rows": rows,
        "first_day": d0.isoformat(),
        "load_s": load_s,
        "rss_bytes": rss1 - rss0,
        "db_bytes": db_bytes,
        "queries": results,
    }
    with open(out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
