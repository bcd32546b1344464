"""Malformed and abusive HTTP/2 / gRPC traffic against interop-server, sent with the raw client h2raw.py.

Every test ends (tearDown) by checking that the server still answers a normal EmptyCall from grpcio.

Expectations where the specs leave room (see also the report in the module docstrings of the tests):
* wrong content-type: HTTP 415 (PROTOCOL-HTTP2.md "SHOULD respond with HTTP status 415"); if a grpc-status is
  present as well it must not be OK.
* missing `te: trailers`: the call fails with INTERNAL: grpc-status 13, or (if the server answers with a bare HTTP
  error and no grpc-status) an HTTP status that clients map to INTERNAL (400).
* over SETTINGS_MAX_CONCURRENT_STREAMS: see the two tests at the end.
"""

import os
import struct
import time
import unittest

import h2raw
from interop_common import InteropServer, assert_empty_call_works, load_stubs

STUBS = None
SERVER = None
SERVICE = "/grpc.testing.TestService/"
MAX_MESSAGE = 4 * 1024 * 1024


def setUpModule():
    global STUBS, SERVER
    STUBS = load_stubs()
    SERVER = InteropServer().start()


def tearDownModule():
    if SERVER is not None:
        SERVER.stop()


class BadInputTest(unittest.TestCase):
    def setUp(self):
        global SERVER
        if not SERVER.alive():
            SERVER = InteropServer().start()
        self.server = SERVER
        self.m = STUBS.messages_pb2

    def tearDown(self):
        # The closing check of every test: the server survived and serves a normal call from grpcio.
        assert_empty_call_works(self, self.server, STUBS)

    def connect(self, handshake=True, timeout=10):
        conn = h2raw.H2Connection(self.server.host, self.server.port, timeout=timeout)
        self.addCleanup(conn.close)
        if handshake:
            conn.handshake()
        return conn

    def open_call(self, conn, method, **header_kwargs):
        sid = conn.new_stream_id()
        conn.send_headers(sid, conn.grpc_headers(SERVICE + method, **header_kwargs))
        return sid

    def assertGrpcStatus(self, st, code):
        self.assertEqual(st.grpc_status, code, "expected grpc-status %d; %s" % (code, st.describe()))

    # --- baseline: proves the raw client itself speaks gRPC correctly ------------------------------------------

    def test_raw_client_baseline(self):
        conn = self.connect()
        st = conn.grpc_call(SERVICE + "EmptyCall", h2raw.grpc_frame(b""))
        self.assertEqual(st.status, 200, st.describe())
        self.assertGrpcStatus(st, h2raw.GRPC_OK)
        self.assertEqual(st.grpc_messages(), [(0, b"")])
        self.assertTrue(st.get("content-type", "").startswith("application/grpc"), st.describe())
        # application/grpc+proto is the same thing spelled out.
        req = self.m.SimpleRequest(response_size=10)
        st = conn.grpc_call(SERVICE + "UnaryCall", h2raw.grpc_frame(req.SerializeToString()),
                            content_type="application/grpc+proto")
        self.assertGrpcStatus(st, h2raw.GRPC_OK)
        (flag, body), = st.grpc_messages()
        self.assertEqual(len(self.m.SimpleResponse.FromString(body).payload.body), 10)

    def test_rfc7540_priority_signals_are_ignored(self):
        """The server declares SETTINGS_NO_RFC7540_PRIORITIES = 1 (RFC 9218): gRPC has no stream priorities, and
        nghttp2 then schedules streams without its dependency tree. A client that still sends RFC 7540 signals (a
        PRIORITY frame, HEADERS with the PRIORITY flag, a stream depending exclusively on another) is answered as
        usual."""
        conn = self.connect()
        conn.wait_for(lambda: conn.peer_settings_received, 5, "server SETTINGS")
        self.assertEqual(conn.peer_settings.get(h2raw.SETTINGS_NO_RFC7540_PRIORITIES), 1, conn.peer_settings)
        first = conn.new_stream_id()
        conn.send_frame(h2raw.PRIORITY, 0, first, struct.pack(">IB", 0, 199))  # on the idle stream: weight 200
        second = conn.new_stream_id()
        for sid, depends_on in ((first, 0), (second, 0x80000000 | first)):  # the second: exclusive on the first
            conn.streams[sid] = h2raw.Stream(sid)
            block = conn.encoder.encode(conn.grpc_headers(SERVICE + "EmptyCall"))
            conn.send_frame(h2raw.HEADERS, h2raw.FLAG_END_HEADERS | h2raw.FLAG_PRIORITY, sid,
                            struct.pack(">IB", depends_on, 15) + block)
        for sid in (second, first):
            conn.send_data(sid, h2raw.grpc_frame(b""), end_stream=True)
        for sid in (first, second):
            st = conn.wait_stream(sid, timeout=10)
            self.assertGrpcStatus(st, h2raw.GRPC_OK)
            self.assertEqual(st.grpc_messages(), [(0, b"")])

    # --- header problems ---------------------------------------------------------------------------------------

    def test_wrong_content_type_gets_http_415(self):
        conn = self.connect()
        st = conn.grpc_call(SERVICE + "EmptyCall", h2raw.grpc_frame(b""), content_type="text/plain")
        self.assertEqual(st.status, 415, st.describe())
        if st.grpc_status is not None:
            self.assertNotEqual(st.grpc_status, h2raw.GRPC_OK, st.describe())

    def test_missing_te_trailers_is_internal(self):
        conn = self.connect()
        st = conn.grpc_call(SERVICE + "EmptyCall", h2raw.grpc_frame(b""), omit=("te",))
        self.assertEqual(st.effective_grpc_status, h2raw.GRPC_INTERNAL, st.describe())

    def test_header_list_over_advertised_limit_resets_only_that_stream(self):
        conn = self.connect()
        big = [("x-big-%d" % i, "v" * 4000) for i in range(5)]  # about 20 KB, over the 16 KiB we advertise
        sid = conn.new_stream_id()
        conn.send_headers(sid, conn.grpc_headers(SERVICE + "EmptyCall", extra=big))
        conn.send_data(sid, h2raw.grpc_frame(b""), end_stream=True)
        st = conn.wait_stream(sid)
        self.assertIsNotNone(st.reset_code, "an oversized header list must reset the stream; " + st.describe())
        self.assertNotEqual(st.grpc_status, 0, st.describe())
        # The connection itself survives: the next call on it works.
        ok = conn.grpc_call(SERVICE + "EmptyCall", h2raw.grpc_frame(b""))
        self.assertGrpcStatus(ok, 0)

    # --- message framing problems ------------------------------------------------------------------------------

    def test_truncated_message_is_internal(self):
        conn = self.connect()
        body = struct.pack(">BI", 0, 100) + b"\0" * 10  # announces 100 bytes, delivers 10, then END_STREAM
        st = conn.grpc_call(SERVICE + "UnaryCall", body)
        self.assertGrpcStatus(st, h2raw.GRPC_INTERNAL)

    def test_length_prefix_over_4mib_is_resource_exhausted_before_payload(self):
        conn = self.connect()
        sid = self.open_call(conn, "UnaryCall")
        # Only the prefix (and a few bytes) of a 4 MiB + 1 message; no END_STREAM. The server must refuse on
        # the prefix alone instead of waiting for (and buffering) the payload.
        conn.send_data(sid, struct.pack(">BI", 0, MAX_MESSAGE + 1) + b"\0" * 16)
        st = conn.wait_stream(sid, timeout=10)
        self.assertGrpcStatus(st, h2raw.GRPC_RESOURCE_EXHAUSTED)
        self.assertTrue(st.grpc_message, "RESOURCE_EXHAUSTED without a grpc-message saying why")

    def test_invalid_protobuf_is_internal(self):
        conn = self.connect()
        garbage = b"\x1a\x64\x00\x00"  # field 3 (payload), length-delimited, length 100, but only 2 bytes follow
        st = conn.grpc_call(SERVICE + "UnaryCall", h2raw.grpc_frame(garbage))
        self.assertGrpcStatus(st, h2raw.GRPC_INTERNAL)

    def test_compressed_flag_without_grpc_encoding_is_internal(self):
        conn = self.connect()
        st = conn.grpc_call(SERVICE + "EmptyCall", h2raw.grpc_gzip_frame(b""))
        self.assertGrpcStatus(st, h2raw.GRPC_INTERNAL)

    def test_unknown_grpc_encoding_is_unimplemented_with_accept_encoding(self):
        conn = self.connect()
        st = conn.grpc_call(SERVICE + "EmptyCall", h2raw.grpc_frame(b"\x00\x01\x02", compressed=True),
                            extra=[("grpc-encoding", "snappy")])
        self.assertGrpcStatus(st, h2raw.GRPC_UNIMPLEMENTED)
        accepted = [v for n, v in st.all_fields() if n == "grpc-accept-encoding"]
        self.assertTrue(accepted, "no grpc-accept-encoding in the response: %s" % st.describe())
        encodings = {e.strip() for v in accepted for e in v.split(",")}
        self.assertIn("gzip", encodings)
        self.assertNotIn("snappy", encodings)

    # --- connection-level abuse --------------------------------------------------------------------------------

    def test_garbage_instead_of_preface_closes_connection(self):
        conn = self.connect(handshake=False)
        conn.send_raw(b"GET / HTTP/1.1\r\nHost: habitflow\r\n\r\n" + os.urandom(64))
        self.assertTrue(conn.read_until_closed(10), "server kept a connection with a bad preface open")
        # A GOAWAY before closing is nice to have (nghttp2 does not send one for a bad preface): report only.
        print("\n    bad preface: GOAWAY %s" % ("sent: %r" % conn.goaway if conn.goaway else "not sent"), end=" ")

    def test_rapid_open_and_reset_flood(self):
        conn = self.connect()
        headers = conn.encoder.encode(conn.grpc_headers(SERVICE + "FullDuplexCall"))
        batch = bytearray()
        for i in range(1000):
            sid = conn.new_stream_id()
            batch += h2raw.encode_frame(h2raw.HEADERS, h2raw.FLAG_END_HEADERS, sid, headers)
            batch += h2raw.encode_frame(h2raw.RST_STREAM, 0, sid, struct.pack(">I", h2raw.CANCEL))
            if i % 100 == 99:
                try:
                    conn.send_raw(bytes(batch))
                except OSError:
                    break  # the server may cut us off (Rapid Reset protection): fine
                batch.clear()
        # Whatever the server chose for this connection (keep serving, or GOAWAY and close), it must survive.
        try:
            conn.wait_for(lambda: conn.goaway is not None, timeout=2, what="GOAWAY")
        except h2raw.H2Error:
            pass
        print("\n    after 1000 open+reset: %s" % (repr(conn.goaway) if conn.goaway else "no GOAWAY"), end=" ")
        if conn.goaway is not None:
            self.assertIn(conn.goaway.error_code, (h2raw.ENHANCE_YOUR_CALM, h2raw.NO_ERROR, h2raw.PROTOCOL_ERROR,
                                                   h2raw.INTERNAL_ERROR), conn.goaway)

    def test_ping_flood_without_calls_gets_goaway_too_many_pings(self):
        conn = self.connect()
        conn.wait_for(lambda: conn.settings_acked, 5, "SETTINGS ACK")
        deadline = time.monotonic() + 10
        sent = 0
        try:
            while conn.goaway is None and time.monotonic() < deadline and sent < 200:
                conn.send_ping(struct.pack(">Q", sent))
                sent += 1
                conn.read_frame(timeout=0.02)
            conn.read_until_closed(5)
        except (h2raw.ConnectionClosed, OSError):
            pass
        self.assertIsNotNone(conn.goaway, "no GOAWAY after %d pings; frames: %r" % (sent, conn.frames[-10:]))
        self.assertEqual(conn.goaway.error_code, h2raw.ENHANCE_YOUR_CALM, conn.goaway)
        self.assertEqual(conn.goaway.debug_data, b"too_many_pings", conn.goaway)
        self.assertGreater(sent, 1, "the very first ping must not count as abuse")

    # --- SETTINGS_MAX_CONCURRENT_STREAMS -----------------------------------------------------------------------

    def _open_streams(self, conn, count):
        headers = conn.encoder.encode(conn.grpc_headers(SERVICE + "FullDuplexCall"))
        sids, out = [], bytearray()
        for _ in range(count):  # FullDuplexCall without END_STREAM: every stream stays open on the server
            sid = conn.new_stream_id()
            sids.append(sid)
            conn.streams[sid] = h2raw.Stream(sid)
            out += h2raw.encode_frame(h2raw.HEADERS, h2raw.FLAG_END_HEADERS, sid, headers)
        conn.send_raw(bytes(out))
        return sids

    def _max_streams(self, conn):
        limit = conn.peer_settings.get(h2raw.SETTINGS_MAX_CONCURRENT_STREAMS)
        self.assertIsNotNone(limit, "server SETTINGS carry no MAX_CONCURRENT_STREAMS: %r" % conn.peer_settings)
        self.assertLess(limit, 100000, "MAX_CONCURRENT_STREAMS effectively unlimited")
        return limit

    def _finish_first_stream(self, conn, sid):
        conn.send_data(sid, b"", end_stream=True)  # half-close an empty FullDuplexCall: OK, no messages
        st = conn.wait_stream(sid, timeout=10)
        self.assertGrpcStatus(st, h2raw.GRPC_OK)

    def test_streams_over_max_concurrent_refused(self):
        """Excess streams opened before we acknowledged the server's SETTINGS get RST_STREAM REFUSED_STREAM.

        (RFC 9113 5.1.2 lets a server refuse with REFUSED_STREAM; that is the retry-safe answer gRPC clients map
        to UNAVAILABLE. The streams within the limit must keep working.)
        """
        conn = self.connect(handshake=False)
        conn.auto_ack_settings = False
        conn.send_preface()
        conn.wait_for(lambda: conn.peer_settings_received, 10, "server SETTINGS")
        limit = self._max_streams(conn)
        extra = 5
        sids = self._open_streams(conn, limit + extra)
        excess = sids[limit:]
        conn.wait_for(lambda: all(conn.streams[s].reset_code is not None for s in excess) or conn.goaway,
                      10, "RST_STREAM on the excess streams")
        self.assertIsNone(conn.goaway, "connection error instead of refusing streams: %r" % conn.goaway)
        for s in excess:
            self.assertEqual(conn.streams[s].reset_code, h2raw.REFUSED_STREAM, conn.streams[s].describe())
        for s in sids[:limit]:
            self.assertIsNone(conn.streams[s].reset_code, conn.streams[s].describe())
        conn.send_frame(h2raw.SETTINGS, h2raw.FLAG_ACK, 0)
        self._finish_first_stream(conn, sids[0])

    def test_streams_over_acknowledged_max_concurrent(self):
        """The same after the SETTINGS ACK: excess streams refused (REFUSED_STREAM), or — what nghttp2 1.52 does on
        its own once the limit is acknowledged — the whole connection ended with GOAWAY PROTOCOL_ERROR whose
        last-stream-id still covers the streams within the limit (RFC 9113 5.4.1 lets an endpoint treat this stream
        error as a connection error)."""
        conn = self.connect()
        conn.wait_for(lambda: conn.settings_acked, 10, "SETTINGS ACK")
        limit = self._max_streams(conn)
        sids = self._open_streams(conn, limit + 5)
        excess = sids[limit:]
        try:
            conn.wait_for(lambda: all(conn.streams[s].reset_code is not None for s in excess) or conn.goaway,
                          10, "RST_STREAM on the excess streams or GOAWAY")
        except h2raw.ConnectionClosed:
            pass
        if conn.goaway is not None:
            print("\n    over acknowledged limit: %r" % conn.goaway, end=" ")
            self.assertEqual(conn.goaway.error_code, h2raw.PROTOCOL_ERROR, conn.goaway)
            self.assertGreaterEqual(conn.goaway.last_stream_id, sids[limit - 1], conn.goaway)
            return
        for s in excess:
            self.assertEqual(conn.streams[s].reset_code, h2raw.REFUSED_STREAM, conn.streams[s].describe())
        self._finish_first_stream(conn, sids[0])


if __name__ == "__main__":
    unittest.main()
