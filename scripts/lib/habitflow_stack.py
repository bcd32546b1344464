"""Starts HabitFlow's service executables, waits until each reports SERVING through gRPC health, and stops them.

Shared by scripts/stack (which runs `main` in the foreground: Ctrl-C stops everything) and by the end-to-end tests
(Tests/E2E, which start the stack against the test Postgres and stop one service mid-test).

Every process gets the same picture of the stack through the environment the services read (DESIGN.md section 5):
HABITFLOW_<SERVICE>_PORT and _METRICS_PORT for itself and HABITFLOW_<SERVICE>_ADDRESSES for the others. The health
check is a plain `grpc.health.v1.Health/Check` call made with grpcio and hand-encoded protobuf (two fields), so it
needs no generated code.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

import grpc

# Start order: the gateway last, once the services it fronts are up.
SERVICES = ["auth", "habits", "goals", "social", "gateway"]
DEFAULT_PORTS = {"gateway": 7070, "auth": 7071, "habits": 7072, "goals": 7073, "social": 7074}
METRICS_OFFSET = 2000
SERVING = 1
STATUS_NAMES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _health_request(service):
    name = service.encode()
    return (b"\x0a" + _varint(len(name)) + name) if name else b""


def _health_status(body):
    """The `status` (field 1, varint) of a HealthCheckResponse; 0 when absent."""
    index, status = 0, 0
    while index < len(body):
        tag = body[index]
        index += 1
        if tag == 0x08:
            shift, value = 0, 0
            while True:
                byte = body[index]
                index += 1
                value |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    break
            status = value
        else:
            return status  # no other fields are defined; stop at anything unexpected
    return status


def health_status(address, service="", timeout=1.0, root_certificates=None):
    """The health status of `service` ("" = the whole server) at HOST:PORT, or None when it does not answer."""
    if root_certificates is not None:
        channel = grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=root_certificates))
    else:
        channel = grpc.insecure_channel(address)
    try:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check", request_serializer=lambda raw: raw, response_deserializer=lambda raw: raw)
        return _health_status(check(_health_request(service), timeout=timeout))
    except grpc.RpcError:
        return None
    finally:
        channel.close()


class Stack:
    """The service processes of one stack.

    bin_dir: where the habitflow-<service> executables are. base_env: the environment every process starts with
    (database URLs, secrets...). ports: {service: port} (defaults: DESIGN.md section 5); metrics listen 2000 higher
    unless metrics_ports says otherwise. absent_address: where services that are not started are said to be (None:
    their default local port, so one started by hand later is found).
    """

    def __init__(self, bin_dir, base_env=None, ports=None, metrics_ports=None, absent_address=None, log_dir=None,
                 host="127.0.0.1", gateway_root_certificates=None):
        self.bin_dir = bin_dir
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.ports = dict(DEFAULT_PORTS)
        self.ports.update(ports or {})
        self.metrics_ports = {name: port + METRICS_OFFSET for name, port in self.ports.items()}
        self.metrics_ports.update(metrics_ports or {})
        self.absent_address = absent_address
        self.log_dir = log_dir
        self.host = host
        self.gateway_root_certificates = gateway_root_certificates
        self.processes = {}
        self.logs = {}

    def binary(self, name):
        return os.path.join(self.bin_dir, "habitflow-" + name)

    def available(self):
        """The services whose executable exists, in start order."""
        return [name for name in SERVICES if os.access(self.binary(name), os.X_OK)]

    def address(self, name):
        return "%s:%d" % (self.host, self.ports[name])

    def environment(self, started):
        env = dict(self.base_env)
        for name in SERVICES:
            prefix = "HABITFLOW_%s_" % name.upper()
            env[prefix + "PORT"] = str(self.ports[name])
            env[prefix + "METRICS_PORT"] = str(self.metrics_ports[name])
            if name in started:
                env[prefix + "ADDRESSES"] = self.address(name)
            elif self.absent_address:
                env[prefix + "ADDRESSES"] = self.absent_address
        return env

    def start(self, names, peers=None):
        """Starts the services (in the given order) without waiting; `peers`: every service of the stack (default:
        `names`), for the addresses each is told."""
        peers = peers or names
        for name in names:
            log = None
            if self.log_dir:
                log = open(os.path.join(self.log_dir, name + ".log"), "ab")
                self.logs[name] = log
            self.processes[name] = subprocess.Popen(
                [self.binary(name)], env=self.environment(peers), stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT if log else None, start_new_session=True)

    def start_serving(self, names, timeout=120.0):
        """Starts the services and waits until they all report SERVING: the gateway only once the others do (its
        first calls to them would otherwise fail while they are still starting)."""
        services = [name for name in names if name != "gateway"]
        self.start(services)
        self.wait_serving(services, timeout=timeout)
        if "gateway" in names:
            self.start(["gateway"], peers=names)
            self.wait_serving(["gateway"], timeout=timeout)

    def wait_serving(self, names, timeout=120.0):
        """Waits until every service in `names` reports SERVING; raises RuntimeError naming the ones that do not."""
        deadline = time.monotonic() + timeout
        pending = list(names)
        while pending:
            for name in list(pending):
                process = self.processes.get(name)
                if process is not None and process.poll() is not None:
                    raise RuntimeError("habitflow-%s exited with status %d%s" % (name, process.returncode, self._log_hint(name)))
                roots = self.gateway_root_certificates if name == "gateway" else None
                if health_status(self.address(name), root_certificates=roots) == SERVING:
                    pending.remove(name)
            if pending:
                if time.monotonic() > deadline:
                    raise RuntimeError("not SERVING after %.0f s: %s" % (timeout, ", ".join(pending)))
                time.sleep(0.2)

    def _log_hint(self, name):
        return " (log: %s)" % self.logs[name].name if name in self.logs else ""

    def stop(self, name, timeout=20.0):
        """SIGTERM (graceful: in-flight calls finish), then SIGKILL if it does not exit in time. Returns the exit
        status (negative: the signal that ended it), or None when it was not running."""
        process = self.processes.pop(name, None)
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log = self.logs.pop(name, None)
        if log:
            log.close()
        return process.returncode

    def stop_all(self):
        """Stops everything, the gateway first (clients stop arriving before the services go)."""
        for name in reversed(SERVICES):
            self.stop(name)


def _environment_ports(env):
    ports, metrics = {}, {}
    for name in SERVICES:
        value = env.get("HABITFLOW_%s_PORT" % name.upper())
        if value:
            ports[name] = int(value)
        value = env.get("HABITFLOW_%s_METRICS_PORT" % name.upper())
        if value:
            metrics[name] = int(value)
    return ports, metrics


def main(argv=None):
    parser = argparse.ArgumentParser(description="Run every built HabitFlow service until Ctrl-C.")
    parser.add_argument("--bin-dir", required=True, help="folder with the habitflow-<service> executables")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for SERVING")
    arguments = parser.parse_args(argv)

    ports, metrics = _environment_ports(os.environ)
    tls = bool(os.environ.get("HABITFLOW_GATEWAY_TLS_CERT"))
    roots = None
    if tls:
        with open(os.environ.get("HABITFLOW_GATEWAY_TLS_CA") or os.environ["HABITFLOW_GATEWAY_TLS_CERT"], "rb") as f:
            roots = f.read()
    stack = Stack(arguments.bin_dir, ports=ports, metrics_ports=metrics, gateway_root_certificates=roots)
    names = stack.available()
    if "gateway" not in names:
        print("stack: no habitflow-gateway in %s" % arguments.bin_dir, file=sys.stderr)
        return 1

    stopping = []

    def request_stop(signum, _frame):
        stopping.append(signum)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        stack.start_serving(names, timeout=arguments.timeout)
        gateway = stack.address("gateway")
        print("")
        for name in names:
            print("%-8s SERVING on %s (metrics http://%s:%d/metrics)" % (
                name, stack.address(name), stack.host, stack.metrics_ports[name]))
        print("")
        print("gateway: %s%s" % ("https://" if tls else "", gateway))
        plaintext = "" if tls else "-plaintext "
        print("try:     grpcurl %s%s list" % (plaintext, gateway))
        print("         grpcurl %s-d '{\"email\": \"ana@example.com\", \"username\": \"ana\", "
              "\"password\": \"correct horse battery\"}' %s habitflow.auth.v1.AuthService/Register" % (plaintext, gateway))
        print("         then: -H 'authorization: Bearer <access_token>' ... habitflow.gateway.v1.GatewayService/GetDashboard")
        if "goals" in names:
            print("         and:  -H 'authorization: Bearer <access_token>' -d '{\"title\": \"Read 12 books\", "
                  "\"type\": \"GOAL_TYPE_COUNT\", \"target\": {\"value\": 12}, \"horizon\": \"HORIZON_ONGOING\"}' "
                  "%s habitflow.goals.v1.GoalsService/CreateGoal" % gateway)
        if "social" in names:
            print("         and:  -H 'authorization: Bearer <access_token>' -d '{\"username\": \"ben\"}' "
                  "%s habitflow.social.v1.SocialService/SendFriendRequest" % gateway)
            print("         and:  -H 'authorization: Bearer <access_token>' "
                  "%s habitflow.social.v1.SocialService/GetLeaderboard" % gateway)
        if os.environ.get("HABITFLOW_MAIL_DIR") and not os.environ.get("HABITFLOW_SMTP_HOST"):
            print("mail:    password-reset and email-change mails are files in %s" % os.environ["HABITFLOW_MAIL_DIR"])
        print("Ctrl-C stops the stack.")
        sys.stdout.flush()
        while not stopping:
            for name, process in list(stack.processes.items()):
                if process.poll() is not None:
                    print("stack: habitflow-%s exited with status %d; stopping" % (name, process.returncode),
                          file=sys.stderr)
                    return 1
            time.sleep(0.5)
        return 0
    except RuntimeError as error:
        print("stack: %s" % error, file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stack.stop_all()


if __name__ == "__main__":
    sys.exit(main())
