"""A real browser against the gateway: Debian's headless chromium, driven through WebDriver (python3-selenium and
chromium-driver), loads browser/app.html from a page server of this test (another origin than the gateway's, so
every call is a CORS request the gateway must allow). The page, in plain JavaScript, signs in, creates a habit, opens
a gRPC-Web WatchChanges stream, checks in and reads the week view through Connect JSON; the test then checks in from
another client (Python grpcio, native gRPC) and the page's stream must show it within a second.

Environment: as gateway_e2e_test (scripts/test sets it).
"""

import functools
import http.server
import os
import threading
import time
import unittest
import uuid

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from gateway_e2e_test import RPC_TIMEOUT, bearer, habits_service_pb2, start_stack

PAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def start_page_server():
    """Serves browser/ on a free loopback port from a thread: (server, its origin)."""
    handler = functools.partial(QuietHandler, directory=PAGE_DIR)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, "http://127.0.0.1:%d" % server.server_address[1]


def start_browser():
    options = webdriver.ChromeOptions()
    # --no-sandbox: chromium's sandbox refuses to run as root, which CI is.
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    options.binary_location = CHROMIUM
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


class Browser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.page_server, cls.page_origin = start_page_server()
        cls.addClassCleanup(cls.page_server.shutdown)
        start_stack(cls, extra_env={"HABITFLOW_CORS_ORIGINS": cls.page_origin})
        cls.browser = start_browser()
        cls.addClassCleanup(cls.browser.quit)

    def report(self):
        return self.browser.execute_script("return window.report")

    def wait_for(self, predicate, timeout, what):
        """Polls the page's report until `predicate(report)` holds; fails with the report after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            report = self.report()
            if report.get("error"):
                self.fail("the page failed %s: %s (steps %s)" % (what, report["error"], report["steps"]))
            if predicate(report):
                return report
            if time.monotonic() > deadline:
                self.fail("the page did not get %s within %s s: %s" % (what, timeout, report))
            time.sleep(0.02)

    def test_a_web_page_uses_connect_json_and_sees_changes_through_grpc_web(self):
        gateway_origin = "http://" + self.stack.address("gateway")
        suffix = uuid.uuid4().hex[:16]
        self.browser.get("%s/app.html?gateway=%s&suffix=%s" % (self.page_origin, gateway_origin, suffix))

        report = self.wait_for(lambda r: "week read" in r["steps"], 30, "through its calls")
        self.assertEqual(["signed in", "habit created", "watching", "stream live", "checked in", "week read"],
                         report["steps"])
        self.assertEqual("1/3", report["weekProgress"], "the week view shows the page's own check-in")
        report = self.wait_for(lambda r: report["ownEntryId"] in r["seen"], 2, "its own check-in on the stream")

        # Another client of the same account checks in over native gRPC: the page's stream must show it at once.
        entry_id = str(uuid.uuid4())
        self.browser.execute_script("window.expect.push(arguments[0])", entry_id)
        checked_in_at_ms = time.time() * 1000
        self.habits.MarkHabitDone(
            habits_service_pb2.MarkHabitDoneRequest(habit_id=report["habitId"], entry_id=entry_id),
            metadata=bearer(report["token"]), timeout=RPC_TIMEOUT)
        report = self.wait_for(lambda r: entry_id in r["seen"], 1, "the other client's check-in within a second")
        self.assertLess(report["seen"][entry_id] - checked_in_at_ms, 1000)
        self.assertIsNone(report["trailers"], "the stream stays open")


if __name__ == "__main__":
    unittest.main()
