"""The data export (GatewayService/ExportMyData) and the walkthrough (habitflow-demo), end to end from Python grpcio
through the gateway to all four services and the test Postgres. The archive is checked with Python's own zipfile
(`python3 -m zipfile -t`) and csv modules, and compared with what the public API returns.

Environment: as gateway_e2e_test (scripts/test sets it).
"""

import csv
import datetime
import io
import os
import subprocess
import sys
import tempfile
import time
import unittest
import zipfile

import grpc

from gateway_e2e_test import (RPC_TIMEOUT, auth_pb2, bearer, error_details_pb2, gateway_pb2,  # noqa: F401
                              goals_resources_pb2, goals_service_pb2, habits_service_pb2, register, resources_pb2,
                              social_resources_pb2, social_service_pb2, start_stack, status_details)
from google.protobuf import field_mask_pb2

EXPECTED_FILES = [
    "profile.csv", "sessions.csv", "linked_accounts.csv", "categories.csv", "habits.csv", "habit_targets.csv", "entries.csv", "goals.csv",
    "goal_links.csv", "goal_targets.csv", "assessments.csv", "tasks.csv", "reviews.csv", "review_ratings.csv",
    "friends.csv", "friend_requests.csv", "blocked_users.csv", "partner.csv", "sharing_settings.csv", "README.txt",
]
# Names that break naive CSV writers: quotes, commas, a semicolon, non-ASCII; goal text adds line breaks.
TRICKY_NAME = 'Read "Dune", slowly; 📚 naïve'
TRICKY_TEXT = 'Line one, with a comma\nline "two"\n  line three, indented'


def export(test_case, token):
    """The chunks of one ExportMyData call (raises grpc.RpcError on failure)."""
    call = test_case.channel.unary_stream(
        "/habitflow.gateway.v1.GatewayService/ExportMyData",
        request_serializer=gateway_pb2.ExportMyDataRequest.SerializeToString,
        response_deserializer=gateway_pb2.ExportMyDataChunk.FromString)
    return list(call(gateway_pb2.ExportMyDataRequest(), metadata=token, timeout=RPC_TIMEOUT))


def read_csv(archive, name):
    """The rows of one CSV file of the archive as dicts, parsed by Python's csv module (RFC 4180)."""
    with archive.open(name) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        return list(csv.DictReader(text))


def date_text(date):
    return "%04d-%02d-%02d" % (date.year, date.month, date.day)


class DataExport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        start_stack(cls)

    def test_the_export_holds_every_service_data_and_parses_back(self):
        account, ana = register(self)
        _, ben = register(self)
        token, ben_token = bearer(ana.tokens.access_token), bearer(ben.tokens.access_token)

        category = self.habits.CreateCategory(habits_service_pb2.CreateCategoryRequest(name="Mind, body"),
                                              metadata=token, timeout=RPC_TIMEOUT)
        habit = self.habits.CreateHabit(
            habits_service_pb2.CreateHabitRequest(name=TRICKY_NAME, category_id=category.id, weekly_target=4),
            metadata=token, timeout=RPC_TIMEOUT)
        other = self.habits.CreateHabit(habits_service_pb2.CreateHabitRequest(name="Stretch"), metadata=token,
                                        timeout=RPC_TIMEOUT)
        self.habits.DeleteHabit(habits_service_pb2.DeleteHabitRequest(habit_id=other.id), metadata=token,
                                timeout=RPC_TIMEOUT)
        self.habits.MarkHabitDone(habits_service_pb2.MarkHabitDoneRequest(habit_id=habit.id), metadata=token,
                                  timeout=RPC_TIMEOUT)
        goal = self.goals.CreateGoal(
            goals_service_pb2.CreateGoalRequest(
                title="Read, every week", description=TRICKY_TEXT, type=goals_resources_pb2.GOAL_TYPE_WEEKLY_HABIT,
                target=goals_resources_pb2.GoalTarget(value=4), horizon=goals_resources_pb2.HORIZON_TWELVE_WEEKS,
                habit_ids=[habit.id]),
            metadata=token, timeout=RPC_TIMEOUT)
        year, week, _ = datetime.date.today().isocalendar()
        task = self.goals.CreateTask(
            goals_service_pb2.CreateTaskRequest(title="Buy the book", goal_id=goal.id,
                                                week=goals_resources_pb2.IsoWeek(year=year, week=week)),
            metadata=token, timeout=RPC_TIMEOUT)
        review = self.goals.CreateReview(
            goals_service_pb2.CreateReviewRequest(
                type=goals_resources_pb2.REVIEW_TYPE_TWELVE_WEEK, note=TRICKY_TEXT,
                ratings=[goals_resources_pb2.CategoryRating(category_id=category.id, rating=7)]),
            metadata=token, timeout=RPC_TIMEOUT)
        request = self.social.SendFriendRequest(social_service_pb2.SendFriendRequestRequest(username=ben.user.username),
                                                metadata=token, timeout=RPC_TIMEOUT)
        self.social.AcceptRequest(social_service_pb2.AcceptRequestRequest(request_id=request.id), metadata=ben_token,
                                  timeout=RPC_TIMEOUT)
        partner_request = self.social.SendPartnerRequest(
            social_service_pb2.SendPartnerRequestRequest(user_id=ben.user.id), metadata=token, timeout=RPC_TIMEOUT)
        self.social.AcceptRequest(social_service_pb2.AcceptRequestRequest(request_id=partner_request.id),
                                  metadata=ben_token, timeout=RPC_TIMEOUT)
        self.social.UpdateSharingSettings(
            social_service_pb2.UpdateSharingSettingsRequest(
                settings=social_resources_pb2.SharingSettings(shared_category_ids=[category.id]),
                update_mask=field_mask_pb2.FieldMask(paths=["shared_category_ids"])),
            metadata=token, timeout=RPC_TIMEOUT)

        chunks = export(self, token)
        self.assertTrue(chunks)
        self.assertRegex(chunks[0].file_name, r"^habitflow-export-%s-\d{4}-\d{2}-\d{2}\.zip$" % ana.user.username)
        self.assertTrue(all(not chunk.file_name for chunk in chunks[1:]))
        self.assertTrue(all(len(chunk.data) <= 64 * 1024 for chunk in chunks))
        data = b"".join(chunk.data for chunk in chunks)

        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, chunks[0].file_name)
            with open(path, "wb") as f:
                f.write(data)
            tested = subprocess.run([sys.executable, "-m", "zipfile", "-t", path], capture_output=True, text=True)
            self.assertEqual(tested.returncode, 0, tested.stdout + tested.stderr)
            archive = zipfile.ZipFile(path)
            self.assertEqual(archive.namelist(), EXPECTED_FILES)

            profile = self.auth.GetProfile(auth_pb2.GetProfileRequest(), metadata=token, timeout=RPC_TIMEOUT)
            [row] = read_csv(archive, "profile.csv")
            self.assertEqual((row["user_id"], row["email"], row["username"], row["time_zone"]),
                             (profile.id, account.email, profile.username, profile.time_zone))

            sessions = self.auth.ListSessions(auth_pb2.ListSessionsRequest(), metadata=token, timeout=RPC_TIMEOUT)
            self.assertEqual(sorted(row["session_id"] for row in read_csv(archive, "sessions.csv")
                                    if row["state"] == "active"),
                             sorted(session.id for session in sessions.sessions))
            self.assertEqual(read_csv(archive, "linked_accounts.csv"), [])

            categories = {row["category_id"]: row for row in read_csv(archive, "categories.csv")}
            self.assertEqual(categories[category.id]["name"], "Mind, body")

            listed = self.habits.ListHabits(habits_service_pb2.ListHabitsRequest(show_deleted=True), metadata=token,
                                            timeout=RPC_TIMEOUT).habits
            habits = {row["habit_id"]: row for row in read_csv(archive, "habits.csv")}
            self.assertEqual({h.id: h.name for h in listed}, {i: row["name"] for i, row in habits.items()})
            self.assertEqual(habits[habit.id]["name"], TRICKY_NAME)
            self.assertEqual(habits[habit.id]["category_name"], "Mind, body")
            self.assertEqual((habits[other.id]["deleted"], habits[habit.id]["deleted"]), ("true", "false"))
            targets = [row for row in read_csv(archive, "habit_targets.csv") if row["habit_id"] == habit.id]
            self.assertEqual([row["weekly_target"] for row in targets], ["4"])
            self.assertRegex(targets[0]["from_week"], r"^\d{4}-W\d{2}$")

            today = datetime.datetime.now(datetime.timezone.utc).date()
            entries = self.habits.ListEntries(
                habits_service_pb2.ListEntriesRequest(
                    habit_id=habit.id,
                    start_date=resources_pb2.LocalDate(year=today.year - 1, month=1, day=1),
                    end_date=resources_pb2.LocalDate(year=today.year + 1, month=12, day=31)),
                metadata=token, timeout=RPC_TIMEOUT).entries
            self.assertEqual(len(entries), 1)
            exported = read_csv(archive, "entries.csv")
            self.assertEqual([(row["entry_id"], row["habit_name"], row["date"], row["value"]) for row in exported],
                             [(e.id, TRICKY_NAME, date_text(e.date), "1") for e in entries])
            self.assertRegex(exported[0]["create_time"], r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{6})?Z$")

            [goal_row] = read_csv(archive, "goals.csv")
            self.assertEqual((goal_row["goal_id"], goal_row["title"], goal_row["description"], goal_row["type"]),
                             (goal.id, "Read, every week", TRICKY_TEXT, "weekly_habit"))
            self.assertEqual(goal_row["shared"], "false")
            [link] = read_csv(archive, "goal_links.csv")
            self.assertEqual((link["goal_id"], link["habit_id"], link["habit_name"]), (goal.id, habit.id, TRICKY_NAME))
            [task_row] = read_csv(archive, "tasks.csv")
            self.assertEqual((task_row["task_id"], task_row["goal_title"]), (task.id, "Read, every week"))
            [review_row] = read_csv(archive, "reviews.csv")
            self.assertEqual((review_row["review_id"], review_row["note"], review_row["type"]),
                             (review.id, TRICKY_TEXT, "twelve_week"))
            [rating] = read_csv(archive, "review_ratings.csv")
            self.assertEqual((rating["category_name"], rating["rating"]), ("Mind, body", "7"))

            [friend] = read_csv(archive, "friends.csv")
            self.assertEqual((friend["user_id"], friend["username"], friend["partner"]),
                             (ben.user.id, ben.user.username, "true"))
            self.assertEqual(sorted((r["kind"], r["state"], r["direction"])
                                    for r in read_csv(archive, "friend_requests.csv")),
                             [("friend", "accepted", "outgoing"), ("partner", "accepted", "outgoing")])
            [partner] = read_csv(archive, "partner.csv")
            self.assertEqual(partner["partner_user_id"], ben.user.id)
            [settings] = read_csv(archive, "sharing_settings.csv")
            self.assertEqual((settings["shared_category_ids"], settings["shared_category_names"]),
                             (category.id, "Mind, body"))
            self.assertEqual(read_csv(archive, "blocked_users.csv"), [])

            # README.txt describes every file and every column of it.
            readme = archive.read("README.txt").decode("utf-8")
            for name in EXPECTED_FILES[:-1]:
                self.assertIn("\r\n%s\r\n" % name, readme)
                with archive.open(name) as raw:
                    header = next(csv.reader(io.TextIOWrapper(raw, encoding="utf-8", newline="")))
                for column in header:
                    self.assertRegex(readme, r"\r\n  %s +\S" % column, "%s: %s undocumented" % (name, column))

            # Ben's export has Ana as friend and partner, none of her habits.
            ben_data = b"".join(chunk.data for chunk in export(self, ben_token))
            ben_archive = zipfile.ZipFile(io.BytesIO(ben_data))
            self.assertEqual([row["user_id"] for row in read_csv(ben_archive, "friends.csv")], [ana.user.id])
            self.assertEqual(read_csv(ben_archive, "habits.csv"), [])
            self.assertNotIn(TRICKY_NAME.encode(), b"".join(ben_archive.read(n) for n in ben_archive.namelist()))

    def test_one_export_per_account_per_minute(self):
        _, registered = register(self)
        token = bearer(registered.tokens.access_token)
        export(self, token)
        with self.assertRaises(grpc.RpcError) as caught:
            export(self, token)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        retry = [detail for detail in status_details(caught.exception).details
                 if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR)]
        self.assertEqual(len(retry), 1)
        info = error_details_pb2.RetryInfo()
        retry[0].Unpack(info)
        self.assertGreater(info.retry_delay.seconds, 50)
        # Another account is not held back.
        _, other = register(self)
        self.assertTrue(export(self, bearer(other.tokens.access_token)))

    def test_the_export_needs_a_signed_in_user(self):
        with self.assertRaises(grpc.RpcError) as caught:
            export(self, ())
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED)

    def test_the_demo_walks_through_the_product(self):
        bin_dir = os.environ.get("HABITFLOW_E2E_BIN_DIR") or os.path.join(os.path.dirname(__file__), "..", "..",
                                                                           ".build", "debug")
        with tempfile.TemporaryDirectory() as folder:
            result = subprocess.run(
                [os.path.join(bin_dir, "habitflow-demo"), "--gateway", self.stack.address("gateway"), "--out", folder],
                capture_output=True, text=True, timeout=120)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            output = result.stdout
            [archive_name] = os.listdir(folder)
            self.assertEqual(zipfile.ZipFile(os.path.join(folder, archive_name)).testzip(), None)
        # Ben's display name reaches social through auth's UserCreated, which may still be on its way.
        self.assertRegex(output, r"ana's partner: (Ben|ben_\w+)\n")
        for expected in ["== Ana and Ben sign up", "goal Move 6 times a week, together: 2/6",
                         "#1 ", "entries.csv", "README.txt", "friends: 0", "partner: none",
                         "goal Move 6 times a week, together: 1/6, shared: false", "Done."]:
            self.assertIn(expected, output)


class ExportOutage(unittest.TestCase):
    """A stack of its own, whose social service is stopped mid-test."""

    @classmethod
    def setUpClass(cls):
        start_stack(cls)

    def test_a_service_down_fails_the_export_cleanly_and_nothing_is_sent(self):
        _, registered = register(self)
        token = bearer(registered.tokens.access_token)
        self.habits.CreateHabit(habits_service_pb2.CreateHabitRequest(name="Journal"), metadata=token,
                                timeout=RPC_TIMEOUT)
        self.assertEqual(self.stack.stop("social"), 0)
        call = self.channel.unary_stream(
            "/habitflow.gateway.v1.GatewayService/ExportMyData",
            request_serializer=gateway_pb2.ExportMyDataRequest.SerializeToString,
            response_deserializer=gateway_pb2.ExportMyDataChunk.FromString)
        received = []
        with self.assertRaises(grpc.RpcError) as caught:
            for chunk in call(gateway_pb2.ExportMyDataRequest(), metadata=token, timeout=RPC_TIMEOUT):
                received.append(chunk)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertIn("social service is unavailable", caught.exception.details())
        self.assertNotIn("127.0.0.1", caught.exception.details())
        self.assertEqual(received, [])

        # Back up: the export works at once (the failed one did not use up the account's export).
        self.stack.start(["social"], peers=["auth", "habits", "goals", "social", "gateway"])
        self.stack.wait_serving(["social"], timeout=60)
        # The gateway reconnects to social within its backoff (at most 5 s); a client retries until then.
        deadline = time.monotonic() + 10
        while True:
            try:
                data = b"".join(chunk.data for chunk in export(self, token))
                break
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        archive = zipfile.ZipFile(io.BytesIO(data))
        self.assertEqual([row["name"] for row in read_csv(archive, "habits.csv")], ["Journal"])


if __name__ == "__main__":
    unittest.main()
