"""Crash and restart under load: the Python side of scripts/faults (which starts the throwaway Postgres and sets the
HABITFLOW_FAULTS_* environment this reads).

For each target: starts `habitflow-load run --ledger` against the gateway at a fixed rate, kills the target a few
seconds into the load (SIGKILL; Postgres: `pg_ctl stop -m immediate`), starts it again after --down seconds, lets
the load run to its end, waits until every outbox is drained, then checks with SQL (as each service's role) what
the ledger says was acknowledged:

- every acknowledged MarkHabitDone entry id is in habits.entries exactly once, every acknowledged sign-up's user
  in auth.users exactly once;
- every account's UserCreated was applied exactly once by each subscriber (habits, goals, social): each keeps one
  processed_events row per account and one users row per account, and no outbox or delivery row is left.

Per fault it prints: calls failed from the kill until the target answered again, by status; the time from the
restart to the first successful call that needed the target; acknowledged writes lost; duplicates; events applied.
Last, the checker checks itself: an invented acknowledged entry id must come out lost.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import habitflow_stack  # noqa: E402

SERVICES = habitflow_stack.SERVICES
SUBSCRIBERS = ["habits", "goals", "social"]
TARGETS = ["habits", "auth", "goals", "social", "gateway", "postgres"]
# What the load does: mostly check-ins, reads through habits, the dashboard (goals' and social's parts), token
# refreshes (auth), and a little sign-up: bcrypt on auth and a UserCreated event for each subscriber.
MIX = "mark-done=55,week-view=10,list-habits=10,dashboard=15,refresh-token=5,sign-up=1"
# A call "needs" a target when it cannot succeed (fully) without it. The dashboard's goals and leaderboard parts are
# served by goals and social: a dashboard without that part (ledger detail "missing=...") does not count.
NEEDS = {
    "habits": lambda line: line.operation in ("mark-done", "week-view", "list-habits", "dashboard"),
    "auth": lambda line: line.operation in ("refresh-token", "sign-up"),
    "goals": lambda line: line.operation == "dashboard" and "goals" not in line.detail,
    "social": lambda line: line.operation == "dashboard" and "leaderboard" not in line.detail,
    "gateway": lambda line: True,
    "postgres": lambda line: line.operation in ("mark-done", "sign-up"),
}
SERVICE_GOAL = 5.0
POSTGRES_GOAL = 15.0


def log(message):
    print(time.strftime("%H:%M:%S ") + message, file=sys.stderr, flush=True)


class LedgerLine:
    __slots__ = ("time", "operation", "status", "user", "client_id", "detail")

    def __init__(self, text):
        fields = text.rstrip("\n").split("\t")
        self.time = int(fields[0]) / 1000.0
        self.operation, self.status, self.user, self.client_id, self.detail = fields[1:6]

    @property
    def ok(self):
        return self.status == "OK"


def read_ledger(path):
    with open(path) as f:
        return [LedgerLine(text) for text in f if text.count("\t") >= 5]


def psql(service, sql, variables=None):
    """Rows of `sql` run as `service`'s role in its own schema, as lists of strings."""
    command = [os.environ.get("HABITFLOW_FAULTS_PSQL", "/usr/lib/postgresql/15/bin/psql"), "--no-psqlrc",
               "--tuples-only", "--no-align", "--field-separator=\t", "--set=ON_ERROR_STOP=1",
               os.environ["HABITFLOW_FAULTS_%s_DATABASE_URL" % service.upper()]]
    for name, value in (variables or {}).items():
        command.insert(-1, "--set=%s=%s" % (name, value))
    result = subprocess.run(command, input=sql, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError("psql as %s failed: %s" % (service, result.stderr.strip()))
    return [row.split("\t") for row in result.stdout.splitlines() if row]


def uuid_array(ids):
    """A uuid[] literal for SQL text (psql reads the statement from stdin: thousands of ids do not fit in an
    argument); every id is parsed first, so nothing but UUIDs reaches the SQL."""
    return "'{" + ",".join(sorted(str(uuid.UUID(value)) for value in ids)) + "}'::uuid[]"


def cpu_busy():
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_ticks(pid, with_reaped=False):
    """CPU clock ticks of a live process (with its reaped children's when asked); 0 when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    ticks = int(fields[11]) + int(fields[12])
    return ticks + (int(fields[13]) + int(fields[14]) if with_reaped else 0)


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(child) for child in f.read().split()]
    except OSError:
        return []


class Postgres:
    def __init__(self):
        self.pg_ctl = os.environ["HABITFLOW_FAULTS_PG_CTL"].split()
        self.data = os.environ["HABITFLOW_FAULTS_PG_DATA"]
        self.log = os.environ["HABITFLOW_FAULTS_PG_LOG"]
        self.options = os.environ["HABITFLOW_FAULTS_PG_OPTIONS"]

    def postmaster(self):
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def _run(self, *arguments):
        subprocess.run(self.pg_ctl + ["--pgdata=" + self.data] + list(arguments), cwd="/", check=True,
                       stdout=subprocess.DEVNULL, timeout=90)

    def kill(self):
        self._run("--mode=immediate", "stop")

    def start(self):
        self._run("--log=" + self.log, "--wait", "--timeout=60", "-o", self.options, "start")


class Faults:
    def __init__(self, arguments):
        self.arguments = arguments
        self.bin_dir = os.environ["HABITFLOW_FAULTS_BIN_DIR"]
        self.workdir = os.environ["HABITFLOW_FAULTS_WORKDIR"]
        env = dict(os.environ)
        for name in ("auth", "habits", "goals", "social"):
            variable = "HABITFLOW_%s_DATABASE_URL" % name.upper()
            env[variable] = os.environ["HABITFLOW_FAULTS_%s_DATABASE_URL" % name.upper()]
        env["HABITFLOW_INTERNAL_SECRET"] = "faults-" + os.urandom(12).hex()
        env["HABITFLOW_AUTH_KEY_ENCRYPTION_KEY"] = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="
        env["HABITFLOW_LOG_LEVEL"] = "warning"
        # One client address carries all the load.
        env["HABITFLOW_GATEWAY_ADDRESS_RATE_LIMIT"] = "100000"
        env["HABITFLOW_GATEWAY_ADDRESS_RATE_BURST"] = "100000"
        self.log_dir = os.path.join(self.workdir, "logs")
        os.makedirs(self.log_dir, exist_ok=True)
        ports = {name: _free_port() for name in SERVICES}
        self.stack = habitflow_stack.Stack(
            self.bin_dir, base_env=env, ports=ports, metrics_ports={name: _free_port() for name in SERVICES},
            absent_address="127.0.0.1:1", log_dir=self.log_dir)
        self.postgres = Postgres()
        self.last_lines = []

    def stack_ticks(self, load):
        """CPU ticks so far of the services, the driver and Postgres (the postmaster with its backends)."""
        ticks = sum(process_ticks(process.pid) for process in self.stack.processes.values())
        ticks += process_ticks(load.pid)
        postmaster = self.postgres.postmaster()
        if postmaster:
            ticks += process_ticks(postmaster, with_reaped=True)
            ticks += sum(process_ticks(child) for child in children(postmaster))
        return ticks

    def kill(self, target):
        if target == "postgres":
            self.postgres.kill()
            return
        process = self.stack.processes.pop(target)
        process.send_signal(signal.SIGKILL)
        process.wait()
        log_file = self.stack.logs.pop(target, None)
        if log_file:
            log_file.close()

    def restart(self, target):
        if target == "postgres":
            self.postgres.start()
            return
        self.stack.start([target], peers=SERVICES)

    def run_fault(self, target, index):
        a = self.arguments
        ledger = os.path.join(self.workdir, "ledger-%s.tsv" % target)
        command = [os.path.join(self.bin_dir, "habitflow-load"), "run", "--scenario", "write-heavy",
                   "--target", self.stack.address("gateway"), "--rate", str(a.rate), "--users", str(a.users),
                   "--connections", "2", "--setup-concurrency", "2", "--duration", "%ds" % a.max_load,
                   "--timeout", "%gs" % a.timeout, "--mix", MIX, "--seed", str(index + 1), "--ledger", ledger,
                   "--quiet"]
        output = open(os.path.join(self.workdir, "load-%s.txt" % target), "w")
        load = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        # The ledger's first lines arrive a second after the load (users prepared) starts.
        deadline = time.monotonic() + 120
        while not (os.path.exists(ledger) and os.path.getsize(ledger) > 0):
            if load.poll() is not None or time.monotonic() > deadline:
                output.close()
                load.kill()
                with open(output.name) as f:
                    raise RuntimeError("habitflow-load did not start:\n" + f.read()[-3000:])
            time.sleep(0.1)
        # The stack's own CPU (the machine is shared) and the whole machine's, while the load runs undisturbed.
        machine_before, stack_before, clock_before = cpu_busy(), self.stack_ticks(load), time.monotonic()
        time.sleep(a.before)
        machine_after, stack_after = cpu_busy(), self.stack_ticks(load)
        cpus = os.cpu_count() or 1
        stack_busy = (stack_after - stack_before) / CLOCK_TICKS / (time.monotonic() - clock_before) / cpus
        machine_busy = (machine_after[0] - machine_before[0]) / max(1, machine_after[1] - machine_before[1])
        killed = time.time()
        self.kill(target)
        time.sleep(a.down)
        restarted = time.time()
        self.restart(target)
        restart_took = time.time() - restarted
        if target != "postgres":
            try:
                self.stack.wait_serving([target], timeout=60)
            except RuntimeError as error:
                log("faults: %s: %s" % (target, error))
        serving = time.time() - restarted
        # The load goes on until a call needing the target succeeded, then --after seconds more; then Ctrl-C (the
        # driver stops sending, lets the calls in flight end and writes its report and ledger).
        needs, recovered = NEEDS[target], None
        while load.poll() is None:
            if recovered is None:
                recovered = next((line.time for line in read_ledger(ledger)
                                  if line.time >= restarted and line.ok and needs(line)), None)
            if recovered is not None and time.time() >= recovered + a.after:
                load.send_signal(signal.SIGINT)
                break
            time.sleep(0.5)
        status = load.wait()
        output.close()
        lines = read_ledger(ledger)
        result = self.measure(target, lines, killed, restarted, serving, restart_took, status)
        result["stack_busy"], result["machine_busy"] = stack_busy, machine_busy
        return result

    def measure(self, target, lines, killed, restarted, serving, restart_took, load_status):
        needs = NEEDS[target]
        first_success = next((line.time for line in lines if line.time >= restarted and line.ok and needs(line)), None)
        outage_end = first_success if first_success is not None else float("inf")
        during = [line for line in lines if killed <= line.time <= outage_end]
        failed = Counter("%s %s" % (line.operation, line.status) for line in during if not line.ok)
        degraded = Counter(line.detail for line in during if line.ok and line.detail != "-")
        before = Counter(line.status for line in lines if line.time < killed and not line.ok)
        after = Counter("%s %s" % (line.operation, line.status) for line in lines
                        if line.time > outage_end + 1.0 and not line.ok)
        return {
            "target": target, "lines": lines, "calls": len(lines), "ok": sum(line.ok for line in lines),
            "failed_during": failed, "degraded_during": degraded, "failed_before": before, "failed_after": after,
            "to_first_success": None if first_success is None else first_success - restarted,
            "serving_after": serving, "restart_took": restart_took, "load_status": load_status,
            "restarted": restarted,
        }

    def wait_drained(self, timeout):
        """Waits until no service's outbox holds an event or a delivery; returns the rows left per service."""
        deadline = time.monotonic() + timeout
        while True:
            left = {}
            for service in ("auth", "habits", "goals", "social"):
                # A fanned-out row with no delivery left is delivered: a crash between its last delivery and its
                # own delete leaves it for the relay's next sweep (a minute).
                rows = psql(service, """
                    SELECT (SELECT count(*) FROM outbox o WHERE NOT fanned_out
                                OR EXISTS (SELECT FROM outbox_deliveries d WHERE d.sequence = o.sequence)),
                           (SELECT count(*) FROM outbox_deliveries);""")
                outbox, deliveries = int(rows[0][0]), int(rows[0][1])
                if outbox or deliveries:
                    left[service] = (outbox, deliveries)
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.5)

    def verify(self, result):
        lines = result["lines"]
        entries_ok = {line.client_id for line in lines if line.operation == "mark-done" and line.ok}
        entries_failed = {line.client_id for line in lines if line.operation == "mark-done" and not line.ok}
        signups_ok = {line.user for line in lines if line.operation == "sign-up" and line.ok}
        found, users = Counter(), Counter()
        if entries_ok | entries_failed:
            sql = "SELECT id, count(*) FROM entries WHERE id = ANY(%s) GROUP BY id;"
            for entry_id, count in psql("habits", sql % uuid_array(entries_ok | entries_failed)):
                found[entry_id] = int(count)
        if signups_ok:
            sql = "SELECT id, count(*) FROM users WHERE id = ANY(%s) GROUP BY id;"
            for user_id, count in psql("auth", sql % uuid_array(signups_ok)):
                users[user_id] = int(count)
        result["writes_acked"] = len(entries_ok) + len(signups_ok)
        result["lost"] = sorted([e for e in entries_ok if found[e] == 0] + [u for u in signups_ok if users[u] == 0])
        result["duplicates"] = sorted([e for e in entries_ok | entries_failed if found[e] > 1] +
                                      [u for u in signups_ok if users[u] > 1])
        # Failed at the client, yet committed: the kill came between the commit and the answer (allowed: the client
        # was not told OK; a retry with the same entry id would find it).
        result["failed_but_stored"] = sum(1 for e in entries_failed if found[e] == 1)
        result["signups_acked"] = {line.user: line.time for line in lines if line.operation == "sign-up" and line.ok}

    def verify_events(self, signups, restarted):
        """Every account's UserCreated applied once by each subscriber; returns (summary, problems).

        `signups`: {user id: acknowledged at}; the time from there to the subscriber's users row (made by the event:
        nothing else calls for those accounts) is the event's delivery lag."""
        drain_started = time.monotonic()
        left = self.wait_drained(self.arguments.drain_timeout)
        drained = time.monotonic() - drain_started
        problems = ["%s: %d outbox rows and %d deliveries left after %d s" % (
                    service, o, d, self.arguments.drain_timeout)
                    for service, (o, d) in left.items()]
        accounts = int(psql("auth", "SELECT count(*) FROM users;")[0][0])
        summary, lags = [], []
        for subscriber in SUBSCRIBERS:
            processed, users = psql(subscriber, """
                SELECT (SELECT count(*) FROM processed_events WHERE consumer = :'consumer'),
                       (SELECT count(*) FROM users);""", {"consumer": subscriber})[0]
            processed, users = int(processed), int(users)
            summary.append("%s %d/%d" % (subscriber, processed, accounts))
            if processed != accounts or users != accounts:
                problems.append("%s: %d events processed and %d users for %d accounts" % (
                    subscriber, processed, users, accounts))
            if signups:
                created = dict(psql(subscriber, """
                    SELECT user_id, extract(epoch FROM created_at) FROM users WHERE user_id = ANY(%s);""" % (
                    uuid_array(signups))))
                missing = [user for user in signups if user not in created]
                if missing:
                    problems.append("%s: %d acknowledged sign-ups never created" % (subscriber, len(missing)))
                delays = [float(created[user]) - acked for user, acked in signups.items() if user in created]
                after = [float(created[user]) - acked for user, acked in signups.items()
                         if user in created and acked >= restarted]
                lags.append("%s max %.1f s (acked after the restart: max %s)" % (
                    subscriber, max(delays, default=0.0), "%.1f s" % max(after) if after else "-"))
        text = "events applied once (processed/accounts): %s; outboxes drained %.1f s after the load" % (
            ", ".join(summary), drained)
        if lags:
            text += "\nUserCreated delivery lag (sign-up acknowledged to subscriber's row): " + "; ".join(lags)
        return text, problems

    def check_the_checker(self):
        """The verification must see a loss: an acknowledged entry id that was never sent has to count as lost, and
        an acknowledged one from the last ledger as stored."""
        stored = next((line for line in self.last_lines if line.operation == "mark-done" and line.ok), None)
        if stored is None:
            return ["no acknowledged mark-done to check the checker with"]
        invented = LedgerLine("%d\tmark-done\tOK\t%s\t%s\t-" % (time.time() * 1000, stored.user, uuid.uuid4()))
        result = {"lines": [stored, invented]}
        self.verify(result)
        if result["lost"] != [invented.client_id] or result["duplicates"]:
            return ["the checker did not see an invented acknowledged write as lost (%s)" % result["lost"]]
        log("faults: the checker finds an invented acknowledged write lost, as it should")
        return []

    def report(self, result, events, problems):
        target = result["target"]
        goal = POSTGRES_GOAL if target == "postgres" else SERVICE_GOAL
        first = result["to_first_success"]
        lines = [
            "",
            "== %s killed %s, restarted after %.1f s ==" % (
                target, "(pg_ctl stop -m immediate)" if target == "postgres" else "(kill -9)", self.arguments.down),
            "calls: %d (%d OK); before the kill the stack used %.0f %% of %d cores (the whole machine %.0f %%)" % (
                result["calls"], result["ok"], 100 * result["stack_busy"], os.cpu_count() or 1,
                100 * result["machine_busy"]),
            "failed from the kill to the first success: %d  %s" % (
                sum(result["failed_during"].values()), _counts(result["failed_during"])),
        ]
        if result["degraded_during"]:
            lines.append("answered OK without a part meanwhile: %s" % _counts(result["degraded_during"]))
        lines += [
            "restart to first success needing %s: %s (goal < %.0f s; restart command %.1f s, SERVING after %.1f s)" % (
                target, "never" if first is None else "%.2f s" % first, goal, result["restart_took"],
                result["serving_after"]),
            "failed before the kill: %d %s; failed later than 1 s after recovery: %d %s" % (
                sum(result["failed_before"].values()), _counts(result["failed_before"]),
                sum(result["failed_after"].values()), _counts(result["failed_after"])),
            "acknowledged writes: %d; lost: %d; duplicates: %d; failed at the client but stored: %d" % (
                result["writes_acked"], len(result["lost"]), len(result["duplicates"]), result["failed_but_stored"]),
            events,
        ]
        if first is None:
            problems.append("%s: no successful call needing it after the restart" % target)
        elif self.arguments.enforce_goals and first > goal:
            problems.append("%s: first success %.2f s after the restart (goal %.0f s)" % (target, first, goal))
        if result["lost"]:
            problems.append("%s: acknowledged writes lost: %s" % (target, ", ".join(result["lost"][:5])))
        if result["duplicates"]:
            problems.append("%s: duplicates: %s" % (target, ", ".join(result["duplicates"][:5])))
        for problem in problems:
            lines.append("PROBLEM: " + problem)
        print("\n".join(lines), flush=True)
        return problems

    def main(self):
        a = self.arguments
        names = [name for name in SERVICES if name in self.stack.available()]
        missing = [name for name in SERVICES if name not in names]
        if missing or not os.access(os.path.join(self.bin_dir, "habitflow-load"), os.X_OK):
            raise RuntimeError("executables missing in %s: %s" % (
                self.bin_dir, ", ".join(missing + ["habitflow-load"])))
        all_problems = []
        started = time.monotonic()
        try:
            self.stack.start_serving(SERVICES, timeout=90)
            log("faults: stack SERVING; load %g req/s; kill after %g s, down %g s, load %g s after recovery; "
                "targets: %s" % (a.rate, a.before, a.down, a.after, ", ".join(a.targets)))
            for index, target in enumerate(a.targets):
                log("faults: %s" % target)
                result = self.run_fault(target, index)
                self.verify(result)
                self.last_lines = result["lines"]
                events, problems = self.verify_events(result["signups_acked"], result["restarted"])
                all_problems += self.report(result, events, problems)
            all_problems += self.check_the_checker()
        finally:
            self.stack.stop_all()
            if a.keep:
                shutil.copytree(self.workdir, a.keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("postgres"))
        log("faults: %d fault%s in %.0f s; logs in %s" % (
            len(a.targets), "" if len(a.targets) == 1 else "s", time.monotonic() - started, self.workdir))
        if all_problems:
            print("\nFAILED:\n  " + "\n  ".join(all_problems), flush=True)
            return 1
        print("\nevery fault: no acknowledged write lost or duplicated, every event applied once", flush=True)
        return 0


def _counts(counter):
    return "(" + ", ".join("%s %d" % item for item in sorted(counter.items(), key=lambda item: -item[1])) + ")" \
        if counter else ""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse(argv):
    parser = argparse.ArgumentParser(description="Crash and restart each service and Postgres under load.")
    parser.add_argument("--long", action="store_true",
                        help="60 s of load after each recovery, 150 req/s (unless given)")
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated, from: " + ", ".join(TARGETS))
    parser.add_argument("--rate", type=float, help="requests per second (default 100; long 150)")
    parser.add_argument("--users", type=int, default=16, help="virtual users")
    parser.add_argument("--after", type=float, help="seconds of load after the first success (default 5; long 60)")
    parser.add_argument("--max-load", type=int, default=180, help="seconds of load at most per fault")
    parser.add_argument("--before", type=float, default=3.0, help="seconds of load before the kill")
    parser.add_argument("--down", type=float, default=2.0, help="seconds the target stays down")
    parser.add_argument("--timeout", type=float, default=5.0, help="deadline of each call, seconds")
    parser.add_argument("--drain-timeout", type=int, default=60, help="seconds to wait for the outboxes to drain")
    parser.add_argument("--keep", metavar="DIR",
                        help="copy each fault's ledger, load report and the service logs into DIR")
    parser.add_argument("--enforce-goals", action="store_true",
                        help="fail when recovery misses its goal (5 s for a service, 15 s for Postgres)")
    arguments = parser.parse_args(argv)
    arguments.targets = [t for t in arguments.targets.split(",") if t]
    unknown = [t for t in arguments.targets if t not in TARGETS]
    if unknown:
        parser.error("unknown targets: " + ", ".join(unknown))
    if arguments.rate is None:
        arguments.rate = 150.0 if arguments.long else 100.0
    if arguments.after is None:
        arguments.after = 60.0 if arguments.long else 5.0
    return arguments


if __name__ == "__main__":
    try:
        sys.exit(Faults(parse(sys.argv[1:])).main())
    except RuntimeError as error:
        print("faults: %s" % error, file=sys.stderr)
        sys.exit(1)
