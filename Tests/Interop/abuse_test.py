"""Slow and abusive clients against interop-server (issue #28), each while a normal grpcio client keeps calling.

One test per attack: slowloris (a HEADERS frame dribbled a byte at a time, and connections that never send the
preface), clients that never read their responses, many idle connections, oversized metadata, a RST_STREAM flood, a
SETTINGS flood and a WINDOW_UPDATE storm. During each attack a normal client (grpcio on its own connection, from a
thread) makes EmptyCall and UnaryCall back to back; the server's RSS (VmRSS) is read before, sampled every 20 ms for
the peak, and read after. Each test prints one line of figures, and the module prints them all again at the end.

The figures are reported, not asserted. The assertions are generous safety bounds: the server is alive, the normal
client had no failure, memory growth stays under a stated bound, and what must be cut off is cut off. (RSS "after"
stays near the peak when freed memory goes back to the allocator rather than to the system.)

Environment:
* HABITFLOW_ABUSE_IDLE_CONNECTIONS: idle connections to open (default 2,000, what CI runs; Benchmarks/abuse.sh runs
  10,000). The soft limit of open files is raised to the hard limit before the server starts (the server inherits
  it); when the hard limit leaves too little room for the count, the test opens what fits and says so.
"""

import os
import resource
import select
import socket
import struct
import threading
import time
import unittest

import grpc

import h2raw
from interop_common import InteropServer, assert_empty_call_works, load_stubs

STUBS = None
SERVICE = "/grpc.testing.TestService/"
IDLE_CONNECTIONS = int(os.environ.get("HABITFLOW_ABUSE_IDLE_CONNECTIONS", "2000"))
HEADER_TIMEOUT = 10.0  # RPCServerConfiguration.ConnectionManagement.headerTimeout's default
FIGURES = []  # one line per attack, printed again at the end of the module


def setUpModule():
    global STUBS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # before any server starts: they inherit it
    STUBS = load_stubs()


def tearDownModule():
    if FIGURES:
        print("\nabuse figures (normal client latency; server RSS before / peak / after):")
        for line in FIGURES:
            print("  " + line)


# --- measuring ---------------------------------------------------------------------------------------------------


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise KeyError("VmRSS")


def open_sockets(pid):
    """How many sockets the process holds open (its listener and connections)."""
    count = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            count += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
        except OSError:
            pass
    return count


class RssSampler:
    """Reads the server's VmRSS every 20 ms in a thread and keeps the peak."""

    def __init__(self, pid):
        self.pid = pid
        self.peak = rss_kib(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.02):
            try:
                self.peak = max(self.peak, rss_kib(self.pid))
            except (OSError, KeyError):
                return

    def stop(self):
        self._stop.set()
        self._thread.join()
        try:
            self.peak = max(self.peak, rss_kib(self.pid))
        except (OSError, KeyError):
            pass
        return self.peak


class NormalClient:
    """A well-behaved grpcio client on its own connection: EmptyCall and UnaryCall alternately, 5 ms apart."""

    def __init__(self, server):
        self.channel = grpc.insecure_channel(server.address)
        self.stub = STUBS.test_pb2_grpc.TestServiceStub(self.channel)
        self.latencies = []
        self.failures = []
        self._stop = threading.Event()
        grpc.channel_ready_future(self.channel).result(timeout=10)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        empty = STUBS.empty_pb2.Empty()
        unary = STUBS.messages_pb2.SimpleRequest(response_size=64, payload=STUBS.messages_pb2.Payload(body=b"x" * 64))
        calls = 0
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                if calls % 2:
                    self.stub.EmptyCall(empty, timeout=5)
                else:
                    self.stub.UnaryCall(unary, timeout=5)
                self.latencies.append(time.perf_counter() - started)
            except grpc.RpcError as error:
                self.failures.append("%s: %s" % (error.code(), error.details()))
            calls += 1
            self._stop.wait(0.005)

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.channel.close()

    def percentile(self, fraction):
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]

    def describe(self):
        return "normal client %d calls, p50 %.1f ms, p99 %.1f ms, %d failures%s" % (
            len(self.latencies), self.percentile(0.5) * 1000, self.percentile(0.99) * 1000, len(self.failures),
            " (%s)" % "; ".join(sorted(set(self.failures))[:3]) if self.failures else "")


class Attack:
    """What one attack measured; `outcome` says what the server did."""

    def __init__(self, name):
        self.name = name
        self.outcome = ""
        self.rss_before = self.rss_peak = self.rss_after = 0
        self.client = None

    @property
    def growth_mib(self):
        return (self.rss_peak - self.rss_before) / 1024

    def line(self):
        return "%s: %s; %s; RSS %.1f / %.1f / %.1f MiB" % (
            self.name, self.outcome, self.client.describe(), self.rss_before / 1024, self.rss_peak / 1024,
            self.rss_after / 1024)


# --- raw connections -----------------------------------------------------------------------------------------------


def headers_frame(server, path, stream_id, extra=()):
    """A complete request HEADERS frame (END_HEADERS, no END_STREAM)."""
    fields = [(":method", "POST"), (":scheme", "http"), (":path", path),
              (":authority", "%s:%d" % (server.host, server.port)), ("content-type", "application/grpc"),
              ("te", "trailers")] + list(extra)
    return h2raw.encode_frame(h2raw.HEADERS, h2raw.FLAG_END_HEADERS, stream_id, h2raw.HpackEncoder().encode(fields))


def raw_socket(server, receive_buffer=None):
    """A plain TCP socket to the server (with a receive buffer set before connecting, so that it takes effect)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(10)
    sock.connect((server.host, server.port))
    return sock


def read_available(sock, into):
    """Appends what the peer sent to `into` without blocking; True once the peer closed (EOF or reset)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    try:
        while poller.poll(0):
            data = sock.recv(65536)
            if not data:
                return True
            into += data
    except OSError:
        return True
    return False


def last_goaway(data):
    """The last GOAWAY frame in raw bytes the server sent (frames from the start, no preface), or None."""
    position, found = 0, None
    while position + 9 <= len(data):
        length = int.from_bytes(data[position:position + 3], "big")
        if position + 9 + length > len(data):
            break
        if data[position + 3] == h2raw.GOAWAY:
            found = h2raw.Frame(h2raw.GOAWAY, data[position + 4], 0, bytes(data[position + 9:position + 9 + length]))
        position += 9 + length
    return found


def describe_goaway(frame):
    if frame is None:
        return "no GOAWAY"
    name = h2raw.ERROR_NAMES.get(frame.error_code, frame.error_code)
    return "GOAWAY %s%s" % (name, " %r" % frame.debug_data.decode("latin-1") if frame.debug_data else "")


def read_until_closed(conn, timeout):
    """Reads frames until the peer closed, or `timeout`; returns whether it closed."""
    try:
        conn.read_until_closed(timeout)
    except h2raw.H2Error:
        pass
    return conn.closed


class AbuseTest(unittest.TestCase):
    def setUp(self):
        # A server of its own per attack, so that each memory figure starts from a fresh process.
        self.server = InteropServer().start()
        self.addCleanup(self.server.stop)
        self.m = STUBS.messages_pb2

    def tearDown(self):
        assert_empty_call_works(self, self.server, STUBS)

    def connect(self, timeout=10, settings=None):
        conn = h2raw.H2Connection(self.server.host, self.server.port, timeout=timeout)
        self.addCleanup(conn.close)
        conn.handshake(settings)
        return conn

    def under_attack(self, name, attack, max_growth_mib):
        """Runs `attack(record)` while a normal client calls, measures the server's RSS, prints the figures and checks
        the safety bounds."""
        pid = self.server.proc.pid
        record = Attack(name)
        record.client = NormalClient(self.server)
        try:
            time.sleep(0.2)
            record.rss_before = rss_kib(pid)
            sampler = RssSampler(pid)
            try:
                attack(record)
            finally:
                record.rss_peak = sampler.stop()
            time.sleep(0.5)  # the server notices the closed connections and frees them
            record.rss_after = rss_kib(pid)
        finally:
            record.client.stop()
        FIGURES.append(record.line())
        print("\n    " + record.line(), end=" ")
        self.assertTrue(self.server.alive(), "interop-server died: " + self.server.log_tail())
        self.assertEqual(record.client.failures[:5], [], "the normal client failed during " + name)
        self.assertGreater(len(record.client.latencies), 0, "the normal client made no call during " + name)
        self.assertLess(record.growth_mib, max_growth_mib, "server memory grew too much during " + name)
        return record

    # --- slowloris ---------------------------------------------------------------------------------------------

    def test_slowloris(self):
        """100 connections send the preface, then a 520-byte HEADERS frame one byte every 100 ms (52 s if let be);
        20 more connect and never send the preface. The server must close them all once its header timeout (10 s)
        has passed: GOAWAY ENHANCE_YOUR_CALM "header_timeout", then close."""
        margin = 5.0

        def attack(record):
            frame = headers_frame(self.server, SERVICE + "EmptyCall", 1, extra=[("x-slow", "s" * 400)])
            hello = h2raw.PREFACE + h2raw.encode_frame(h2raw.SETTINGS, 0, 0)
            dribblers = []
            for _ in range(100):
                sock = raw_socket(self.server)
                self.addCleanup(sock.close)
                sock.sendall(hello)
                dribblers.append(sock)
            silent = []
            for _ in range(20):
                sock = raw_socket(self.server)
                self.addCleanup(sock.close)
                silent.append(sock)
            connections = dribblers + silent
            received = [bytearray() for _ in connections]
            cut = {}  # index -> seconds from the first HEADERS byte (from the connect for the silent ones)
            started = time.monotonic()
            position = 0
            while len(cut) < len(connections) and time.monotonic() - started < HEADER_TIMEOUT + margin:
                for index, sock in enumerate(connections):
                    if index in cut:
                        continue
                    if read_available(sock, received[index]):
                        cut[index] = time.monotonic() - started
                    elif index < len(dribblers) and position < len(frame):
                        try:
                            sock.sendall(frame[position:position + 1])
                        except OSError:
                            cut[index] = time.monotonic() - started
                position += 1
                time.sleep(0.1)
            for sock in connections:
                sock.close()

            def span(indexes):
                times = [cut[i] for i in indexes if i in cut]
                return "%d/%d after %s s" % (len(times), len(indexes), "%.1f-%.1f" % (min(times), max(times))
                                             if times else "-")

            goaways = {describe_goaway(last_goaway(received[i])) for i in cut}
            record.outcome = "dribbling connections cut off: %s (%d header bytes of %d sent); silent ones: %s; %s" % (
                span(range(len(dribblers))), min(position, len(frame)), len(frame),
                span(range(len(dribblers), len(connections))), ", ".join(sorted(goaways)))
            record.cut, record.goaways = cut, goaways

        record = self.under_attack("slowloris", attack, max_growth_mib=50)
        self.assertEqual(len(record.cut), 120, "connections still open after %.0f s: %s" % (
            HEADER_TIMEOUT + margin, record.outcome))
        self.assertEqual(record.goaways, {"GOAWAY ENHANCE_YOUR_CALM 'header_timeout'"}, record.outcome)

    # --- clients that never read -------------------------------------------------------------------------------

    def test_client_that_never_reads(self):
        """Four connections open 100 StreamingOutputCall streams each (512 responses of 32 KiB per stream: 1.6 GiB
        per connection) and never read: two never send WINDOW_UPDATE (default 64 KiB windows), two open every window
        to 2^31-1 and stop reading the socket (4 KiB receive buffer). What the server holds for them must stay bounded:
        the connection's send queue limit (8 MiB), a message per stream (queued, and the copies its suspended writer
        holds), one flush (1 MiB); under 64 MiB per connection, where 100 streams x the 1 MiB per-stream limit alone
        came to 100-200 MiB before. Then each sends 2,000 SETTINGS frames: the server must close these connections
        although it cannot write to them."""
        streams = 100
        request = self.m.StreamingOutputCallRequest(
            response_parameters=[self.m.ResponseParameters(size=32 * 1024) for _ in range(512)])
        body = h2raw.grpc_frame(request.SerializeToString())

        def open_calls(sock, big_windows):
            settings = {h2raw.SETTINGS_ENABLE_PUSH: 0}
            if big_windows:
                settings[h2raw.SETTINGS_INITIAL_WINDOW_SIZE] = h2raw.MAX_WINDOW
            out = bytearray(h2raw.PREFACE + h2raw.encode_frame(h2raw.SETTINGS, 0, 0, h2raw.settings_payload(settings)))
            if big_windows:
                out += h2raw.encode_frame(h2raw.WINDOW_UPDATE, 0, 0,
                                          struct.pack(">I", h2raw.MAX_WINDOW - h2raw.DEFAULT_WINDOW))
            for index in range(streams):
                out += headers_frame(self.server, SERVICE + "StreamingOutputCall", 1 + 2 * index)
                out += h2raw.encode_frame(h2raw.DATA, h2raw.FLAG_END_STREAM, 1 + 2 * index, body)
            sock.sendall(bytes(out))

        def attack(record):
            sockets = []
            for big_windows in (False, False, True, True):
                sock = raw_socket(self.server, receive_buffer=4096)
                self.addCleanup(sock.close)
                open_calls(sock, big_windows)
                sockets.append(sock)
            time.sleep(4)
            pid = self.server.proc.pid
            record.per_connection_mib = (rss_kib(pid) - record.rss_before) / 1024 / len(sockets)
            # Still not reading (which would let the server flush and close): the server's own count of sockets
            # tells whether it closed them.
            open_before = open_sockets(pid)
            started = time.monotonic()
            for sock in sockets:
                sock.sendall(h2raw.encode_frame(h2raw.SETTINGS, 0, 0) * 2000)
            while open_sockets(pid) > open_before - len(sockets) and time.monotonic() - started < 5:
                time.sleep(0.05)
            record.closed = open_before - open_sockets(pid)
            record.outcome = "%d connections x %d streams, never read: +%.1f MiB per connection after 4 s; then a " \
                "SETTINGS flood: %d/%d closed by the server%s" % (
                    len(sockets), streams, record.per_connection_mib, record.closed, len(sockets),
                    " in %.2f s" % (time.monotonic() - started) if record.closed == len(sockets) else "")
            for sock in sockets:
                sock.close()

        record = self.under_attack("never reads", attack, max_growth_mib=4 * 64)
        self.assertLess(record.per_connection_mib, 64, record.outcome)
        self.assertEqual(record.closed, 4, record.outcome)

    # --- idle connections ----------------------------------------------------------------------------------------

    def test_idle_connections(self):
        """IDLE_CONNECTIONS connections send the preface and an empty SETTINGS frame, then stay idle: the server
        keeps them all and keeps serving; memory grows by less than 40 KiB a connection (about 11 measured, read once
        the connections have been quiet past the server's 5 s idleMemoryReleaseDelay)."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        count = min(IDLE_CONNECTIONS, soft - 256)  # the server and the normal client need descriptors too
        if count < IDLE_CONNECTIONS:
            print("\n    open-file limit %d: %d idle connections instead of %d" % (soft, count, IDLE_CONNECTIONS),
                  end=" ")
        hello = h2raw.PREFACE + h2raw.encode_frame(h2raw.SETTINGS, 0, 0)

        def attack(record):
            sockets = []
            started = time.monotonic()
            try:
                for _ in range(count):
                    sock = socket.create_connection((self.server.host, self.server.port), timeout=10)
                    sock.sendall(hello)
                    sockets.append(sock)
                opened = time.monotonic() - started
                # Every connection receives the server's SETTINGS: the server has set each one up.
                poller = select.epoll()
                pending = {}
                for sock in sockets:
                    poller.register(sock.fileno(), select.EPOLLIN)
                    pending[sock.fileno()] = sock
                closed = 0
                deadline = time.monotonic() + 30
                while pending and time.monotonic() < deadline:
                    for fileno, _ in poller.poll(0.1):
                        sock = pending.pop(fileno, None)
                        if sock is None:
                            continue
                        poller.unregister(fileno)
                        try:
                            closed += not sock.recv(65536)
                        except OSError:
                            closed += 1
                poller.close()
                time.sleep(6)  # past the release delay: what an idle connection keeps, not what its set-up took
                with_connections = rss_kib(self.server.proc.pid)
                record.closed_by_server = closed + len(pending)
                record.outcome = "%d connections opened in %.1f s, %d not set up, %d closed by the server: " \
                    "%.1f KiB per connection" % (count, opened, len(pending), closed,
                                                 (with_connections - record.rss_before) / count)
            finally:
                for sock in sockets:
                    sock.close()

        record = self.under_attack("%d idle connections" % count, attack, max_growth_mib=max(50, count * 40 / 1024))
        self.assertEqual(record.closed_by_server, 0, record.outcome)

    # --- oversized metadata --------------------------------------------------------------------------------------

    def test_oversized_metadata(self):
        """Header lists past SETTINGS_MAX_HEADER_LIST_SIZE (16 KiB): 500 calls with 20 KB of metadata each and one
        with 10,000 small headers are refused, the connection goes on; 400 small headers (within the limit) are
        served; single header values of 100 KiB and 1 MiB (past nghttp2's 64 KiB per field) end the connection."""

        def attack(record):
            outcomes = []
            conn = self.connect()
            big = [("x-big-%d" % i, "v" * 4000) for i in range(5)]
            refused = 0
            for _ in range(500):
                sid = conn.new_stream_id()
                conn.send_headers(sid, conn.grpc_headers(SERVICE + "EmptyCall", extra=big))
                conn.send_data(sid, h2raw.grpc_frame(b""), end_stream=True)
                st = conn.wait_stream(sid)
                refused += st.reset_code is not None or st.grpc_status not in (None, 0)
            ok = conn.grpc_call(SERVICE + "EmptyCall", h2raw.grpc_frame(b""))
            outcomes.append("500 lists of 20 KB: %d refused (RST_STREAM), the next call OK" % refused)
            self.assertEqual(refused, 500)
            self.assertEqual(ok.grpc_status, 0, ok.describe())

            st = conn.grpc_call(SERVICE + "EmptyCall", h2raw.grpc_frame(b""),
                                extra=[("x-m%d" % i, "v") for i in range(10000)])
            outcomes.append("10,000 small headers: %s" % (
                "RST_STREAM %s" % h2raw.ERROR_NAMES.get(st.reset_code) if st.reset_code is not None
                else "grpc-status %s" % st.grpc_status))
            self.assertTrue(st.reset_code is not None or st.grpc_status != 0, st.describe())

            st = conn.grpc_call(SERVICE + "EmptyCall", h2raw.grpc_frame(b""),
                                extra=[("x-m%d" % i, "v") for i in range(400)])
            outcomes.append("400 small headers: grpc-status %s" % st.grpc_status)
            self.assertEqual(st.grpc_status, 0, st.describe())

            for size, label in ((100 << 10, "100 KiB"), (1 << 20, "1 MiB")):
                conn = self.connect()
                sid = conn.new_stream_id()
                started = time.monotonic()
                try:
                    conn.send_headers(sid, conn.grpc_headers(SERVICE + "EmptyCall", extra=[("x-huge", "h" * size)]))
                    conn.send_data(sid, h2raw.grpc_frame(b""), end_stream=True)
                except OSError:
                    pass
                closed = read_until_closed(conn, 10)
                stream = conn.streams.get(sid)
                outcomes.append("one %s value: %s" % (label, "connection closed in %.2f s, %s" % (
                    time.monotonic() - started, describe_goaway(conn.goaway)) if closed else
                    "connection open, stream: %s" % (stream.describe() if stream else "no answer")))
                self.assertTrue(closed or (stream is not None and stream.reset_code is not None),
                                "a %s header value was neither refused nor ended the connection" % label)
            record.outcome = "; ".join(outcomes)

        self.under_attack("oversized metadata", attack, max_growth_mib=50)

    # --- RST_STREAM flood ----------------------------------------------------------------------------------------

    def test_rst_stream_flood(self):
        """Open-and-reset pairs (Rapid Reset, CVE-2023-44487) as fast as the socket takes them, up to 100,000; then
        RST_STREAMs for a stream already closed, up to 100,000. Both must be cut off (nghttp2's reset rate limit:
        1,000 at once, then 33 a second)."""

        def flood(conn, frames):
            """Sends batches until the server's GOAWAY shows up; returns (closed, description)."""
            sent = 0
            started = time.monotonic()
            try:
                while sent < 100000 and conn.goaway is None and not conn.closed:
                    count, batch = frames()
                    conn.send_raw(batch)
                    sent += count
                    while conn.goaway is None and conn.read_frame(timeout=0.0005) is not None:
                        pass
            except (OSError, h2raw.ConnectionClosed):
                pass
            seconds = time.monotonic() - started
            closed = read_until_closed(conn, 3)
            processed = " (last stream %d)" % conn.goaway.last_stream_id if conn.goaway else ""
            return closed, "%s%s after %d sent in %.2f s%s" % (
                describe_goaway(conn.goaway), processed, sent, seconds, ", closed" if closed else ", still open")

        def attack(record):
            conn = self.connect()
            headers = conn.encoder.encode(conn.grpc_headers(SERVICE + "FullDuplexCall"))

            def open_and_reset():
                batch = bytearray()
                for _ in range(500):
                    sid = conn.new_stream_id()
                    batch += h2raw.encode_frame(h2raw.HEADERS, h2raw.FLAG_END_HEADERS, sid, headers)
                    batch += h2raw.encode_frame(h2raw.RST_STREAM, 0, sid, struct.pack(">I", h2raw.CANCEL))
                return 500, bytes(batch)

            rapid_closed, rapid = flood(conn, open_and_reset)

            conn = self.connect()
            ok = conn.grpc_call(SERVICE + "EmptyCall", h2raw.grpc_frame(b""))
            self.assertEqual(ok.grpc_status, 0, ok.describe())
            reset = h2raw.encode_frame(h2raw.RST_STREAM, 0, ok.id, struct.pack(">I", h2raw.CANCEL)) * 100
            closed_stream_closed, closed_stream = flood(conn, lambda: (100, reset))
            record.outcome = "open+reset pairs: %s; RST_STREAM on a closed stream: %s" % (rapid, closed_stream)
            record.cut_off = rapid_closed and closed_stream_closed

        record = self.under_attack("RST_STREAM flood", attack, max_growth_mib=50)
        self.assertTrue(record.cut_off, record.outcome)

    # --- SETTINGS flood ------------------------------------------------------------------------------------------

    def test_settings_flood(self):
        """10,000 SETTINGS frames in one burst, and 10 SETTINGS frames of 1,000 entries each: both must be cut off with
        GOAWAY ENHANCE_YOUR_CALM (nghttp2: more than 1,000 ACKs pending, more than 32 entries in a frame). 20,000 in
        batches of 500 with the ACKs read in between: acknowledged as they come, or cut off the same way when the
        server happens to read more than 1,000 at once (a slow debug build does); memory stays flat either way."""

        def attack(record):
            outcomes = []
            codes = []
            frame = h2raw.encode_frame(h2raw.SETTINGS, 0, 0,
                                       h2raw.settings_payload({h2raw.SETTINGS_INITIAL_WINDOW_SIZE: 100000}))
            conn = self.connect()
            started = time.monotonic()
            try:
                conn.send_raw(frame * 10000)
            except OSError:
                pass
            burst_closed = read_until_closed(conn, 5)
            codes.append(conn.goaway and conn.goaway.error_code)
            outcomes.append("10,000 in a burst: %s" % ("closed in %.2f s, %s" % (
                time.monotonic() - started, describe_goaway(conn.goaway)) if burst_closed else "not cut off"))

            conn = self.connect()
            acks = sent = 0
            started = time.monotonic()
            try:
                while sent < 20000 and not conn.closed:
                    conn.send_raw(frame * 500)
                    sent += 500
                    while True:
                        received = conn.read_frame(timeout=0.001)
                        if received is None:
                            break
                        acks += received.type == h2raw.SETTINGS and bool(received.flags & h2raw.FLAG_ACK)
            except (OSError, h2raw.ConnectionClosed):
                pass
            paced_closed = read_until_closed(conn, 2)
            codes.append(conn.goaway and conn.goaway.error_code)
            outcomes.append("in batches of 500: %s after %d acknowledged" % (
                "closed in %.2f s, %s" % (time.monotonic() - started, describe_goaway(conn.goaway))
                if paced_closed else "kept open", acks))

            conn = self.connect()
            wide = h2raw.encode_frame(h2raw.SETTINGS, 0, 0, b"".join(
                struct.pack(">HI", h2raw.SETTINGS_INITIAL_WINDOW_SIZE, 65535 + i) for i in range(1000)))
            try:
                conn.send_raw(wide * 10)
            except OSError:
                pass
            wide_closed = read_until_closed(conn, 5)
            codes.append(conn.goaway and conn.goaway.error_code)
            outcomes.append("1,000 entries a frame: %s" % (
                "closed, %s" % describe_goaway(conn.goaway) if wide_closed else "not cut off"))
            record.outcome = "; ".join(outcomes)
            record.cut_off = burst_closed and wide_closed
            record.codes = codes if paced_closed else codes[:1] + codes[2:]

        record = self.under_attack("SETTINGS flood", attack, max_growth_mib=50)
        self.assertTrue(record.cut_off, record.outcome)
        self.assertEqual(set(record.codes), {h2raw.ENHANCE_YOUR_CALM}, record.outcome)

    # --- WINDOW_UPDATE storm -------------------------------------------------------------------------------------

    def test_window_update_storm(self):
        """100,000 WINDOW_UPDATEs of 1 byte, on the connection and on an open stream in turn, with default windows:
        harmless, the connection goes on serving. Then a stream window pushed past 2^31-1 (RST_STREAM
        FLOW_CONTROL_ERROR, the connection goes on), the connection window pushed past it (GOAWAY
        FLOW_CONTROL_ERROR), and a zero increment (GOAWAY PROTOCOL_ERROR)."""

        def attack(record):
            outcomes = []
            conn = h2raw.H2Connection(self.server.host, self.server.port, timeout=10)
            self.addCleanup(conn.close)
            conn.send_preface({h2raw.SETTINGS_ENABLE_PUSH: 0}, connection_window=h2raw.DEFAULT_WINDOW)
            conn.wait_for(lambda: conn.peer_settings_received, 10, "server SETTINGS")
            sid = conn.new_stream_id()
            conn.send_headers(sid, conn.grpc_headers(SERVICE + "FullDuplexCall"))
            storm = (h2raw.encode_frame(h2raw.WINDOW_UPDATE, 0, 0, struct.pack(">I", 1))
                     + h2raw.encode_frame(h2raw.WINDOW_UPDATE, 0, sid, struct.pack(">I", 1))) * 1000
            started = time.monotonic()
            for _ in range(50):
                conn.send_raw(storm)
                while conn.read_frame(timeout=0.0005) is not None:
                    pass
            ok = conn.grpc_call(SERVICE + "EmptyCall", h2raw.grpc_frame(b""), timeout=10)
            outcomes.append("100,000 increments of 1 in %.2f s, then a call: grpc-status %s" % (
                time.monotonic() - started, ok.grpc_status))
            self.assertEqual(ok.grpc_status, 0, ok.describe())

            conn.send_window_update(sid, h2raw.MAX_WINDOW)
            st = conn.wait_stream(sid, timeout=10)
            ok = conn.grpc_call(SERVICE + "EmptyCall", h2raw.grpc_frame(b""), timeout=10)
            outcomes.append("stream window past 2^31-1: RST_STREAM %s, then a call: grpc-status %s" % (
                h2raw.ERROR_NAMES.get(st.reset_code, st.reset_code), ok.grpc_status))
            self.assertEqual(st.reset_code, h2raw.FLOW_CONTROL_ERROR, st.describe())
            self.assertEqual(ok.grpc_status, 0, ok.describe())

            conn.send_window_update(0, h2raw.MAX_WINDOW)
            closed = read_until_closed(conn, 5)
            outcomes.append("connection window past 2^31-1: %s, %s" % (
                describe_goaway(conn.goaway), "closed" if closed else "still open"))
            self.assertIsNotNone(conn.goaway, "no GOAWAY after the connection window overflowed")
            self.assertEqual(conn.goaway.error_code, h2raw.FLOW_CONTROL_ERROR, conn.goaway)
            self.assertTrue(closed)

            conn = self.connect()
            conn.send_window_update(0, 0)
            closed = read_until_closed(conn, 5)
            outcomes.append("zero increment: %s" % describe_goaway(conn.goaway))
            self.assertIsNotNone(conn.goaway, "no GOAWAY after a zero increment")
            self.assertEqual(conn.goaway.error_code, h2raw.PROTOCOL_ERROR, conn.goaway)
            record.outcome = "; ".join(outcomes)

        self.under_attack("WINDOW_UPDATE storm", attack, max_growth_mib=50)


if __name__ == "__main__":
    unittest.main()
