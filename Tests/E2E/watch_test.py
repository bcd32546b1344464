"""GatewayService/WatchChanges end to end from Python grpcio, across a gateway restart: a watcher that resumes with
the cursor of the last message it received gets exactly what changed while it was disconnected, once, then goes on
live.

Environment: as gateway_e2e_test (scripts/test sets it).
"""

import queue
import threading
import time
import unittest
import uuid

import grpc

from gateway_e2e_test import (RPC_TIMEOUT, bearer, field_violations, gateway_pb2, habits_service_pb2, register,
                              start_stack)

STACK = ["auth", "habits", "goals", "social", "gateway"]


class Watcher:
    """A WatchChanges call read on a thread, so the test can wait for the next message with a timeout."""

    def __init__(self, channel, token, cursor=""):
        method = channel.unary_stream(
            "/habitflow.gateway.v1.GatewayService/WatchChanges",
            request_serializer=gateway_pb2.WatchChangesRequest.SerializeToString,
            response_deserializer=gateway_pb2.WatchChangesResponse.FromString)
        self.call = method(gateway_pb2.WatchChangesRequest(cursor=cursor), metadata=token)
        self.messages = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for message in self.call:
                self.messages.put(message)
            self.messages.put(None)
        except grpc.RpcError as error:
            self.messages.put(error)

    def next(self, timeout):
        """The next message; raises the call's grpc.RpcError when it ended with one, queue.Empty on timeout."""
        item = self.messages.get(timeout=timeout)
        if isinstance(item, grpc.RpcError):
            raise item
        if item is None:
            raise AssertionError("WatchChanges ended OK; it should run until cancelled")
        return item

    def caught_up(self, timeout=15):
        """The catch-up's `changes` messages and the cursor of the caught_up heartbeat that ends it."""
        deadline = time.monotonic() + timeout
        changes = []
        while True:
            message = self.next(max(deadline - time.monotonic(), 0.01))
            if message.WhichOneof("event") == "heartbeat" and message.heartbeat.caught_up:
                return changes, message.cursor
            if message.WhichOneof("event") == "changes":
                changes.append(message)

    def next_changes(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            message = self.next(max(deadline - time.monotonic(), 0.01))
            if message.WhichOneof("event") == "changes":
                return message

    def cancel(self):
        self.call.cancel()


def entry_ids(messages):
    """The ids of the habit entries (check-ins) the `changes` messages carry, in order."""
    ids = []
    for message in messages:
        if message.changes.source != gateway_pb2.CHANGE_SOURCE_HABITS:
            continue
        page = habits_service_pb2.ListChangesResponse()
        if not message.changes.list_changes.Unpack(page):
            raise AssertionError("not a habitflow.habits.v1.ListChangesResponse: %s" % message.changes.list_changes.type_url)
        ids += [change.entry.id for change in page.changes if change.WhichOneof("resource") == "entry"]
    return ids


class WatchAcrossGatewayRestart(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        start_stack(cls, extra_env={"HABITFLOW_GATEWAY_WATCH_HEARTBEAT_MS": "500"})

    def check_in(self, token, habit_id):
        entry_id = str(uuid.uuid4())
        self.habits.MarkHabitDone(
            habits_service_pb2.MarkHabitDoneRequest(habit_id=habit_id, entry_id=entry_id), metadata=token,
            timeout=RPC_TIMEOUT)
        return entry_id

    def test_a_watcher_resumes_from_its_cursor_and_misses_nothing(self):
        if self.stack is None:
            self.skipTest("restarts the gateway: needs a stack of its own")
        _, registered = register(self)
        token = bearer(registered.tokens.access_token)
        habit = self.habits.CreateHabit(
            habits_service_pb2.CreateHabitRequest(name="Read"), metadata=token, timeout=RPC_TIMEOUT)

        watcher = Watcher(self.channel, token)
        watcher.caught_up()
        seen = self.check_in(token, habit.id)
        last = watcher.next_changes(timeout=5)
        self.assertEqual(entry_ids([last]), [seen])
        cursor = last.cursor

        # A graceful stop ends the stream at once with UNAVAILABLE (reconnect with the last cursor).
        stopped = time.monotonic()
        self.stack.stop("gateway")
        with self.assertRaises(grpc.RpcError) as ended:
            while True:
                watcher.next(timeout=10)
        self.assertEqual(ended.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertLess(time.monotonic() - stopped, 8)

        self.stack.start(["gateway"], peers=STACK)
        self.stack.wait_serving(["gateway"], timeout=60)
        # Made while the watcher is disconnected.
        missed = [self.check_in(token, habit.id), self.check_in(token, habit.id)]

        resumed = Watcher(self.channel, token, cursor=cursor)
        catch_up, _ = resumed.caught_up()
        self.assertEqual(entry_ids(catch_up), missed)
        live = self.check_in(token, habit.id)
        self.assertEqual(entry_ids([resumed.next_changes(timeout=5)]), [live])
        # Nothing more: no change is sent twice (heartbeats only).
        time.sleep(1.2)
        later = []
        while not resumed.messages.empty():
            message = resumed.next(timeout=1)
            if message.WhichOneof("event") == "changes":
                later.append(message)
        self.assertEqual(entry_ids(later), [])
        resumed.cancel()

    def test_a_cursor_it_did_not_give_is_invalid_argument(self):
        _, registered = register(self)
        watcher = Watcher(self.channel, bearer(registered.tokens.access_token), cursor="not-a-cursor")
        with self.assertRaises(grpc.RpcError) as failed:
            watcher.next(timeout=10)
        self.assertEqual(failed.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(field_violations(failed.exception), ["cursor"])


if __name__ == "__main__":
    unittest.main()
