"""Shared plumbing for the interop tests: Python stubs generated at test time, and the interop-server process.

* Stubs: `python3 -m grpc_tools.protoc -I Schemas/proto -I /usr/include --python_out --grpc_python_out` into a
  temporary directory, once per process. The generated modules live in the `grpc.*` namespace
  (grpc/testing/test_pb2.py, grpc/health/v1/health_pb2.py, ...), which collides with the grpcio package `grpc`;
  we make them importable by appending the generated `grpc/` folder to `grpc.__path__`.
* Server: path from $HABITFLOW_INTEROP_SERVER (default `.build/debug/interop-server` under the repo root), started
  with `--host 127.0.0.1 --port 0` (plus TLS flags on request); we read its `listening on HOST:PORT` line and kill
  it (whole process group) at the end, also when a test fails or the interpreter exits.
"""

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PROTO_ROOT = os.path.join(REPO_ROOT, "Schemas", "proto")
PROTO_FILES = [
    "grpc/testing/empty.proto",
    "grpc/testing/messages.proto",
    "grpc/testing/test.proto",
    "grpc/health/v1/health.proto",
    "grpc/reflection/v1/reflection.proto",
    "grpc/reflection/v1alpha/reflection.proto",
]
STARTUP_TIMEOUT = float(os.environ.get("HABITFLOW_INTEROP_STARTUP_TIMEOUT", "30"))
RPC_TIMEOUT = 30.0  # generous per-call deadline so that a hanging server fails a test instead of the whole run

_stub_dir = None


def _cleanup_dir(path):
    shutil.rmtree(path, ignore_errors=True)


def load_stubs():
    """Generate the Python stubs (once per process) and return a namespace with the modules."""
    global _stub_dir
    if _stub_dir is None:
        missing = [p for p in PROTO_FILES if not os.path.isfile(os.path.join(PROTO_ROOT, p))]
        if missing:
            raise RuntimeError("protos missing under %s: %s" % (PROTO_ROOT, ", ".join(missing)))
        out = tempfile.mkdtemp(prefix="habitflow-interop-stubs-")
        atexit.register(_cleanup_dir, out)
        cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I", PROTO_ROOT, "-I", "/usr/include",
               "--python_out=" + out, "--grpc_python_out=" + out] + PROTO_FILES
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError("protoc failed (%d): %s\n%s" % (res.returncode, " ".join(cmd), res.stderr))
        grpc.__path__.append(os.path.join(out, "grpc"))
        _stub_dir = out

    from grpc.testing import empty_pb2, messages_pb2, test_pb2, test_pb2_grpc  # noqa: E402
    from grpc.health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
    from grpc.reflection.v1 import reflection_pb2 as reflection_v1_pb2  # noqa: E402
    from grpc.reflection.v1 import reflection_pb2_grpc as reflection_v1_pb2_grpc  # noqa: E402
    from grpc.reflection.v1alpha import reflection_pb2 as reflection_v1alpha_pb2  # noqa: E402
    from grpc.reflection.v1alpha import reflection_pb2_grpc as reflection_v1alpha_pb2_grpc  # noqa: E402

    class Stubs:
        pass

    s = Stubs()
    for name, mod in dict(empty_pb2=empty_pb2, messages_pb2=messages_pb2, test_pb2=test_pb2,
                          test_pb2_grpc=test_pb2_grpc, health_pb2=health_pb2, health_pb2_grpc=health_pb2_grpc,
                          reflection_v1_pb2=reflection_v1_pb2, reflection_v1_pb2_grpc=reflection_v1_pb2_grpc,
                          reflection_v1alpha_pb2=reflection_v1alpha_pb2,
                          reflection_v1alpha_pb2_grpc=reflection_v1alpha_pb2_grpc).items():
        setattr(s, name, mod)
    s.dir = _stub_dir
    return s


def server_binary():
    path = os.environ.get("HABITFLOW_INTEROP_SERVER") or os.path.join(".build", "debug", "interop-server")
    if not os.path.isabs(path):
        path = os.path.join(REPO_ROOT, path)
    return path


_live_servers = set()


@atexit.register
def _kill_leftovers():
    for srv in list(_live_servers):
        srv.stop()


class InteropServer:
    """The interop-server process. Use start()/stop(), or as a context manager."""

    def __init__(self, extra_args=(), host="127.0.0.1", user=None):
        """user: run the server as this unprivileged user (the tests run as root), from a copy of the binary in a
        folder the user can read."""
        self.extra_args = list(extra_args)
        self.user = user
        self.bind_host = host
        self.proc = None
        self.host = None
        self.port = None
        self.log_lines = []
        self._log_lock = threading.Lock()

    @property
    def address(self):
        return "%s:%d" % (self.host if ":" not in self.host else "[%s]" % self.host, self.port)

    def start(self):
        binary = server_binary()
        if not os.path.isfile(binary) or not os.access(binary, os.X_OK):
            raise RuntimeError("interop-server binary not found or not executable: %s "
                               "(build it, or point HABITFLOW_INTEROP_SERVER at it)" % binary)
        cwd = REPO_ROOT
        prefix = []
        if self.user:
            cwd = tempfile.mkdtemp(prefix="habitflow-interop-")
            os.chmod(cwd, 0o755)
            binary = shutil.copy(binary, cwd)
            prefix = ["runuser", "-u", self.user, "--"]
        cmd = prefix + [binary, "--host", self.bind_host, "--port", "0"] + self.extra_args
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)
        _live_servers.add(self)
        found = threading.Event()

        def pump():  # keep draining the output so the server never blocks on a full pipe
            for raw in iter(self.proc.stdout.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\n")
                with self._log_lock:
                    self.log_lines.append(line)
                if not found.is_set() and "listening on " in line:
                    addr = line.split("listening on ", 1)[1].strip().split()[0]
                    host, _, port = addr.rpartition(":")
                    self.host, self.port = host.strip("[]"), int(port)
                    found.set()
            found.set()

        threading.Thread(target=pump, daemon=True).start()
        if not found.wait(STARTUP_TIMEOUT) or self.port is None:
            self.stop()
            raise RuntimeError("interop-server did not print 'listening on HOST:PORT' within %.0fs; output:\n%s"
                               % (STARTUP_TIMEOUT, self.log_tail()))
        if self.host in ("0.0.0.0", "::", ""):
            self.host = "127.0.0.1"
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n=40):
        with self._log_lock:
            return "\n".join(self.log_lines[-n:])

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(5)
        _live_servers.discard(self)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def wait_channel_ready(channel, timeout=10.0):
    grpc.channel_ready_future(channel).result(timeout=timeout)


def insecure_channel(server, options=(), compression=None):
    ch = grpc.insecure_channel(server.address, options=list(options), compression=compression)
    return ch


def assert_empty_call_works(testcase, server, stubs):
    """The closing check of many tests: a fresh grpcio channel gets a normal EmptyCall answered."""
    testcase.assertTrue(server.alive(), "interop-server exited (code %s); output:\n%s"
                        % (server.proc.returncode if server.proc else None, server.log_tail()))
    with grpc.insecure_channel(server.address) as ch:
        stub = stubs.test_pb2_grpc.TestServiceStub(ch)
        try:
            resp = stub.EmptyCall(stubs.empty_pb2.Empty(), timeout=10)
        except grpc.RpcError as e:
            testcase.fail("server no longer serves EmptyCall: %s %s\nserver output:\n%s"
                          % (e.code(), e.details(), server.log_tail()))
        testcase.assertIsInstance(resp, stubs.empty_pb2.Empty)


def wait_until(predicate, timeout, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
