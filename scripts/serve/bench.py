#!/usr/bin/env python3
"""The speed figures of docs/serve.md, as CSV rows on standard output.

Builds (once, in WORK) a 10,000-run database (100 studies of 100 runs, 1,120 metric rows a
run: 11.2 M rows) and a 2,000-run study (2.24 M rows) with make_db.py; starts `htm serve` on
the first; times each route (median of 5 requests, one at a time) and `htm report` / `htm
compare` / `htm runs` (median of 3); then runs load.py (50 clients, 30 s, a writer beside).
With --before OLD_HTM, the commands are also timed with that binary, on the same files.

    scripts/serve/bench.py build/htm /tmp/serve-bench > results/serve-YYYY-MM-DD.csv
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
WRITER = re.compile(r"\s+writer: (\d+) rows, p50 ([\d.]+) ms, p95 ([\d.]+) ms, max ([\d.]+) ms, (\d+) errors")


def ms(text):
    """load.py's milliseconds as seconds, 5 decimals."""
    return f"{float(text) / 1000:.5f}"


def median_time(fn, n):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def cpu():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("htm")
    ap.add_argument("work")
    ap.add_argument("--before", help="an older htm binary, timed on the same files")
    ap.add_argument("--before-label", default="before", help="what the CSV calls it (say its commit)")
    ap.add_argument("--load-seconds", type=float, default=30)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    big, study = os.path.join(args.work, "big.sqlite"), os.path.join(args.work, "study2000.sqlite")
    if not os.path.exists(big):
        subprocess.run([sys.executable, f"{HERE}/make_db.py", args.htm, big, "--runs", "10000", "--points", "28",
                        "--running", "1"], check=True, stdout=sys.stderr)
    if not os.path.exists(study):
        subprocess.run([sys.executable, f"{HERE}/make_db.py", args.htm, study, "--runs", "2000", "--per-study", "2000",
                        "--points", "28"], check=True, stdout=sys.stderr)
    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    machine = f"{cpu()}, {os.cpu_count()} cores"
    print("figure,what,median_s,samples_s,database,binary,commit,machine")  # commit: of the checkout running this

    def row(figure, what, median, samples, db, binary):
        print(f"{figure},\"{what}\",{median:.4f},\"{' '.join(f'{s:.4f}' for s in samples)}\",{os.path.basename(db)},"
              f"{binary},{commit},\"{machine}\"", flush=True)

    for label, binary in [("after", args.htm)] + ([(args.before_label, args.before)] if args.before else []):
        def run(*cmd):
            subprocess.run([binary, *cmd], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = os.path.join(args.work, "report.html")
        row("report", "htm report of a 2,000-run study", *median_time(lambda: run("report", "study-0000", "--db", study,
                                                                                    "-o", out), 3), study, label)
        row("compare", "htm compare of a 100-run study in the 10,000-run file",
            *median_time(lambda: run("compare", "study-0050", "--db", big), 3), big, label)
        row("runs", "htm runs of the 10,000-run file", *median_time(lambda: run("runs", "--db", big), 3), big, label)

    server = subprocess.Popen([args.htm, "serve", "--db", big, "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        base = re.search(r"http://[^/ ]+", server.stdout.readline()).group(0)
        routes = [
            ("runs page: the 50 newest runs", "/api/runs"),
            ("runs filtered by a final metric and a setting, sorted by the metric",
             "/api/runs?where=test%2Fmse%3C0.15&where=model.dim%3D64&sort=test%2Fmse"),
            ("a study's final-values table", "/api/study/study-0050/finals"),
            ("a study's whole report data", "/api/study/study-0050"),
            ("a study's version (the live page's poll)", "/api/study/study-0050/version"),
            ("one run's rows", "/api/run/5000"),
            ("a sweep (parallel coordinates and variance table)", "/api/sweep/study-0050"),
        ]
        for what, path in routes:
            urllib.request.urlopen(base + path).read()  # warm: the first read pages the file in
            row("route", f"{what}: GET {path}", *median_time(lambda: urllib.request.urlopen(base + path).read(), 5),
                big, "after")
        load = subprocess.run([sys.executable, f"{HERE}/load.py", base, "--clients", "50", "--seconds",
                               str(args.load_seconds), "--writer", big], capture_output=True, text=True)
        for line in load.stdout.splitlines():
            print("# " + line, file=sys.stderr)
            m = re.match(r"\s+(.+?)\s+n=\s*(\d+)\s+p50\s+([\d.]+) ms\s+p95\s+([\d.]+) ms", line)
            if m:
                print(f"load,\"{m.group(1)} (50 clients, n={m.group(2)}): p50; p95\",{float(m.group(3)) / 1000:.4f},"
                      f"\"{float(m.group(4)) / 1000:.4f}\",{os.path.basename(big)},after,{commit},\"{machine}\"")
            m = WRITER.match(line)
            if m:
                print(f"load,\"writer beside the 50 clients ({m.group(1)} rows, {m.group(5)} errors): p50; p95 max\","
                      f"{ms(m.group(2))},\"{ms(m.group(3))} {ms(m.group(4))}\","
                      f"{os.path.basename(big)},after,{commit},\"{machine}\"")
            m = re.match(r"load: .*: (\d+) requests \((\d+)/s\), (\d+) errors", line)
            if m:
                print(f"load,\"50 clients for {args.load_seconds:.0f} s: {m.group(1)} requests, {m.group(3)} errors; "
                      f"requests/s\",{m.group(2)},\"\",{os.path.basename(big)},after,{commit},\"{machine}\"")
        alone = subprocess.run([sys.executable, f"{HERE}/load.py", base, "--clients", "0", "--seconds", "10",
                                "--writer", big], capture_output=True, text=True)
        for line in alone.stdout.splitlines():
            m = WRITER.match(line)
            if m:
                print(f"load,\"writer alone, no clients ({m.group(1)} rows, {m.group(5)} errors): p50; p95 max\","
                      f"{ms(m.group(2))},\"{ms(m.group(3))} {ms(m.group(4))}\","
                      f"{os.path.basename(big)},after,{commit},\"{machine}\"")
        return load.returncode
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    sys.exit(main())
