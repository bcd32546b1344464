"""interop-server run as an ordinary user, as a deployment (or a container without extra capabilities) runs it.

Regression: the server and client set TCP_NODELAY through `ChannelOptions.socketOption`, which is SOL_SOCKET level:
option 1 there is SO_DEBUG, which needs CAP_NET_ADMIN, so every connection failed for a user without it (found when
the compose stack ran its services as a non-root user). The tests run as root; this one runs the server as the
unprivileged `habitflow` user (or `nobody`) and checks that grpcio gets answers.
"""

import os
import pwd
import unittest

from interop_common import InteropServer, assert_empty_call_works, load_stubs


def unprivileged_user():
    for name in ("habitflow", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    return None


class UnprivilegedServer(unittest.TestCase):
    def test_an_unprivileged_server_accepts_and_answers_calls(self):
        user = unprivileged_user()
        if os.geteuid() != 0 or user is None:
            self.skipTest("needs root to run the server as another user")
        stubs = load_stubs()
        server = InteropServer(user=user).start()
        try:
            for _ in range(3):  # a new connection each time
                assert_empty_call_works(self, server, stubs)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()
