"""Summarizes Benchmarks/server-unary.sh's raw results: medians over rounds, ratios, the issue's goals.

Reads the JSON lines the script collected (one per server, point and round; point "idle" for the idle-connection
measurement), prints a readable table on stdout and, with --json, writes the same figures to a file.

Usage: report.py RESULTS.jsonl [--json OUT] [--meta JSON]
"""

import argparse
import json
import statistics
import sys

SERVERS = ["ours", "reference", "nghttpd", "baseline"]
SERVER_TITLES = {
    "ours": "ours (interop-server, HabitFlowRPCServer)",
    "reference": "reference (grpc-swift-2 2.4.3 + nio-transport 2.9.2 Posix)",
    "nghttpd": "nghttpd --no-tls (static 25-byte file, HTTP/2 ceiling)",
    "baseline": "baseline (another build's interop-server, --baseline)",
}
LOAD_METRICS = ["requests_per_second", "p50_us", "p99_us", "cpu_us_per_request", "peak_rss_kib"]
IDLE_METRICS = ["rss_before_kib", "rss_after_kib", "bytes_per_connection"]
# Goals of the issue: ours vs reference throughput, ours' memory.
GOAL_RPS_RATIO = {"c64-m32": 8.0, "c1-m1": 3.5}
GOAL_PEAK_RSS_MIB = 40.0
GOAL_IDLE_KIB = 16.0


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, digits=1, scale=1.0):
    if value is None:
        return "-"
    return f"{value / scale:,.{digits}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("results")
    parser.add_argument("--json")
    parser.add_argument("--meta", help="JSON object merged into the output's meta")
    args = parser.parse_args()

    rows = [json.loads(line) for line in open(args.results) if line.strip()]
    points = []
    for row in rows:
        if row["point"] != "idle" and row["point"] not in points:
            points.append(row["point"])
    servers = [s for s in SERVERS if any(r["server"] == s for r in rows)]

    summary = {"load": {}, "idle": {}}
    for server in servers:
        summary["load"][server] = {}
        for point in points:
            runs = [r for r in rows if r["server"] == server and r["point"] == point]
            if not runs:
                continue
            entry = {metric: median([r.get(metric) for r in runs]) for metric in LOAD_METRICS}
            rps = [r.get("requests_per_second") for r in runs if r.get("requests_per_second") is not None]
            entry["requests_per_second_min"] = min(rps) if rps else None
            entry["requests_per_second_max"] = max(rps) if rps else None
            entry["rounds"] = len(runs)
            entry["problems"] = sum(
                1 for r in runs if r.get("h2load_exit") or r.get("failed") or r.get("errored") or r.get("non_200")
            )
            summary["load"][server][point] = entry
        idle_runs = [r for r in rows if r["server"] == server and r["point"] == "idle"]
        if idle_runs:
            entry = {metric: median([r.get(metric) for r in idle_runs]) for metric in IDLE_METRICS}
            entry["closed_by_server"] = max(r.get("closed_by_server", 0) for r in idle_runs)
            entry["connections"] = idle_runs[0].get("connections")
            entry["rounds"] = len(idle_runs)
            summary["idle"][server] = entry

    ratios = {}
    for other in ("reference", "nghttpd", "baseline"):
        if "ours" not in servers or other not in servers:
            continue
        key = f"ours/{other}"
        ratios[key] = {}
        for point in points:
            ours, theirs = summary["load"]["ours"].get(point), summary["load"][other].get(point)
            if ours and theirs:
                ratios[key][point] = {m: ratio(ours[m], theirs[m]) for m in LOAD_METRICS}
        if "ours" in summary["idle"] and other in summary["idle"]:
            ratios[key]["idle"] = {
                "bytes_per_connection": ratio(
                    summary["idle"]["ours"]["bytes_per_connection"], summary["idle"][other]["bytes_per_connection"]
                )
            }

    goals = []
    ours_ref = ratios.get("ours/reference", {})
    for point, goal in GOAL_RPS_RATIO.items():
        value = ours_ref.get(point, {}).get("requests_per_second")
        goals.append({"goal": f"ours >= {goal:g}x reference req/s at {point}", "value": value,
                      "met": value is not None and value >= goal})
    if "ours" in summary["load"]:
        peaks = [e["peak_rss_kib"] for e in summary["load"]["ours"].values() if e["peak_rss_kib"] is not None]
        value = max(peaks) / 1024 if peaks else None
        goals.append({"goal": f"ours peak RSS < {GOAL_PEAK_RSS_MIB:g} MiB (worst point, medians)", "value": value,
                      "met": value is not None and value < GOAL_PEAK_RSS_MIB})
    if "ours" in summary["idle"]:
        per = summary["idle"]["ours"]["bytes_per_connection"]
        value = per / 1024 if per is not None else None
        goals.append({"goal": f"ours <= {GOAL_IDLE_KIB:g} KiB per idle connection", "value": value,
                      "met": value is not None and value <= GOAL_IDLE_KIB})

    meta = json.loads(args.meta) if args.meta else {}
    out = sys.stdout
    print(file=out)
    print("Unary grpc.testing.TestService/UnaryCall, response_size 16 (medians of "
          f"{meta.get('rounds', '?')} rounds; h2load -t 1, -D {meta.get('duration_s', '?')} s after "
          f"{meta.get('warm_up_s', '?')} s warm-up)", file=out)
    if "commit" in meta:
        print(f"ours at commit {meta['commit']}"
              + (f" with {meta['uncommitted_files']} uncommitted files in Package.swift, Shared/, Tools/"
                 if meta.get("uncommitted_files") else ""), file=out)
    print(file=out)
    header = f"{'server':<10} {'point':<8} {'req/s':>10} {'(min-max)':>19} {'p50 ms':>8} {'p99 ms':>8} " \
             f"{'CPU us/req':>10} {'peak RSS MiB':>12}"
    print(header, file=out)
    print("-" * len(header), file=out)
    for server in servers:
        for point in points:
            e = summary["load"][server].get(point)
            if not e:
                continue
            spread = f"({fmt(e['requests_per_second_min'], 0)}-{fmt(e['requests_per_second_max'], 0)})"
            flag = "  !" if e["problems"] else ""
            print(f"{server:<10} {point:<8} {fmt(e['requests_per_second'], 0):>10} {spread:>19} "
                  f"{fmt(e['p50_us'], 2, 1000):>8} {fmt(e['p99_us'], 2, 1000):>8} "
                  f"{fmt(e['cpu_us_per_request'], 1):>10} {fmt(e['peak_rss_kib'], 1, 1024):>12}{flag}", file=out)
    print(file=out)
    if summary["idle"]:
        connections = next(iter(summary["idle"].values())).get("connections")
        print(f"Idle connections ({connections}, preface + empty SETTINGS each):", file=out)
        header = f"{'server':<10} {'RSS before MiB':>14} {'RSS after MiB':>14} {'KiB/connection':>15} {'closed':>7}"
        print(header, file=out)
        print("-" * len(header), file=out)
        for server in servers:
            e = summary["idle"].get(server)
            if e:
                print(f"{server:<10} {fmt(e['rss_before_kib'], 1, 1024):>14} {fmt(e['rss_after_kib'], 1, 1024):>14} "
                      f"{fmt(e['bytes_per_connection'], 1, 1024):>15} {e['closed_by_server']:>7}", file=out)
        print(file=out)
    for key, by_point in ratios.items():
        print(f"Ratios {key} (req/s: higher is better for ours; the rest: lower is better):", file=out)
        header = f"{'point':<8} {'req/s':>7} {'p50':>7} {'p99':>7} {'CPU/req':>8} {'peak RSS':>9}"
        print(header, file=out)
        for point in points:
            r = by_point.get(point)
            if r:
                print(f"{point:<8} {fmt(r['requests_per_second'], 2):>7} {fmt(r['p50_us'], 2):>7} "
                      f"{fmt(r['p99_us'], 2):>7} {fmt(r['cpu_us_per_request'], 2):>8} "
                      f"{fmt(r['peak_rss_kib'], 2):>9}", file=out)
        if "idle" in by_point:
            print(f"idle KiB/connection ratio: {fmt(by_point['idle']['bytes_per_connection'], 2)}", file=out)
        print(file=out)
    if goals:
        print("Goals (the issue's):", file=out)
        for goal in goals:
            verdict = "n/a" if goal["value"] is None else ("met" if goal["met"] else "MISSED")
            print(f"  [{verdict}] {goal['goal']}: {fmt(goal['value'], 2)}", file=out)
        print(file=out)
    problems = [(s, p) for s in servers for p, e in summary["load"][s].items() if e["problems"]]
    if problems:
        print("! runs with h2load failures, errors or non-200 statuses: "
              + ", ".join(f"{s} {p}" for s, p in problems), file=out)

    if args.json:
        document = {"meta": meta, "summary": summary, "ratios": ratios, "goals": goals, "runs": rows}
        with open(args.json, "w") as handle:
            json.dump(document, handle, indent=2)
            handle.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
