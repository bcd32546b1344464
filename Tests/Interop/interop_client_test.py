"""grpc interop client cases (grpc/grpc doc/interop-test-descriptions.md) run with grpcio against interop-server.

Each test asserts what the description says the client must check. Where grpcio cannot see something the
description requires (the per-message compressed flag, per-message compression inside one stream), the test adds
a raw HTTP/2 exchange through h2raw.py that checks it on the wire.
"""

import gzip
import os
import queue
import shutil
import ssl
import subprocess
import tempfile
import time
import unittest

import grpc

import h2raw
from interop_common import RPC_TIMEOUT, InteropServer, assert_empty_call_works, load_stubs

STUBS = None
SERVER = None

LARGE_REQUEST_SIZE = 271828
LARGE_RESPONSE_SIZE = 314159
STREAM_REQUEST_SIZES = [27182, 8, 1828, 45904]
STREAM_RESPONSE_SIZES = [31415, 9, 2653, 58979]
TEST_STATUS_MESSAGE = "test status message"
SPECIAL_STATUS_MESSAGE = "\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP \U0001F608\t\n"
ECHO_INITIAL_KEY, ECHO_INITIAL_VALUE = "x-grpc-test-echo-initial", "test_initial_metadata_value"
ECHO_TRAILING_KEY, ECHO_TRAILING_VALUE = "x-grpc-test-echo-trailing-bin", b"\xab\xab\xab"
SERVICE = "/grpc.testing.TestService/"


def setUpModule():
    global STUBS, SERVER
    STUBS = load_stubs()
    SERVER = InteropServer().start()


def tearDownModule():
    if SERVER is not None:
        SERVER.stop()


def ensure_server():
    """Restart the shared server if an earlier test killed it, so that one crash fails one test, not all."""
    global SERVER
    if not SERVER.alive():
        SERVER = InteropServer().start()
    return SERVER


def payload(size):
    return STUBS.messages_pb2.Payload(body=b"\0" * size)


def bool_value(v):
    return STUBS.messages_pb2.BoolValue(value=v)


def large_request(**kw):
    return STUBS.messages_pb2.SimpleRequest(response_size=LARGE_RESPONSE_SIZE, payload=payload(LARGE_REQUEST_SIZE),
                                            **kw)


class RequestQueue:
    """A request iterator we feed by hand; close() half-closes the call."""

    _END = object()

    def __init__(self):
        self.q = queue.Queue()

    def __iter__(self):
        return self

    def __next__(self):
        item = self.q.get()
        if item is self._END:
            raise StopIteration
        return item

    def put(self, item):
        self.q.put(item)

    def close(self):
        self.q.put(self._END)


class InteropClientTest(unittest.TestCase):
    def setUp(self):
        self.server = ensure_server()
        self.channel = grpc.insecure_channel(self.server.address)
        self.addCleanup(self.channel.close)
        self.stub = STUBS.test_pb2_grpc.TestServiceStub(self.channel)
        self.m = STUBS.messages_pb2

    def assertRpcError(self, ctx, code, details=None):
        err = ctx.exception
        self.assertEqual(err.code(), code, "got %s: %r" % (err.code(), err.details()))
        if details is not None:
            self.assertEqual(err.details(), details)

    def assertZeroBody(self, p, size):
        self.assertEqual(len(p.body), size)
        self.assertEqual(p.body, b"\0" * size)

    def raw_call(self, method, messages, extra=(), timeout=30):
        """One call over h2raw; messages are already framed (5-byte prefix). Returns the h2raw.Stream."""
        conn = h2raw.H2Connection(self.server.host, self.server.port, timeout=timeout)
        self.addCleanup(conn.close)
        conn.handshake()
        return conn.grpc_call(SERVICE + method, b"".join(messages), timeout=timeout,
                              extra=[("grpc-accept-encoding", "identity,deflate,gzip")] + list(extra))

    def decode_messages(self, st, msg_type):
        """Decode the raw response messages (gunzip those with the compressed flag). Returns [(flag, msg)]."""
        out = []
        for flag, data in st.grpc_messages():
            if flag == 1:
                self.assertEqual(st.get("grpc-encoding"), "gzip", "compressed message without grpc-encoding gzip")
                data = gzip.decompress(data)
            out.append((flag, msg_type.FromString(data)))
        return out

    # --- empty_unary -------------------------------------------------------------------------------------------

    def test_empty_unary(self):
        resp, call = self.stub.EmptyCall.with_call(STUBS.empty_pb2.Empty(), timeout=RPC_TIMEOUT)
        self.assertEqual(call.code(), grpc.StatusCode.OK)
        self.assertIsNotNone(resp)
        self.assertIsInstance(resp, STUBS.empty_pb2.Empty)
        self.assertEqual(resp.ByteSize(), 0)

    # --- large_unary -------------------------------------------------------------------------------------------

    def test_large_unary(self):
        resp, call = self.stub.UnaryCall.with_call(large_request(), timeout=RPC_TIMEOUT)
        self.assertEqual(call.code(), grpc.StatusCode.OK)
        self.assertZeroBody(resp.payload, LARGE_RESPONSE_SIZE)

    # --- client_compressed_unary ---------------------------------------------------------------------------------

    def test_client_compressed_unary(self):
        # 1. Feature probe: expect_compressed=true on an *uncompressed* message must fail INVALID_ARGUMENT.
        with self.assertRaises(grpc.RpcError) as ctx:
            self.stub.UnaryCall(large_request(expect_compressed=bool_value(True)),
                                compression=grpc.Compression.NoCompression, timeout=RPC_TIMEOUT)
        self.assertRpcError(ctx, grpc.StatusCode.INVALID_ARGUMENT)
        # 2. The same request, compressed.
        resp = self.stub.UnaryCall(large_request(expect_compressed=bool_value(True)),
                                   compression=grpc.Compression.Gzip, timeout=RPC_TIMEOUT)
        self.assertZeroBody(resp.payload, LARGE_RESPONSE_SIZE)
        # 3. expect_compressed=false, uncompressed.
        resp = self.stub.UnaryCall(large_request(expect_compressed=bool_value(False)),
                                   compression=grpc.Compression.NoCompression, timeout=RPC_TIMEOUT)
        self.assertZeroBody(resp.payload, LARGE_RESPONSE_SIZE)

    # --- server_compressed_unary ---------------------------------------------------------------------------------

    def test_server_compressed_unary(self):
        for compressed in (True, False):
            with self.subTest(response_compressed=compressed):
                req = large_request(response_compressed=bool_value(compressed))
                resp, call = self.stub.UnaryCall.with_call(req, timeout=RPC_TIMEOUT)
                self.assertEqual(call.code(), grpc.StatusCode.OK)
                self.assertZeroBody(resp.payload, LARGE_RESPONSE_SIZE)
                # grpcio hides the message flags: check the compressed flag on the wire.
                st = self.raw_call("UnaryCall", [h2raw.grpc_frame(req.SerializeToString())])
                self.assertEqual(st.grpc_status, 0, st.describe())
                msgs = self.decode_messages(st, self.m.SimpleResponse)
                self.assertEqual(len(msgs), 1, st.describe())
                self.assertEqual(msgs[0][0], 1 if compressed else 0, "compressed flag")
                self.assertZeroBody(msgs[0][1].payload, LARGE_RESPONSE_SIZE)

    # --- client_streaming ----------------------------------------------------------------------------------------

    def test_client_streaming(self):
        reqs = [self.m.StreamingInputCallRequest(payload=payload(n)) for n in STREAM_REQUEST_SIZES]
        resp, call = self.stub.StreamingInputCall.with_call(iter(reqs), timeout=RPC_TIMEOUT)
        self.assertEqual(call.code(), grpc.StatusCode.OK)
        self.assertEqual(resp.aggregated_payload_size, 74922)

    # --- client_compressed_streaming -----------------------------------------------------------------------------

    def test_client_compressed_streaming(self):
        first = self.m.StreamingInputCallRequest(expect_compressed=bool_value(True), payload=payload(27182))
        second = self.m.StreamingInputCallRequest(expect_compressed=bool_value(False), payload=payload(45904))
        # 1. Probe: an uncompressed message with expect_compressed=true fails INVALID_ARGUMENT.
        with self.assertRaises(grpc.RpcError) as ctx:
            self.stub.StreamingInputCall(iter([first]), compression=grpc.Compression.NoCompression,
                                         timeout=RPC_TIMEOUT)
        self.assertRpcError(ctx, grpc.StatusCode.INVALID_ARGUMENT)
        # 2./3. One call: the first message compressed, the second not. grpcio cannot switch compression per
        # message, so this call goes over h2raw with grpc-encoding: gzip and explicit per-message flags.
        st = self.raw_call("StreamingInputCall",
                           [h2raw.grpc_gzip_frame(first.SerializeToString()),
                            h2raw.grpc_frame(second.SerializeToString())],
                           extra=[("grpc-encoding", "gzip")])
        self.assertEqual(st.grpc_status, 0, st.describe())
        msgs = self.decode_messages(st, self.m.StreamingInputCallResponse)
        self.assertEqual(len(msgs), 1, st.describe())
        self.assertEqual(msgs[0][1].aggregated_payload_size, 73086)

    def test_client_compressed_streaming_grpcio_gzip(self):
        # grpcio's own compressed streaming (every message gzip, all with expect_compressed=true).
        reqs = [self.m.StreamingInputCallRequest(expect_compressed=bool_value(True), payload=payload(n))
                for n in (27182, 45904)]
        resp = self.stub.StreamingInputCall(iter(reqs), compression=grpc.Compression.Gzip, timeout=RPC_TIMEOUT)
        self.assertEqual(resp.aggregated_payload_size, 73086)

    # --- server_streaming ----------------------------------------------------------------------------------------

    def test_server_streaming(self):
        req = self.m.StreamingOutputCallRequest(
            response_parameters=[self.m.ResponseParameters(size=n) for n in STREAM_RESPONSE_SIZES])
        call = self.stub.StreamingOutputCall(req, timeout=RPC_TIMEOUT)
        responses = list(call)
        self.assertEqual(call.code(), grpc.StatusCode.OK)
        self.assertEqual(len(responses), 4)
        for r, n in zip(responses, STREAM_RESPONSE_SIZES):
            self.assertZeroBody(r.payload, n)

    # --- server_compressed_streaming -----------------------------------------------------------------------------

    def test_server_compressed_streaming(self):
        req = self.m.StreamingOutputCallRequest(response_parameters=[
            self.m.ResponseParameters(compressed=bool_value(True), size=31415),
            self.m.ResponseParameters(compressed=bool_value(False), size=92653)])
        call = self.stub.StreamingOutputCall(req, timeout=RPC_TIMEOUT)
        responses = list(call)
        self.assertEqual(call.code(), grpc.StatusCode.OK)
        self.assertEqual([len(r.payload.body) for r in responses], [31415, 92653])
        for r in responses:
            self.assertZeroBody(r.payload, len(r.payload.body))
        # The per-message compressed flags, on the wire.
        st = self.raw_call("StreamingOutputCall", [h2raw.grpc_frame(req.SerializeToString())])
        self.assertEqual(st.grpc_status, 0, st.describe())
        msgs = self.decode_messages(st, self.m.StreamingOutputCallResponse)
        self.assertEqual([flag for flag, _ in msgs], [1, 0], "compressed flags of the two responses")
        self.assertEqual([len(r.payload.body) for _, r in msgs], [31415, 92653])

    # --- ping_pong -----------------------------------------------------------------------------------------------

    def test_ping_pong(self):
        requests = RequestQueue()
        self.addCleanup(requests.close)
        call = self.stub.FullDuplexCall(requests, timeout=RPC_TIMEOUT)
        for req_size, resp_size in zip(STREAM_REQUEST_SIZES, STREAM_RESPONSE_SIZES):
            requests.put(self.m.StreamingOutputCallRequest(
                response_parameters=[self.m.ResponseParameters(size=resp_size)], payload=payload(req_size)))
            resp = next(call)
            self.assertZeroBody(resp.payload, resp_size)
        requests.close()
        self.assertEqual(list(call), [], "no responses after the four pongs")
        self.assertEqual(call.code(), grpc.StatusCode.OK)

    # --- empty_stream --------------------------------------------------------------------------------------------

    def test_empty_stream(self):
        call = self.stub.FullDuplexCall(iter([]), timeout=RPC_TIMEOUT)
        self.assertEqual(list(call), [])
        self.assertEqual(call.code(), grpc.StatusCode.OK)

    # --- timeout_on_sleeping_server ------------------------------------------------------------------------------

    def test_timeout_on_sleeping_server(self):
        requests = RequestQueue()
        self.addCleanup(requests.close)
        requests.put(self.m.StreamingOutputCallRequest(payload=payload(27182)))
        call = self.stub.FullDuplexCall(requests, timeout=0.001)
        with self.assertRaises(grpc.RpcError) as ctx:
            list(call)
        self.assertRpcError(ctx, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertEqual(call.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        assert_empty_call_works(self, self.server, STUBS)

    # --- cancel_after_begin --------------------------------------------------------------------------------------

    def test_cancel_after_begin(self):
        requests = RequestQueue()  # never yields: nothing but the headers goes out
        self.addCleanup(requests.close)
        future = self.stub.StreamingInputCall.future(requests, timeout=RPC_TIMEOUT)
        time.sleep(0.05)  # let the call actually start on the wire
        future.cancel()
        self.assertTrue(future.cancelled())
        self.assertEqual(future.code(), grpc.StatusCode.CANCELLED)
        assert_empty_call_works(self, self.server, STUBS)

    # --- cancel_after_first_response -----------------------------------------------------------------------------

    def test_cancel_after_first_response(self):
        requests = RequestQueue()
        self.addCleanup(requests.close)
        call = self.stub.FullDuplexCall(requests, timeout=RPC_TIMEOUT)
        requests.put(self.m.StreamingOutputCallRequest(
            response_parameters=[self.m.ResponseParameters(size=31415)], payload=payload(27182)))
        first = next(call)
        self.assertZeroBody(first.payload, 31415)
        call.cancel()
        with self.assertRaises(grpc.RpcError) as ctx:
            next(call)
        self.assertRpcError(ctx, grpc.StatusCode.CANCELLED)
        self.assertEqual(call.code(), grpc.StatusCode.CANCELLED)
        assert_empty_call_works(self, self.server, STUBS)

    # --- status_code_and_message / special_status_message --------------------------------------------------------

    def _check_echo_status(self, message, duplex=True):
        status = self.m.EchoStatus(code=2, message=message)
        with self.assertRaises(grpc.RpcError) as ctx:
            self.stub.UnaryCall(self.m.SimpleRequest(response_status=status), timeout=RPC_TIMEOUT)
        self.assertRpcError(ctx, grpc.StatusCode.UNKNOWN, message)
        if duplex:
            call = self.stub.FullDuplexCall(iter([self.m.StreamingOutputCallRequest(response_status=status)]),
                                            timeout=RPC_TIMEOUT)
            with self.assertRaises(grpc.RpcError) as ctx:
                list(call)
            self.assertRpcError(ctx, grpc.StatusCode.UNKNOWN, message)

    def test_status_code_and_message(self):
        self._check_echo_status(TEST_STATUS_MESSAGE)

    def test_special_status_message(self):
        self._check_echo_status(SPECIAL_STATUS_MESSAGE, duplex=False)
        # On the wire the message must be percent-encoded (only 0x20-0x7E except '%' may appear raw).
        req = self.m.SimpleRequest(response_status=self.m.EchoStatus(code=2, message=SPECIAL_STATUS_MESSAGE))
        st = self.raw_call("UnaryCall", [h2raw.grpc_frame(req.SerializeToString())])
        self.assertEqual(st.grpc_status, 2, st.describe())
        raw = st.get("grpc-message")
        self.assertIsNotNone(raw, st.describe())
        self.assertTrue(all(0x20 <= ord(c) <= 0x7E for c in raw), "grpc-message not percent-encoded: %r" % raw)
        self.assertEqual(st.grpc_message, SPECIAL_STATUS_MESSAGE)

    # --- custom_metadata -----------------------------------------------------------------------------------------

    METADATA = ((ECHO_INITIAL_KEY, ECHO_INITIAL_VALUE), (ECHO_TRAILING_KEY, ECHO_TRAILING_VALUE))

    def _check_echoed_metadata(self, initial, trailing):
        initial, trailing = list(initial or ()), list(trailing or ())
        self.assertIn((ECHO_INITIAL_KEY, ECHO_INITIAL_VALUE), initial, "initial metadata: %r" % initial)
        self.assertIn((ECHO_TRAILING_KEY, ECHO_TRAILING_VALUE), trailing, "trailing metadata: %r" % trailing)
        self.assertNotIn(ECHO_TRAILING_KEY, [k for k, _ in initial], "trailing key echoed in initial metadata")

    def test_custom_metadata(self):
        with self.subTest(call="UnaryCall"):
            resp, call = self.stub.UnaryCall.with_call(large_request(), metadata=self.METADATA, timeout=RPC_TIMEOUT)
            self.assertEqual(call.code(), grpc.StatusCode.OK)
            self.assertZeroBody(resp.payload, LARGE_RESPONSE_SIZE)
            self._check_echoed_metadata(call.initial_metadata(), call.trailing_metadata())
        with self.subTest(call="FullDuplexCall"):
            req = self.m.StreamingOutputCallRequest(
                response_parameters=[self.m.ResponseParameters(size=LARGE_RESPONSE_SIZE)],
                payload=payload(LARGE_REQUEST_SIZE))
            call = self.stub.FullDuplexCall(iter([req]), metadata=self.METADATA, timeout=RPC_TIMEOUT)
            responses = list(call)
            self.assertEqual(call.code(), grpc.StatusCode.OK)
            self.assertEqual(len(responses), 1)
            self.assertZeroBody(responses[0].payload, LARGE_RESPONSE_SIZE)
            self._check_echoed_metadata(call.initial_metadata(), call.trailing_metadata())

    # --- unimplemented_method / unimplemented_service ------------------------------------------------------------

    def test_unimplemented_method(self):
        with self.assertRaises(grpc.RpcError) as ctx:
            self.stub.UnimplementedCall(STUBS.empty_pb2.Empty(), timeout=RPC_TIMEOUT)
        self.assertRpcError(ctx, grpc.StatusCode.UNIMPLEMENTED)

    def test_unimplemented_service(self):
        stub = STUBS.test_pb2_grpc.UnimplementedServiceStub(self.channel)
        with self.assertRaises(grpc.RpcError) as ctx:
            stub.UnimplementedCall(STUBS.empty_pb2.Empty(), timeout=RPC_TIMEOUT)
        self.assertRpcError(ctx, grpc.StatusCode.UNIMPLEMENTED)


def _openssl(*args, cwd):
    res = subprocess.run(["openssl"] + list(args), cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" % (" ".join(args), res.stderr))


def make_test_pki(directory):
    """A throwaway CA and a server certificate for localhost / 127.0.0.1, made with the openssl CLI."""
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=HabitFlow Interop Test CA",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             cwd=directory)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost", cwd=directory)
    with open(os.path.join(directory, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.pem", "-days", "2", "-extfile", "server.ext", cwd=directory)
    return {name: os.path.join(directory, name) for name in ("ca.pem", "server.pem", "server.key")}


class InteropTlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="habitflow-interop-tls-")
        cls.pki = make_test_pki(cls.tmp)
        cls.server = InteropServer(["--tls-cert", cls.pki["server.pem"], "--tls-key", cls.pki["server.key"]])
        try:
            cls.server.start()
        except Exception:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        with open(self.pki["ca.pem"], "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        self.channel = grpc.secure_channel("127.0.0.1:%d" % self.server.port, creds)
        self.addCleanup(self.channel.close)
        self.stub = STUBS.test_pb2_grpc.TestServiceStub(self.channel)

    def test_alpn_selects_h2(self):
        ctx = ssl.create_default_context(cafile=self.pki["ca.pem"])
        ctx.set_alpn_protocols(["h2"])
        conn = h2raw.H2Connection("127.0.0.1", self.server.port, ssl_context=ctx, server_hostname="localhost")
        self.addCleanup(conn.close)
        self.assertEqual(conn.sock.selected_alpn_protocol(), "h2")
        conn.handshake()
        st = conn.grpc_call(SERVICE + "EmptyCall", h2raw.grpc_frame(b""), timeout=10)
        self.assertEqual(st.grpc_status, 0, st.describe())

    def test_empty_unary_tls(self):
        resp, call = self.stub.EmptyCall.with_call(STUBS.empty_pb2.Empty(), timeout=RPC_TIMEOUT)
        self.assertEqual(call.code(), grpc.StatusCode.OK)
        self.assertIsInstance(resp, STUBS.empty_pb2.Empty)

    def test_large_unary_tls(self):
        resp = self.stub.UnaryCall(large_request(), timeout=RPC_TIMEOUT)
        self.assertEqual(len(resp.payload.body), LARGE_RESPONSE_SIZE)
        self.assertEqual(resp.payload.body, b"\0" * LARGE_RESPONSE_SIZE)


if __name__ == "__main__":
    unittest.main()
