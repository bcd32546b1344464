"""The local stack and the test database from a checkout in a folder only its owner can enter, as when a new user
clones into root's home and runs the scripts as root: Postgres runs as an unprivileged user there, which cannot reach
the checkout, so `scripts/stack` must keep its data somewhere that user can (and say where) without being told.

The checkout is a clone of this repository with this working tree's scripts and schemas laid over it (so uncommitted
changes are what is tested). `scripts/stack` runs the executables of this build (HABITFLOW_STACK_BIN_DIR, set from
HABITFLOW_E2E_BIN_DIR) rather than building its own release, and `scripts/test`'s Postgres steps run as it runs them;
building the whole package a second time in the clone would not fit CI's time.
"""

import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SERVICES = ["auth", "habits", "goals", "social", "gateway"]
# grpc.health.v1.HealthCheckResponse{status: SERVING}, encoded: field 1, varint 1.
SERVING = b"\x08\x01"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RootOnlyCheckout(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.parent = tempfile.mkdtemp(prefix="habitflow-owner-only-")
        os.chmod(cls.parent, 0o700)
        cls.addClassCleanup(shutil.rmtree, cls.parent, True)
        cls.checkout = os.path.join(cls.parent, "habitflow")
        subprocess.run(["git", "clone", "--quiet", REPO_ROOT, cls.checkout], check=True)
        for folder in ("scripts", "Schemas"):
            shutil.copytree(os.path.join(REPO_ROOT, folder), os.path.join(cls.checkout, folder), dirs_exist_ok=True)

    def test_the_stack_keeps_its_data_where_postgres_can_reach_it(self):
        bin_dir = os.environ.get("HABITFLOW_E2E_BIN_DIR") or os.path.join(REPO_ROOT, ".build", "debug")
        env = {key: value for key, value in os.environ.items()
               if not key.startswith("HABITFLOW_") or key == "HABITFLOW_PYTHON"}
        env["HABITFLOW_STACK_BIN_DIR"] = bin_dir
        env["HABITFLOW_LOG_LEVEL"] = "warning"
        env["HABITFLOW_POSTGRES_PORT"] = str(free_port())
        for name in SERVICES:
            env["HABITFLOW_%s_PORT" % name.upper()] = str(free_port())
            env["HABITFLOW_%s_METRICS_PORT" % name.upper()] = str(free_port())
        stack = subprocess.Popen(
            [os.path.join(self.checkout, "scripts", "stack"), "--fresh"], cwd=self.checkout, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        # A thread reads the output (a line the stack printed must never wait for the next one to be seen).
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in stack.stdout], daemon=True).start()
        output = []
        data_dir = None
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and not any("Ctrl-C stops the stack." in line for line in output[-1:]):
                try:
                    output.append(lines.get(timeout=1))
                except queue.Empty:
                    if stack.poll() is not None:
                        break
            text = "".join(output)
            moved = re.search(r"keeping the stack's data in (\S+)", text)
            data_dir = moved.group(1) if moved else None
            self.assertIn("Ctrl-C stops the stack.", text, "the stack never became ready:\n" + text[-4000:])
            if os.geteuid() == 0:
                self.assertIsNotNone(moved, "as root the data cannot stay in the checkout:\n" + text[-4000:])
                self.assertTrue(data_dir.startswith("/var/lib/habitflow/stack-habitflow-"), data_dir)
                self.assertTrue(os.path.isfile(os.path.join(data_dir, "postgres", "PG_VERSION")))
                self.assertFalse(os.path.exists(os.path.join(self.checkout, ".data")))

            gateway = "127.0.0.1:%s" % env["HABITFLOW_GATEWAY_PORT"]
            with grpc.insecure_channel(gateway) as channel:
                check = channel.unary_unary("/grpc.health.v1.Health/Check", request_serializer=lambda b: b,
                                            response_deserializer=lambda b: b)
                self.assertEqual(check(b"", timeout=10), SERVING)
        finally:
            if stack.poll() is None:
                os.killpg(stack.pid, signal.SIGINT)
                try:
                    stack.wait(timeout=90)
                except subprocess.TimeoutExpired:
                    os.killpg(stack.pid, signal.SIGKILL)
                    stack.wait()
            if data_dir:
                self.assertFalse(os.path.exists(os.path.join(data_dir, "postgres", "postmaster.pid")),
                                 "Ctrl-C left Postgres running")
                shutil.rmtree(data_dir, ignore_errors=True)

    def test_the_test_database_starts_there_too(self):
        # scripts/test's Postgres steps, run from inside the checkout as scripts/test runs them.
        script = """
            set -euo pipefail
            source scripts/lib/common.sh
            source scripts/lib/postgres.sh
            pg_workdir habitflow-anywhere
            pg_start_throwaway "$PG_WORKDIR/postgres" "$PG_WORKDIR/postgres.log"
            pg_psql "$PG_WORKDIR/postgres" "$PG_PORT" --dbname=habitflow --tuples-only --no-align \\
                --command="SELECT string_agg(nspname, ',' ORDER BY nspname) FROM pg_namespace \\
                           WHERE nspname IN ('auth', 'habits', 'goals', 'social')"
        """
        result = subprocess.run(["bash", "-c", script], cwd=self.checkout, capture_output=True, text=True,
                                timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr[-4000:])
        self.assertEqual(result.stdout.strip(), "auth,goals,habits,social")
        self.assertNotIn("could not change directory", result.stderr)


if __name__ == "__main__":
    unittest.main()
