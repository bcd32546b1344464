"""Runs one h2load measurement against a running server and prints its figures as one JSON object.

h2load (nghttp2-client) drives the load; this wrapper adds what h2load does not report itself:
- p50/p99 of the per-request times of h2load's --log-file (main phase only: h2load logs no warm-up request),
- the server's CPU time per request: /proc/PID/stat utime+stime sampled when h2load says the main phase starts and
  when it says it is over, divided by the requests of the log,
- the server's peak RSS so far (VmHWM of /proc/PID/status) after the run.

Usage: h2load_point.py --pid PID --url URL --body FILE --clients C --streams M --duration S --warm-up S --log FILE
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of every thread of the process, in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    # After "pid (comm)", field 3 (state) is fields[0]; utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def percentile(sorted_values: list[int], fraction: float) -> float:
    """Nearest-rank percentile."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), int(-(-fraction * len(sorted_values) // 1))))
    return float(sorted_values[rank - 1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--body", required=True)
    parser.add_argument("--clients", type=int, required=True)
    parser.add_argument("--streams", type=int, required=True)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--warm-up", type=float, required=True)
    parser.add_argument("--log", required=True, help="h2load's per-request log (written)")
    parser.add_argument("--grpc", action="store_true", help="send gRPC request headers")
    parser.add_argument("--label", help="prefix of a one-line summary on stderr")
    args = parser.parse_args()

    command = [
        "h2load", "-t", "1", "-c", str(args.clients), "-m", str(args.streams),
        "-D", f"{args.duration:g}", "--warm-up-time", f"{args.warm_up:g}",
        "-d", args.body, "--log-file", args.log,
    ]
    if args.grpc:
        command += ["-H", "content-type: application/grpc", "-H", "te: trailers"]
    command.append(args.url)

    # h2load appends to an existing log file.
    if os.path.exists(args.log):
        os.remove(args.log)

    cpu_start = cpu_end = None
    wall_start = wall_end = None
    output_lines = []
    h2load = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    assert h2load.stdout is not None
    for line in h2load.stdout:
        output_lines.append(line)
        if cpu_start is None and "Main benchmark duration is started" in line:
            cpu_start, wall_start = cpu_seconds(args.pid), time.monotonic()
        elif cpu_end is None and "Main benchmark duration is over" in line:
            cpu_end, wall_end = cpu_seconds(args.pid), time.monotonic()
    returncode = h2load.wait()
    output = "".join(output_lines)

    def number(pattern: str) -> float | None:
        match = re.search(pattern, output)
        return float(match.group(1)) if match else None

    times = []
    non_200 = 0
    with open(args.log) as log:
        for line in log:
            parts = line.split()
            if len(parts) < 3:
                continue
            if parts[1] != "200":
                non_200 += 1
            times.append(int(parts[2]))
    times.sort()
    requests = len(times)

    result = {
        "h2load_exit": returncode,
        "requests_per_second": number(r"finished in [0-9.]+m?s, ([0-9.]+) req/s"),
        "requests": requests,
        "succeeded": number(r"(\d+) succeeded"),
        "failed": number(r"(\d+) failed"),
        "errored": number(r"(\d+) errored"),
        "timeout": number(r"(\d+) timeout"),
        "non_200": non_200,
        "p50_us": percentile(times, 0.50),
        "p99_us": percentile(times, 0.99),
        "cpu_us_per_request": (
            (cpu_end - cpu_start) * 1e6 / requests
            if cpu_start is not None and cpu_end is not None and requests
            else None
        ),
        "cpu_cores_busy": (
            (cpu_end - cpu_start) / (wall_end - wall_start)
            if cpu_start is not None and cpu_end is not None and wall_end > wall_start
            else None
        ),
        "peak_rss_kib": status_kib(args.pid, "VmHWM"),
        "rss_kib": status_kib(args.pid, "VmRSS"),
    }
    if returncode != 0 or result["requests_per_second"] is None:
        sys.stderr.write(output)
    if args.label:
        cpu = result["cpu_us_per_request"]
        sys.stderr.write(
            f"{time.strftime('%H:%M:%S')} {args.label}: {result['requests_per_second']} req/s, "
            f"p50 {result['p50_us']:.0f} us, p99 {result['p99_us']:.0f} us, "
            f"CPU {'-' if cpu is None else f'{cpu:.1f}'} us/req, failed {result['failed']}, "
            f"errored {result['errored']}, non-200 {non_200}\n"
        )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
