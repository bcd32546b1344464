"""Self-test of h2raw.py: HPACK vectors from RFC 7541 Appendix C, and real traffic against nghttpd.

Run: /usr/bin/python3 -m unittest -v h2raw_selftest   (needs `nghttpd`, Debian package nghttp2-server; the
nghttpd part is skipped when it is missing). Not part of run.sh's default set, which drives interop-server.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import h2raw


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HpackTest(unittest.TestCase):
    def test_integer_encoding_rfc7541_c1(self):
        self.assertEqual(h2raw.encode_int(10, 5), bytes([0b01010]))
        self.assertEqual(h2raw.encode_int(1337, 5), bytes([0b11111, 0b10011010, 0b00001010]))
        self.assertEqual(h2raw.encode_int(42, 8), bytes([42]))
        self.assertEqual(h2raw.decode_int(bytes([0b11111, 0b10011010, 0b00001010]), 0, 5), (1337, 3))

    def test_huffman_rfc7541_c4_vectors(self):
        self.assertEqual(h2raw.huffman_encode(b"www.example.com"), bytes.fromhex("f1e3c2e5f23a6ba0ab90f4ff"))
        self.assertEqual(h2raw.huffman_encode(b"no-cache"), bytes.fromhex("a8eb10649cbf"))
        self.assertEqual(h2raw.huffman_decode(bytes.fromhex("25a849e95ba97d7f")), b"custom-key")
        self.assertEqual(h2raw.huffman_decode(bytes.fromhex("25a849e95bb8e8b4bf")), b"custom-value")
        for sample in (bytes(range(256)), b"", b"a", "\t\ntest ☺ 😈".encode()):
            self.assertEqual(h2raw.huffman_decode(h2raw.huffman_encode(sample)), sample)

    def test_decoder_rfc7541_c4_requests_with_huffman(self):
        d = h2raw.HpackDecoder()
        self.assertEqual(d.decode(bytes.fromhex("828684418cf1e3c2e5f23a6ba0ab90f4ff")),
                         [(":method", "GET"), (":scheme", "http"), (":path", "/"),
                          (":authority", "www.example.com")])
        self.assertEqual(d.size, 57)
        self.assertEqual(d.decode(bytes.fromhex("828684be5886a8eb10649cbf")),
                         [(":method", "GET"), (":scheme", "http"), (":path", "/"),
                          (":authority", "www.example.com"), ("cache-control", "no-cache")])
        self.assertEqual(d.size, 110)
        self.assertEqual(d.decode(bytes.fromhex("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf")),
                         [(":method", "GET"), (":scheme", "https"), (":path", "/index.html"),
                          (":authority", "www.example.com"), ("custom-key", "custom-value")])
        self.assertEqual(d.size, 164)

    def test_decoder_eviction_rfc7541_c5(self):
        d = h2raw.HpackDecoder(256)
        d.decode(bytes.fromhex(
            "4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d54"
            "6e1768747470733a2f2f7777772e6578616d706c652e636f6d"))
        self.assertEqual(d.size, 222)
        d.decode(bytes.fromhex("4803333037c1c0bf"))
        self.assertEqual(d.size, 222)
        self.assertEqual(d.dynamic[0], (b":status", b"307"))
        self.assertEqual(len(d.dynamic), 4)

    def test_encoder_roundtrip(self):
        headers = [("content-type", "application/grpc"), ("x-bin", "q6ur"), ("grpc-message", "a%20b")]
        for huff in (False, True):
            self.assertEqual(h2raw.HpackDecoder().decode(h2raw.HpackEncoder(huff).encode(headers)), headers)


@unittest.skipUnless(shutil.which("nghttpd"), "nghttpd (Debian nghttp2-server) not installed")
class AgainstNghttpdTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="h2raw-selftest-")
        with open(os.path.join(cls.tmp, "hello.txt"), "wb") as f:
            f.write(b"hello from nghttpd\n")
        with open(os.path.join(cls.tmp, "big.bin"), "wb") as f:
            f.write(bytes(range(256)) * 4096)  # 1 MiB: exercises flow control (WINDOW_UPDATE) and many DATA frames
        cls.port = free_port()
        cls.proc = subprocess.Popen(
            ["nghttpd", "--no-tls", "-d", cls.tmp, "-m", "4", "--echo-upload", "--trailer", "x-trailer: yes",
             "-b", "7", str(cls.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", cls.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @classmethod
    def tearDownClass(cls):
        cls.proc.kill()
        cls.proc.wait()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def connect(self):
        c = h2raw.H2Connection("127.0.0.1", self.port, timeout=10)
        self.addCleanup(c.close)
        return c

    def test_settings_exchange(self):
        c = self.connect()
        settings = c.handshake()
        self.assertEqual(settings.get(h2raw.SETTINGS_MAX_CONCURRENT_STREAMS), 4)
        c.wait_for(lambda: c.settings_acked, 5, "SETTINGS ACK")

    def test_get_small_and_large_files_with_padding_and_dynamic_table(self):
        c = self.connect()
        c.handshake()
        for _ in range(3):  # repeated responses make nghttpd reuse its dynamic table entries
            st = h2raw.http_get(c, "/hello.txt")
            self.assertEqual(st.status, 200, st.describe())
            self.assertEqual(bytes(st.data), b"hello from nghttpd\n")
            self.assertEqual(st.get("content-length"), "19")
            self.assertTrue(st.get("server", "").startswith("nghttpd"), st.describe())
            self.assertEqual(st.get("x-trailer"), "yes")  # trailers: a second HEADERS block
        st = h2raw.http_get(c, "/big.bin", timeout=20)
        self.assertEqual(bytes(st.data), bytes(range(256)) * 4096)
        st = h2raw.http_get(c, "/missing")
        self.assertEqual(st.status, 404)

    def test_post_upload_with_flow_control_and_continuation(self):
        c = self.connect()
        c.handshake()
        body = os.urandom(200_000)  # above the default 64 KiB window: we must wait for WINDOW_UPDATE
        sid = c.new_stream_id()
        c.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", "/hello.txt"),
                             (":authority", c.authority), ("x-filler", "x" * 3000)], max_chunk=1000)
        c.send_data(sid, body, end_stream=True)
        st = c.wait_stream(sid, 20)
        self.assertEqual(st.status, 200, st.describe())
        self.assertEqual(bytes(st.data), body)

    def test_ping_ack(self):
        c = self.connect()
        c.handshake()
        c.send_ping(b"12345678")
        c.wait_for(lambda: b"12345678" in c.ping_acks, 5, "PING ACK")

    def test_rst_stream_and_refused_when_over_max_concurrent_streams(self):
        c = self.connect()
        c.handshake()
        c.wait_for(lambda: c.settings_acked, 5, "SETTINGS ACK")
        sids = []
        for _ in range(4):  # open 4 streams that stay open (no END_STREAM)
            sid = c.new_stream_id()
            c.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", "/hello.txt"),
                                 (":authority", c.authority)])
            sids.append(sid)
        extra = c.new_stream_id()
        c.send_headers(extra, [(":method", "GET"), (":scheme", "http"), (":path", "/hello.txt"),
                               (":authority", c.authority)], end_stream=True)
        # nghttp2 treats exceeding an *acknowledged* limit as a connection error (GOAWAY PROTOCOL_ERROR);
        # we only record what happened here: the point is that the frames are read and decoded.
        try:
            c.wait_for(lambda: c.goaway is not None or (extra in c.streams and c.streams[extra].closed), 5,
                       "refusal")
        except h2raw.ConnectionClosed:
            pass
        outcome = c.goaway or c.streams.get(extra)
        self.assertIsNotNone(outcome)
        print("\n  nghttpd over max concurrent streams -> %r" % (outcome if c.goaway else outcome.describe()))

    def test_garbage_preface_gets_goaway_or_close(self):
        c = self.connect()
        c.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\0" * 64)
        self.assertTrue(c.read_until_closed(10))


if __name__ == "__main__":
    unittest.main()
