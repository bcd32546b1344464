"""Measures a server's memory per idle HTTP/2 connection and prints it as one JSON object.

Opens COUNT plaintext connections that each send the HTTP/2 client preface and an empty SETTINGS frame and then stay
idle; reads the server's RSS (VmRSS of /proc/PID/status) before and after (once every connection has received the
server's first bytes, and after a short settle), and divides the difference by the connections still open.

Usage: idle_connections.py --pid PID --host HOST --port PORT [--count 1000] [--settle 1.0]
"""

import argparse
import json
import resource
import selectors
import socket
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = bytes([0, 0, 0, 0x4, 0, 0, 0, 0, 0])  # length 0, type SETTINGS, no flags, stream 0


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise KeyError("VmRSS")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--settle", type=float, default=1.0, help="seconds to wait before the second reading")
    parser.add_argument("--timeout", type=float, default=20.0)
    args = parser.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = args.count + 64
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))

    time.sleep(0.5)
    before = rss_kib(args.pid)

    sockets: list[socket.socket] = []
    selector = selectors.DefaultSelector()
    received = {}
    try:
        for _ in range(args.count):
            connection = socket.create_connection((args.host, args.port), timeout=args.timeout)
            connection.sendall(PREFACE + EMPTY_SETTINGS)
            connection.setblocking(False)
            sockets.append(connection)
            received[connection.fileno()] = 0
            selector.register(connection, selectors.EVENT_READ)
            # Drain as we go so the server's first writes never stall.
            for key, _ in selector.select(timeout=0):
                drain(key.fileobj, received, selector)

        # Wait until every connection has seen the server's SETTINGS (9 bytes at least): the server has set it up.
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline and any(0 <= count < 9 for count in received.values()):
            for key, _ in selector.select(timeout=0.1):
                drain(key.fileobj, received, selector)
        time.sleep(args.settle)
        for key, _ in selector.select(timeout=0):
            drain(key.fileobj, received, selector)
        after = rss_kib(args.pid)

        closed = sum(1 for count in received.values() if count < 0)
        set_up = sum(1 for count in received.values() if count >= 9)
        open_connections = args.count - closed
        result = {
            "connections": args.count,
            "set_up": set_up,
            "closed_by_server": closed,
            "rss_before_kib": before,
            "rss_after_kib": after,
            "bytes_per_connection": (after - before) * 1024 / open_connections if open_connections else None,
        }
        print(json.dumps(result))
    finally:
        for connection in sockets:
            connection.close()
    return 0


def drain(connection, received: dict, selector) -> None:
    """Reads what the server sent; marks the connection closed (-1) on EOF or error."""
    fileno = connection.fileno()
    try:
        data = connection.recv(65536)
    except BlockingIOError:
        return
    except OSError:
        data = b""
    if data:
        if received[fileno] >= 0:
            received[fileno] += len(data)
    else:
        received[fileno] = -1
        selector.unregister(connection)


if __name__ == "__main__":
    sys.exit(main())
