#!/usr/bin/env python3
"""Load test of a running `htm serve`: N clients (threads, keep-alive connections) request a mix
of routes for S seconds; prints p50/p95/max latency per route and the errors. With --writer DB,
a study keeps writing beside it: one metric row every 20 ms into a running run of DB (as
`htm run` does, WAL, busy timeout 30 s), and its write latencies are printed as well, so that a
reader's effect on the writer shows. Exits 1 on any error.

    scripts/serve/load.py http://127.0.0.1:8080 --clients 50 --seconds 30 --writer /tmp/big.sqlite
"""
import argparse
import http.client
import json
import sqlite3
import sys
import threading
import time
import urllib.parse


def percentile(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--writer", help="database to write into meanwhile (a run in it must be 'running')")
    args = ap.parse_args()
    base = urllib.parse.urlsplit(args.url)
    host, port = base.hostname, base.port or 80

    def fetch(conn, path):
        conn.request("GET", path, headers={"Host": f"{host}:{port}"})
        response = conn.getresponse()
        body = response.read()
        return response.status, body

    conn = http.client.HTTPConnection(host, port, timeout=30)
    status, body = fetch(conn, "/api/runs?size=1")
    if status != 200:
        sys.exit(f"load: /api/runs answered {status}: {body[:200]!r}")
    listing = json.loads(body)
    studies = [name for name, runs, running in listing["experiments"]]
    total = listing["total"]
    study = urllib.parse.quote(studies[len(studies) // 2])
    routes = {
        "runs page (50 newest)": ["/api/runs"],
        "runs, filtered and sorted by a metric": [
            "/api/runs?where=test%2Fmse%3C0.15&where=model.dim%3D64&sort=test%2Fmse"],
        "a study's final values": [f"/api/study/{study}/finals"],
        "one run's curves": [f"/api/run/{1 + (i * 7919) % total}" for i in range(50)],
        "study version (live polling)": [f"/api/study/{study}/version"],
    }
    names = list(routes)
    latencies = {name: [] for name in names}
    errors = []
    stop = time.time() + args.seconds
    lock = threading.Lock()

    def client(k):
        c = http.client.HTTPConnection(host, port, timeout=30)
        i = k
        while time.time() < stop:
            name = names[i % len(names)]
            paths = routes[name]
            path = paths[(i // len(names)) % len(paths)]
            i += 1
            t0 = time.perf_counter()
            try:
                status, _ = fetch(c, path)
                if status != 200:
                    raise RuntimeError(f"{path}: HTTP {status}")
            except Exception as e:  # noqa: BLE001 - every failure is counted
                with lock:
                    errors.append(str(e))
                c.close()
                c = http.client.HTTPConnection(host, port, timeout=30)
                continue
            with lock:
                latencies[name].append(time.perf_counter() - t0)

    writes, write_errors = [], []

    def writer():
        db = sqlite3.connect(args.writer, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        run = db.execute("SELECT id FROM runs WHERE status = 'running' LIMIT 1").fetchone()
        if run is None:
            write_errors.append("no running run in " + args.writer)
            return
        step = 10**6
        while time.time() < stop:
            t0 = time.perf_counter()
            try:
                db.execute("INSERT INTO metrics(run_id, step, epoch, split, name, value, time) VALUES (?, ?, 0, "
                           "'train', 'loss', 0.5, ?)", (run[0], step, time.time()))
                db.commit()
                writes.append(time.perf_counter() - t0)
            except sqlite3.Error as e:
                write_errors.append(str(e))
            step += 1
            time.sleep(0.02)
        db.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    if args.writer:
        threads.append(threading.Thread(target=writer))
    started = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - started
    count = sum(len(v) for v in latencies.values())
    print(f"load: {args.clients} clients for {elapsed:.1f} s against {total} runs: {count} requests "
          f"({count / elapsed:.0f}/s), {len(errors)} errors")
    for name in names:
        v = latencies[name]
        print(f"  {name:40s} n={len(v):6d}  p50 {1000 * percentile(v, 0.5):7.1f} ms  "
              f"p95 {1000 * percentile(v, 0.95):7.1f} ms  max {1000 * max(v, default=float('nan')):7.1f} ms")
    if args.writer:
        print(f"  writer: {len(writes)} rows, p50 {1000 * percentile(writes, 0.5):.2f} ms, "
              f"p95 {1000 * percentile(writes, 0.95):.2f} ms, max {1000 * max(writes, default=float('nan')):.2f} ms, "
              f"{len(write_errors)} errors")
    for e in (errors + write_errors)[:5]:
        print("  error:", e)
    return 1 if errors or write_errors else 0


if __name__ == "__main__":
    sys.exit(main())
