"""A tiny, deliberately simple HTTP/2 client for sending malformed gRPC traffic.

Standard library only. It implements just enough of RFC 9113 (HTTP/2) and RFC 7541 (HPACK) to open streams,
send arbitrary (also invalid) frames and read back everything the peer sends:

* HPACK encoding uses only "literal header field without indexing, new name" with raw (non-Huffman) strings, so
  the encoder never touches the peer's view of our dynamic table.
* HPACK decoding is complete (static and dynamic table, size updates, Huffman), since the peer may use any of it.
* Connection- and stream-level receive windows are replenished automatically; the peer's send windows are honoured.
* SETTINGS and PING from the peer are acknowledged automatically (both can be switched off for tests).

It is tested on its own against nghttpd (see h2raw_selftest.py) and used by bad_input_test.py.
"""

import base64
import gzip
import select
import socket
import struct
import time
import urllib.parse

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
FRAME_NAMES = {
    DATA: "DATA", HEADERS: "HEADERS", PRIORITY: "PRIORITY", RST_STREAM: "RST_STREAM", SETTINGS: "SETTINGS",
    PUSH_PROMISE: "PUSH_PROMISE", PING: "PING", GOAWAY: "GOAWAY", WINDOW_UPDATE: "WINDOW_UPDATE",
    CONTINUATION: "CONTINUATION",
}

# Flags
FLAG_END_STREAM = 0x1
FLAG_ACK = 0x1
FLAG_END_HEADERS = 0x4
FLAG_PADDED = 0x8
FLAG_PRIORITY = 0x20

# Error codes
NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2
FLOW_CONTROL_ERROR = 0x3
SETTINGS_TIMEOUT = 0x4
STREAM_CLOSED = 0x5
FRAME_SIZE_ERROR = 0x6
REFUSED_STREAM = 0x7
CANCEL = 0x8
COMPRESSION_ERROR = 0x9
CONNECT_ERROR = 0xA
ENHANCE_YOUR_CALM = 0xB
INADEQUATE_SECURITY = 0xC
HTTP_1_1_REQUIRED = 0xD
ERROR_NAMES = {
    0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR", 3: "FLOW_CONTROL_ERROR", 4: "SETTINGS_TIMEOUT",
    5: "STREAM_CLOSED", 6: "FRAME_SIZE_ERROR", 7: "REFUSED_STREAM", 8: "CANCEL", 9: "COMPRESSION_ERROR",
    10: "CONNECT_ERROR", 11: "ENHANCE_YOUR_CALM", 12: "INADEQUATE_SECURITY", 13: "HTTP_1_1_REQUIRED",
}

# Settings identifiers
SETTINGS_HEADER_TABLE_SIZE = 0x1
SETTINGS_ENABLE_PUSH = 0x2
SETTINGS_MAX_CONCURRENT_STREAMS = 0x3
SETTINGS_INITIAL_WINDOW_SIZE = 0x4
SETTINGS_MAX_FRAME_SIZE = 0x5
SETTINGS_MAX_HEADER_LIST_SIZE = 0x6
SETTINGS_NO_RFC7540_PRIORITIES = 0x9

DEFAULT_WINDOW = 65535
MAX_WINDOW = 2**31 - 1

# gRPC status codes (grpc/grpc doc/statuscodes.md)
GRPC_OK, GRPC_CANCELLED, GRPC_UNKNOWN, GRPC_INVALID_ARGUMENT, GRPC_DEADLINE_EXCEEDED = 0, 1, 2, 3, 4
GRPC_NOT_FOUND, GRPC_RESOURCE_EXHAUSTED, GRPC_UNIMPLEMENTED, GRPC_INTERNAL, GRPC_UNAVAILABLE = 5, 8, 12, 13, 14
GRPC_UNAUTHENTICATED, GRPC_PERMISSION_DENIED = 16, 7


class H2Error(Exception):
    pass


class ConnectionClosed(H2Error):
    pass


# --------------------------------------------------------------------------------------------------------------
# HPACK (RFC 7541)
# --------------------------------------------------------------------------------------------------------------

STATIC_TABLE = [
    (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"), (":path", "/index.html"),
    (":scheme", "http"), (":scheme", "https"), (":status", "200"), (":status", "204"), (":status", "206"),
    (":status", "304"), (":status", "400"), (":status", "404"), (":status", "500"), ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""), ("accept", ""),
    ("access-control-allow-origin", ""), ("age", ""), ("allow", ""), ("authorization", ""),
    ("cache-control", ""), ("content-disposition", ""), ("content-encoding", ""), ("content-language", ""),
    ("content-length", ""), ("content-location", ""), ("content-range", ""), ("content-type", ""),
    ("cookie", ""), ("date", ""), ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""),
    ("if-match", ""), ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""),
    ("if-unmodified-since", ""), ("last-modified", ""), ("link", ""), ("location", ""), ("max-forwards", ""),
    ("proxy-authenticate", ""), ("proxy-authorization", ""), ("range", ""), ("referer", ""), ("refresh", ""),
    ("retry-after", ""), ("server", ""), ("set-cookie", ""), ("strict-transport-security", ""),
    ("transfer-encoding", ""), ("user-agent", ""), ("vary", ""), ("via", ""), ("www-authenticate", ""),
]
assert len(STATIC_TABLE) == 61

# Code lengths of the HPACK Huffman code (RFC 7541 Appendix B) for symbols 0..255 and EOS (256). The code is
# canonical: codes are assigned in order of (length, symbol), which reproduces the table of the RFC.
_HUFFMAN_LENGTHS = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28,
    28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7,
    8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19,
    13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13,
    28, 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21,
    22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23,
    22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25,
    25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
]
assert len(_HUFFMAN_LENGTHS) == 257


def _build_huffman():
    codes = [0] * 257
    code, prev_len = 0, None
    for sym in sorted(range(257), key=lambda s: (_HUFFMAN_LENGTHS[s], s)):
        n = _HUFFMAN_LENGTHS[sym]
        if prev_len is not None:
            code = (code + 1) << (n - prev_len)
        codes[sym] = code
        prev_len = n
    return codes


HUFFMAN_CODES = _build_huffman()
_HUFFMAN_DECODE = {(_HUFFMAN_LENGTHS[s], HUFFMAN_CODES[s]): s for s in range(257)}
# Spot checks against RFC 7541 Appendix B.
assert HUFFMAN_CODES[ord("0")] == 0b00000 and HUFFMAN_CODES[ord("a")] == 0b00011
assert HUFFMAN_CODES[256] == 0x3FFFFFFF and HUFFMAN_CODES[0] == 0x1FF8


def huffman_encode(data: bytes) -> bytes:
    acc, nbits, out = 0, 0, bytearray()
    for b in data:
        acc = (acc << _HUFFMAN_LENGTHS[b]) | HUFFMAN_CODES[b]
        nbits += _HUFFMAN_LENGTHS[b]
        while nbits >= 8:
            nbits -= 8
            out.append((acc >> nbits) & 0xFF)
        acc &= (1 << nbits) - 1
    if nbits:
        out.append(((acc << (8 - nbits)) | ((1 << (8 - nbits)) - 1)) & 0xFF)  # pad with EOS prefix (1s)
    return bytes(out)


def huffman_decode(data: bytes) -> bytes:
    out = bytearray()
    code, n = 0, 0
    for byte in data:
        for i in range(7, -1, -1):
            code = (code << 1) | ((byte >> i) & 1)
            n += 1
            sym = _HUFFMAN_DECODE.get((n, code))
            if sym is not None:
                if sym == 256:
                    raise H2Error("HPACK: EOS symbol inside a Huffman string")
                out.append(sym)
                code, n = 0, 0
            elif n > 30:
                raise H2Error("HPACK: invalid Huffman code")
    if n > 7 or code != (1 << n) - 1:
        raise H2Error("HPACK: invalid Huffman padding")
    return bytes(out)


def encode_int(value: int, prefix_bits: int, first_byte_flags: int = 0) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte_flags | value])
    out = bytearray([first_byte_flags | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_int(data: bytes, pos: int, prefix_bits: int):
    limit = (1 << prefix_bits) - 1
    value = data[pos] & limit
    pos += 1
    if value < limit:
        return value, pos
    shift = 0
    while True:
        if pos >= len(data):
            raise H2Error("HPACK: truncated integer")
        b = data[pos]
        pos += 1
        value += (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos
        if shift > 35:
            raise H2Error("HPACK: integer too large")


def _to_bytes(s) -> bytes:
    if isinstance(s, bytes):
        return s
    return s.encode("utf-8")


def encode_string(s, huffman: bool = False) -> bytes:
    raw = _to_bytes(s)
    if huffman:
        h = huffman_encode(raw)
        return encode_int(len(h), 7, 0x80) + h
    return encode_int(len(raw), 7) + raw


class HpackEncoder:
    """Emits every field as 'literal header field without indexing — new name' (RFC 7541 6.2.2)."""

    def __init__(self, huffman: bool = False):
        self.huffman = huffman

    def encode(self, headers) -> bytes:
        out = bytearray()
        for name, value in headers:
            out += b"\x00" + encode_string(name, self.huffman) + encode_string(value, self.huffman)
        return bytes(out)


class HpackDecoder:
    def __init__(self, max_table_size: int = 4096):
        self.dynamic = []  # newest first
        self.size = 0
        self.max_size = max_table_size
        self.protocol_max_size = max_table_size

    def _evict(self):
        while self.size > self.max_size and self.dynamic:
            n, v = self.dynamic.pop()
            self.size -= len(n) + len(v) + 32

    def _add(self, name: bytes, value: bytes):
        self.dynamic.insert(0, (name, value))
        self.size += len(name) + len(value) + 32
        self._evict()

    def _lookup(self, index: int):
        if index == 0:
            raise H2Error("HPACK: index 0")
        if index <= len(STATIC_TABLE):
            n, v = STATIC_TABLE[index - 1]
            return n.encode(), v.encode()
        i = index - len(STATIC_TABLE) - 1
        if i >= len(self.dynamic):
            raise H2Error("HPACK: index %d out of range" % index)
        return self.dynamic[i]

    def _string(self, data: bytes, pos: int):
        huff = data[pos] & 0x80
        length, pos = decode_int(data, pos, 7)
        if pos + length > len(data):
            raise H2Error("HPACK: truncated string")
        raw = data[pos:pos + length]
        return (huffman_decode(raw) if huff else bytes(raw)), pos + length

    def decode_bytes(self, data: bytes):
        """Decode a header block into a list of (name bytes, value bytes)."""
        headers, pos = [], 0
        while pos < len(data):
            b = data[pos]
            if b & 0x80:  # indexed field
                idx, pos = decode_int(data, pos, 7)
                headers.append(self._lookup(idx))
            elif b & 0xC0 == 0x40:  # literal with incremental indexing
                idx, pos = decode_int(data, pos, 6)
                name = self._lookup(idx)[0] if idx else None
                if name is None:
                    name, pos = self._string(data, pos)
                value, pos = self._string(data, pos)
                self._add(name, value)
                headers.append((name, value))
            elif b & 0xE0 == 0x20:  # dynamic table size update
                size, pos = decode_int(data, pos, 5)
                if size > self.protocol_max_size:
                    raise H2Error("HPACK: table size update above the limit")
                self.max_size = size
                self._evict()
            else:  # literal without indexing (0000) or never indexed (0001)
                idx, pos = decode_int(data, pos, 4)
                name = self._lookup(idx)[0] if idx else None
                if name is None:
                    name, pos = self._string(data, pos)
                value, pos = self._string(data, pos)
                headers.append((name, value))
        return headers

    def decode(self, data: bytes):
        """Decode into (str, str) pairs; bytes are mapped 1:1 through latin-1 so nothing is lost."""
        return [(n.decode("latin-1"), v.decode("latin-1")) for n, v in self.decode_bytes(data)]


# --------------------------------------------------------------------------------------------------------------
# Frames
# --------------------------------------------------------------------------------------------------------------


def encode_frame(ftype: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    n = len(payload)
    return struct.pack(">BHBBI", (n >> 16) & 0xFF, n & 0xFFFF, ftype, flags, stream_id & 0x7FFFFFFF) + payload


def settings_payload(settings: dict) -> bytes:
    return b"".join(struct.pack(">HI", k, v) for k, v in settings.items())


class Frame:
    def __init__(self, ftype, flags, stream_id, payload):
        self.type, self.flags, self.stream_id, self.payload = ftype, flags, stream_id, payload
        self.headers = None  # decoded header list for HEADERS (after CONTINUATION assembly)

    @property
    def error_code(self):
        if self.type == RST_STREAM:
            return struct.unpack(">I", self.payload[:4])[0]
        if self.type == GOAWAY:
            return struct.unpack(">I", self.payload[4:8])[0]
        return None

    @property
    def last_stream_id(self):
        return struct.unpack(">I", self.payload[:4])[0] & 0x7FFFFFFF if self.type == GOAWAY else None

    @property
    def debug_data(self):
        return self.payload[8:] if self.type == GOAWAY else None

    def settings(self):
        return {k: v for k, v in (struct.unpack(">HI", self.payload[i:i + 6])
                                  for i in range(0, len(self.payload) - len(self.payload) % 6, 6))}

    def __repr__(self):
        extra = ""
        if self.type in (RST_STREAM, GOAWAY):
            extra = " " + ERROR_NAMES.get(self.error_code, str(self.error_code))
        if self.type == GOAWAY:
            extra += " last=%d debug=%r" % (self.last_stream_id, self.debug_data)
        if self.headers is not None:
            extra = " %r" % (self.headers,)
        if self.type == DATA:
            extra = " len=%d" % len(self.payload)
        return "<%s flags=0x%x stream=%d%s>" % (FRAME_NAMES.get(self.type, self.type), self.flags,
                                                 self.stream_id, extra)


class Stream:
    def __init__(self, stream_id):
        self.id = stream_id
        self.header_blocks = []  # list of header lists, in order received
        self.data = bytearray()
        self.ended = False  # END_STREAM received
        self.reset_code = None  # RST_STREAM received from the peer

    @property
    def closed(self):
        return self.ended or self.reset_code is not None

    @property
    def headers(self):
        return self.header_blocks[0] if self.header_blocks else []

    @property
    def trailers(self):
        return self.header_blocks[1] if len(self.header_blocks) > 1 else []

    def all_fields(self):
        return [f for block in self.header_blocks for f in block]

    def get(self, name, default=None):
        """First value of a field in any header block (initial headers, then trailers)."""
        for n, v in self.all_fields():
            if n == name:
                return v
        return default

    @property
    def status(self):
        s = self.get(":status")
        return int(s) if s is not None else None

    @property
    def grpc_status(self):
        """The grpc-status field (trailers, or the single HEADERS of a Trailers-Only response), else None."""
        for block in reversed(self.header_blocks):
            for n, v in block:
                if n == "grpc-status":
                    return int(v)
        return None

    @property
    def effective_grpc_status(self):
        """What a gRPC client would report: grpc-status, else the HTTP status mapped per http-grpc-status-mapping."""
        gs = self.grpc_status
        if gs is not None:
            return gs
        http = self.status
        if http is None:
            return None
        return {400: GRPC_INTERNAL, 431: GRPC_INTERNAL, 401: GRPC_UNAUTHENTICATED, 403: GRPC_PERMISSION_DENIED,
                404: GRPC_UNIMPLEMENTED, 429: GRPC_UNAVAILABLE, 502: GRPC_UNAVAILABLE, 503: GRPC_UNAVAILABLE,
                504: GRPC_UNAVAILABLE}.get(http, GRPC_UNKNOWN)

    @property
    def grpc_message(self):
        for block in reversed(self.header_blocks):
            for n, v in block:
                if n == "grpc-message":
                    return urllib.parse.unquote_to_bytes(v).decode("utf-8", "replace")
        return None

    def grpc_messages(self):
        """Split the received body into gRPC length-prefixed messages: list of (compressed_flag, payload)."""
        return parse_grpc_messages(bytes(self.data))

    def describe(self):
        return "stream %d: blocks=%r data=%d bytes ended=%s reset=%s" % (
            self.id, self.header_blocks, len(self.data), self.ended,
            None if self.reset_code is None else ERROR_NAMES.get(self.reset_code, self.reset_code))


def grpc_frame(message: bytes, compressed: bool = False) -> bytes:
    return struct.pack(">BI", 1 if compressed else 0, len(message)) + message


def grpc_gzip_frame(message: bytes) -> bytes:
    return grpc_frame(gzip.compress(message), compressed=True)


def parse_grpc_messages(body: bytes):
    out, pos = [], 0
    while pos < len(body):
        if pos + 5 > len(body):
            raise H2Error("truncated gRPC message prefix")
        flag, n = struct.unpack(">BI", body[pos:pos + 5])
        if pos + 5 + n > len(body):
            raise H2Error("truncated gRPC message")
        out.append((flag, body[pos + 5:pos + 5 + n]))
        pos += 5 + n
    return out


def b64_unpadded(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


# --------------------------------------------------------------------------------------------------------------
# Connection
# --------------------------------------------------------------------------------------------------------------


class H2Connection:
    """One client connection. Not thread-safe; everything happens on the caller's thread."""

    def __init__(self, host, port, timeout=10.0, ssl_context=None, server_hostname=None):
        self.host, self.port = host, port
        self.authority = "%s:%d" % (host, port)
        raw = socket.create_connection((host, port), timeout=timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            raw = ssl_context.wrap_socket(raw, server_hostname=server_hostname or host)
        self.sock = raw
        self.timeout = timeout
        self.buf = bytearray()
        self.encoder = HpackEncoder()
        self.decoder = HpackDecoder()
        self.streams = {}
        self.frames = []  # every frame received, in order (HEADERS carry decoded .headers)
        self.goaway = None  # the last GOAWAY frame received
        self.closed = False  # EOF or reset seen
        self.peer_settings = {}
        self.peer_settings_received = False
        self.settings_acked = False
        self.ping_acks = []
        self.next_stream_id = 1
        self.auto_ack_settings = True
        self.auto_ack_ping = True
        self.auto_window_update = True
        self.peer_max_frame_size = 16384
        self.peer_initial_window = DEFAULT_WINDOW
        self.send_window = DEFAULT_WINDOW  # connection-level window we may send into
        self.stream_send_windows = {}
        self._hdr_accum = None  # (frame, bytearray) while waiting for CONTINUATION

    # ---------- sending ----------

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def send_frame(self, ftype, flags, stream_id, payload=b""):
        self.send_raw(encode_frame(ftype, flags, stream_id, payload))

    def send_preface(self, settings=None, connection_window=MAX_WINDOW):
        """Connection preface + our SETTINGS (big initial window) + a connection WINDOW_UPDATE."""
        if settings is None:
            settings = {SETTINGS_ENABLE_PUSH: 0, SETTINGS_INITIAL_WINDOW_SIZE: MAX_WINDOW}
        out = PREFACE + encode_frame(SETTINGS, 0, 0, settings_payload(settings))
        if connection_window > DEFAULT_WINDOW:
            out += encode_frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", connection_window - DEFAULT_WINDOW))
        self.send_raw(out)

    def handshake(self, settings=None, timeout=None):
        """Send the preface and wait until the peer's SETTINGS arrived (and were acknowledged by us)."""
        self.send_preface(settings)
        self.wait_for(lambda: self.peer_settings_received, timeout, "server SETTINGS")
        return self.peer_settings

    def new_stream_id(self):
        sid = self.next_stream_id
        self.next_stream_id += 2
        return sid

    def send_headers(self, stream_id, headers, end_stream=False, end_headers=True, max_chunk=None):
        block = self.encoder.encode(headers)
        self.streams.setdefault(stream_id, Stream(stream_id))
        self.stream_send_windows.setdefault(stream_id, self.peer_initial_window)
        chunk = max_chunk or self.peer_max_frame_size
        first, rest = block[:chunk], block[chunk:]
        flags = (FLAG_END_STREAM if end_stream else 0)
        if not rest and end_headers:
            flags |= FLAG_END_HEADERS
        out = encode_frame(HEADERS, flags, stream_id, first)
        while rest:
            piece, rest = rest[:chunk], rest[chunk:]
            out += encode_frame(CONTINUATION, FLAG_END_HEADERS if (not rest and end_headers) else 0, stream_id, piece)
        self.send_raw(out)

    def send_data(self, stream_id, data: bytes, end_stream=False, respect_flow_control=True):
        data = bytes(data)
        if not data:
            self.send_frame(DATA, FLAG_END_STREAM if end_stream else 0, stream_id, b"")
            return
        while data:
            n = min(len(data), self.peer_max_frame_size)
            if respect_flow_control:
                self.wait_for(lambda: min(self.send_window, self.stream_send_windows.get(
                    stream_id, self.peer_initial_window)) > 0, None, "flow-control window")
                n = min(n, self.send_window, self.stream_send_windows.get(stream_id, self.peer_initial_window))
            piece, data = data[:n], data[n:]
            self.send_window -= n
            self.stream_send_windows[stream_id] = self.stream_send_windows.get(
                stream_id, self.peer_initial_window) - n
            self.send_frame(DATA, FLAG_END_STREAM if (end_stream and not data) else 0, stream_id, piece)

    def send_rst(self, stream_id, code=CANCEL):
        self.send_frame(RST_STREAM, 0, stream_id, struct.pack(">I", code))

    def send_ping(self, opaque=b"\0" * 8, ack=False):
        self.send_frame(PING, FLAG_ACK if ack else 0, 0, opaque)

    def send_settings(self, settings: dict):
        self.send_frame(SETTINGS, 0, 0, settings_payload(settings))

    def send_goaway(self, code=NO_ERROR, last_stream_id=0, debug=b""):
        self.send_frame(GOAWAY, 0, 0, struct.pack(">II", last_stream_id, code) + debug)

    def send_window_update(self, stream_id, increment):
        self.send_frame(WINDOW_UPDATE, 0, stream_id, struct.pack(">I", increment))

    # ---------- receiving ----------

    def _fill(self, deadline):
        """Read more bytes into the buffer. Returns False on timeout; raises ConnectionClosed on EOF/reset."""
        if self.closed:
            raise ConnectionClosed("connection already closed")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        pending = getattr(self.sock, "pending", lambda: 0)()
        if not pending:
            r, _, _ = select.select([self.sock], [], [], remaining)
            if not r:
                return False
        try:
            chunk = self.sock.recv(1 << 16)
        except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError) as e:
            self.closed = True
            raise ConnectionClosed("connection reset: %s" % e)
        except socket.timeout:
            return False
        if not chunk:
            self.closed = True
            raise ConnectionClosed("EOF")
        self.buf += chunk
        return True

    def read_frame(self, timeout=None):
        """Return the next frame (after internal processing), or None on timeout. Raises ConnectionClosed."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            if len(self.buf) >= 9:
                length = int.from_bytes(self.buf[0:3], "big")
                if len(self.buf) >= 9 + length:
                    ftype, flags, sid = self.buf[3], self.buf[4], struct.unpack(">I", self.buf[5:9])[0] & 0x7FFFFFFF
                    payload = bytes(self.buf[9:9 + length])
                    del self.buf[:9 + length]
                    frame = Frame(ftype, flags, sid, payload)
                    self._process(frame)
                    self.frames.append(frame)
                    return frame
            if not self._fill(deadline):
                return None

    @staticmethod
    def _strip_padding(frame, payload):
        if frame.flags & FLAG_PADDED:
            pad = payload[0]
            payload = payload[1:len(payload) - pad] if pad else payload[1:]
        return payload

    def _process(self, f):
        if f.type == SETTINGS:
            if f.flags & FLAG_ACK:
                self.settings_acked = True
                return
            s = f.settings()
            self.peer_settings.update(s)
            if SETTINGS_MAX_FRAME_SIZE in s:
                self.peer_max_frame_size = s[SETTINGS_MAX_FRAME_SIZE]
            if SETTINGS_INITIAL_WINDOW_SIZE in s:
                delta = s[SETTINGS_INITIAL_WINDOW_SIZE] - self.peer_initial_window
                self.peer_initial_window = s[SETTINGS_INITIAL_WINDOW_SIZE]
                for k in self.stream_send_windows:
                    self.stream_send_windows[k] += delta
            self.peer_settings_received = True
            if self.auto_ack_settings:
                self._safe_send(encode_frame(SETTINGS, FLAG_ACK, 0))
        elif f.type == PING:
            if f.flags & FLAG_ACK:
                self.ping_acks.append(f.payload)
            elif self.auto_ack_ping:
                self._safe_send(encode_frame(PING, FLAG_ACK, 0, f.payload))
        elif f.type == GOAWAY:
            self.goaway = f
        elif f.type == WINDOW_UPDATE:
            inc = struct.unpack(">I", f.payload[:4])[0] & 0x7FFFFFFF
            if f.stream_id == 0:
                self.send_window += inc
            else:
                self.stream_send_windows[f.stream_id] = self.stream_send_windows.get(
                    f.stream_id, self.peer_initial_window) + inc
        elif f.type == RST_STREAM:
            self.streams.setdefault(f.stream_id, Stream(f.stream_id)).reset_code = f.error_code
        elif f.type == DATA:
            st = self.streams.setdefault(f.stream_id, Stream(f.stream_id))
            st.data += self._strip_padding(f, f.payload)
            if f.flags & FLAG_END_STREAM:
                st.ended = True
            if self.auto_window_update and f.payload:
                # Replenish both windows by the full flow-controlled length (padding included).
                upd = encode_frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", len(f.payload)))
                if not f.flags & FLAG_END_STREAM:
                    upd += encode_frame(WINDOW_UPDATE, 0, f.stream_id, struct.pack(">I", len(f.payload)))
                self._safe_send(upd)
        elif f.type in (HEADERS, PUSH_PROMISE):
            payload = self._strip_padding(f, f.payload)
            if f.type == HEADERS and f.flags & FLAG_PRIORITY:
                payload = payload[5:]
            if f.type == PUSH_PROMISE:
                payload = payload[4:]
            if f.flags & FLAG_END_HEADERS:
                self._finish_headers(f, payload)
            else:
                self._hdr_accum = (f, bytearray(payload))
        elif f.type == CONTINUATION:
            if self._hdr_accum is None:
                raise H2Error("unexpected CONTINUATION")
            first, acc = self._hdr_accum
            acc += f.payload
            if f.flags & FLAG_END_HEADERS:
                self._hdr_accum = None
                self._finish_headers(first, bytes(acc))
                f.headers = first.headers

    def _finish_headers(self, f, block):
        f.headers = self.decoder.decode(block)
        if f.type == HEADERS:
            st = self.streams.setdefault(f.stream_id, Stream(f.stream_id))
            st.header_blocks.append(f.headers)
            if f.flags & FLAG_END_STREAM:
                st.ended = True

    def _safe_send(self, data):
        try:
            self.send_raw(data)
        except OSError:
            pass  # the peer may already have closed; reading will report it

    # ---------- waiting ----------

    def wait_for(self, predicate, timeout=None, what="condition"):
        """Read frames until predicate() is true. Raises H2Error on timeout, ConnectionClosed on EOF."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.read_frame(remaining) is None:
                if predicate():
                    return
                raise H2Error("timed out waiting for %s; frames so far: %r" % (what, self.frames[-20:]))

    def wait_stream(self, stream_id, timeout=None):
        """Wait until the stream ended or was reset; return the Stream."""
        self.wait_for(lambda: self.streams.get(stream_id) is not None and self.streams[stream_id].closed,
                      timeout, "end of stream %d" % stream_id)
        return self.streams[stream_id]

    def read_until_closed(self, timeout=None):
        """Read and process frames until the peer closes the connection. Returns True if closed in time."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        try:
            while time.monotonic() < deadline:
                self.read_frame(max(0.0, deadline - time.monotonic()))
        except ConnectionClosed:
            return True
        except H2Error:
            # A garbled reply to garbage input still counts as the server talking; keep waiting for EOF.
            return self._drain_raw_until_eof(deadline)
        return False

    def _drain_raw_until_eof(self, deadline):
        try:
            while time.monotonic() < deadline:
                self.buf.clear()
                if not self._fill(deadline):
                    return False
        except ConnectionClosed:
            return True
        return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---------- gRPC conveniences ----------

    def grpc_headers(self, path, content_type="application/grpc", te="trailers", extra=(), omit=()):
        fields = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", self.authority),
                  ("content-type", content_type), ("te", te), ("user-agent", "habitflow-h2raw/1")]
        fields = [(n, v) for n, v in fields if n not in omit and v is not None]
        return fields + list(extra)

    def grpc_call(self, path, body: bytes, timeout=None, **header_kwargs):
        """Open a stream, send headers, the body (raw bytes: include the 5-byte prefixes) and END_STREAM."""
        sid = self.new_stream_id()
        self.send_headers(sid, self.grpc_headers(path, **header_kwargs))
        self.send_data(sid, body, end_stream=True)
        return self.wait_stream(sid, timeout)


def http_get(conn: H2Connection, path: str, extra=(), timeout=None):
    """Plain HTTP/2 GET (used by the self-test against nghttpd)."""
    sid = conn.new_stream_id()
    conn.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":path", path),
                            (":authority", conn.authority)] + list(extra), end_stream=True)
    return conn.wait_stream(sid, timeout)
