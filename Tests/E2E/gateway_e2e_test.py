"""End to end through the gateway, from a client we did not write: Python grpcio with message classes generated from
Schemas/ at test time, against the real executables (habitflow-auth, habitflow-habits, habitflow-goals,
habitflow-social, habitflow-gateway) and the test Postgres that scripts/test starts.

Environment (set by scripts/test): HABITFLOW_E2E_BIN_DIR (the built executables), HABITFLOW_TEST_<SERVICE>_DATABASE_URL,
HABITFLOW_SQL_DIR.

With HABITFLOW_E2E_GATEWAY=HOST:PORT the tests start nothing and call the gateway of a stack that runs already
(scripts/compose-check: the compose stack's published port). Only the tests that need no more than the gateway apply
then: not the ones that read the database or stop services (ServiceOutage, account deletion).
"""

import atexit
import base64
import datetime
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import types
import unittest
import uuid

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PROTO_ROOT = os.path.join(REPO_ROOT, "Schemas", "proto")
sys.path.insert(0, os.path.join(REPO_ROOT, "scripts", "lib"))

import habitflow_stack  # noqa: E402

PROTOS = [
    "habitflow/auth/v1/auth.proto",
    "habitflow/auth/v1/auth_internal.proto",
    "habitflow/habits/v1/resources.proto",
    "habitflow/habits/v1/habits_service.proto",
    "habitflow/habits/v1/habits_internal.proto",
    "habitflow/goals/v1/resources.proto",
    "habitflow/goals/v1/goals_service.proto",
    "habitflow/goals/v1/goals_internal.proto",
    "habitflow/social/v1/resources.proto",
    "habitflow/social/v1/social_service.proto",
    "habitflow/social/v1/social_internal.proto",
    "habitflow/gateway/v1/gateway.proto",
    "habitflow/events/v1/event.proto",
    "habitflow/events/v1/domain_events.proto",
    "habitflow/events/v1/subscriber.proto",
    "habitflow/events/v1/change_notices.proto",
    "grpc/health/v1/health.proto",
    "grpc/reflection/v1/reflection.proto",
    "google/rpc/status.proto",
    "google/rpc/error_details.proto",
]
RPC_TIMEOUT = 30.0
# The key sealing auth's signing keys: the same as the Swift auth tests', which share the signing keys table.
KEY_ENCRYPTION_KEY = base64.b64encode(bytes([7] * 32)).decode()


def generate_messages():
    """Message classes from the system protoc (Debian's grpc_tools bundles protoc 3.5, which predates proto3
    `optional`); calls go through grpcio's generic multi-callables (see `service_stub`)."""
    out = tempfile.mkdtemp(prefix="habitflow-e2e-stubs-")
    atexit.register(shutil.rmtree, out, True)
    command = ["protoc", "-I", PROTO_ROOT, "-I", "/usr/include", "--python_out=" + out] + PROTOS
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError("protoc failed: %s" % result.stderr)
    sys.path.insert(0, out)
    # `grpc` and `google` are packages already (grpcio, protobuf): their generated parts join them.
    grpc.__path__.append(os.path.join(out, "grpc"))
    import google
    google.__path__.append(os.path.join(out, "google"))


generate_messages()

from google.protobuf import field_mask_pb2, symbol_database  # noqa: E402
from google.rpc import error_details_pb2, status_pb2  # noqa: E402
from grpc.health.v1 import health_pb2  # noqa: E402
from grpc.reflection.v1 import reflection_pb2  # noqa: E402
from habitflow.auth.v1 import auth_internal_pb2, auth_pb2  # noqa: E402
from habitflow.gateway.v1 import gateway_pb2  # noqa: E402
from habitflow.goals.v1 import goals_internal_pb2, goals_service_pb2  # noqa: E402
from habitflow.goals.v1 import resources_pb2 as goals_resources_pb2  # noqa: E402
from habitflow.habits.v1 import habits_internal_pb2, habits_service_pb2, resources_pb2  # noqa: E402
from habitflow.social.v1 import resources_pb2 as social_resources_pb2  # noqa: E402
from habitflow.social.v1 import social_service_pb2  # noqa: E402


def service_stub(channel, module, service):
    """A stub with one unary multi-callable per method of `service`, declared in the generated `module` (every
    HabitFlow RPC the tests call is unary)."""
    descriptor = module.DESCRIPTOR.services_by_name[service]
    symbols = symbol_database.Default()
    stub = types.SimpleNamespace()
    for method in descriptor.methods:
        request = symbols.GetSymbol(method.input_type.full_name)
        response = symbols.GetSymbol(method.output_type.full_name)
        setattr(stub, method.name, channel.unary_unary(
            "/%s/%s" % (descriptor.full_name, method.name), request_serializer=request.SerializeToString,
            response_deserializer=response.FromString))
    return stub


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_stack(test_case, extra_env=None, log_level="warning", gateway_tls=None):
    """auth, habits, goals, social and the gateway on free ports against the test Postgres; stopped when the class is
    done.

    extra_env: more variables for every process (they win). log_level: HABITFLOW_LOG_LEVEL. gateway_tls: (certificate
    path, key path) to serve the gateway over TLS (the channel then trusts that certificate). Sets `test_case.stack`,
    `test_case.log_dir` (each process's output, `<service>.log`, removed with the stack) and
    `test_case.internal_secret`, and a stub per public service on `test_case.channel`.

    With HABITFLOW_E2E_GATEWAY set, nothing is started: only a channel to that gateway (`test_case.stack` is None).
    """
    gateway = os.environ.get("HABITFLOW_E2E_GATEWAY")
    if gateway:
        test_case.stack = None
        connect(test_case, grpc.insecure_channel(gateway))
        return
    bin_dir = os.environ.get("HABITFLOW_E2E_BIN_DIR") or os.path.join(REPO_ROOT, ".build", "debug")
    env = dict(os.environ)
    for name in ("auth", "habits", "goals", "social"):
        url = os.environ.get("HABITFLOW_TEST_%s_DATABASE_URL" % name.upper())
        if not url:
            raise unittest.SkipTest("HABITFLOW_TEST_%s_DATABASE_URL is not set: run through scripts/test" % name.upper())
        env["HABITFLOW_%s_DATABASE_URL" % name.upper()] = url
    env["HABITFLOW_INTERNAL_SECRET"] = base64.b64encode(os.urandom(24)).decode()
    env["HABITFLOW_AUTH_KEY_ENCRYPTION_KEY"] = KEY_ENCRYPTION_KEY
    env["HABITFLOW_LOG_LEVEL"] = log_level
    env.setdefault("HABITFLOW_SQL_DIR", os.path.join(REPO_ROOT, "Schemas", "sql"))
    roots = None
    if gateway_tls:
        env["HABITFLOW_GATEWAY_TLS_CERT"], env["HABITFLOW_GATEWAY_TLS_KEY"] = gateway_tls
        with open(gateway_tls[0], "rb") as f:
            roots = f.read()
    env.update(extra_env or {})
    names = ["auth", "habits", "goals", "social", "gateway"]
    # A port found free can be taken before the service binds it (another test's outgoing connection gets it as its
    # ephemeral port): then the whole stack starts again on other ports, a few times.
    for _ in range(3):
        stack, log_dir = _start_stack_once(test_case, bin_dir, env, names, roots)
        if stack is not None:
            break
    else:
        raise RuntimeError("the stack's ports were taken three times in a row")
    test_case.stack = stack
    test_case.log_dir = log_dir
    test_case.internal_secret = env["HABITFLOW_INTERNAL_SECRET"]
    if roots is not None:
        connect(test_case, grpc.secure_channel(
            stack.address("gateway"), grpc.ssl_channel_credentials(root_certificates=roots)))
    else:
        connect(test_case, grpc.insecure_channel(stack.address("gateway")))


def _start_stack_once(test_case, bin_dir, env, names, roots):
    """Starts the stack on fresh free ports: (stack, log folder), or (None, None) when a port was taken meanwhile."""
    ports = set()
    while len(ports) < 2 * len(names):
        ports.add(free_port())
    ports = sorted(ports)
    log_dir = tempfile.mkdtemp(prefix="habitflow-e2e-logs-")
    stack = habitflow_stack.Stack(
        bin_dir, base_env=env, ports=dict(zip(names, ports[:len(names)])),
        metrics_ports=dict(zip(names, ports[len(names):])), absent_address="127.0.0.1:1", log_dir=log_dir,
        gateway_root_certificates=roots)
    missing = [name for name in names if name not in stack.available()]
    if missing:
        raise RuntimeError("executables missing in %s: %s" % (bin_dir, ", ".join(missing)))

    def cleanup():
        stack.stop_all()
        keep = os.environ.get("HABITFLOW_E2E_KEEP_LOGS")  # a folder to copy the logs to, for a look after the run
        if keep:
            name = getattr(test_case, "__name__", "stack")
            shutil.copytree(log_dir, os.path.join(keep, "%s-%s" % (name, os.path.basename(log_dir))))
        shutil.rmtree(log_dir, ignore_errors=True)

    try:
        stack.start_serving(names, timeout=60)
    except RuntimeError:
        logs = {}
        for name in names:
            path = os.path.join(log_dir, name + ".log")
            if os.path.exists(path):
                with open(path) as f:
                    logs[name] = f.read()
        cleanup()
        if any("Address already in use" in log for log in logs.values()):
            return None, None
        for name, log in logs.items():
            sys.stderr.write("--- %s.log\n%s\n" % (name, log[-4000:]))
        raise
    test_case.addClassCleanup(cleanup)
    return stack, log_dir

def connect(test_case, channel):
    """`channel` to the gateway and a stub per public service on `test_case`, closed when the class is done."""
    test_case.channel = channel
    test_case.addClassCleanup(test_case.channel.close)
    test_case.auth = service_stub(test_case.channel, auth_pb2, "AuthService")
    test_case.habits = service_stub(test_case.channel, habits_service_pb2, "HabitsService")
    test_case.goals = service_stub(test_case.channel, goals_service_pb2, "GoalsService")
    test_case.social = service_stub(test_case.channel, social_service_pb2, "SocialService")
    test_case.gateway = service_stub(test_case.channel, gateway_pb2, "GatewayService")


def register(test_case, time_zone="UTC"):
    """A fresh account (unique email and username: the database is shared) and its tokens."""
    suffix = uuid.uuid4().hex[:16]
    request = auth_pb2.RegisterRequest(
        email="e2e-%s@example.com" % suffix, username="e2e_%s" % suffix, password="correct horse %s" % suffix,
        time_zone=time_zone)
    response = test_case.auth.Register(request, timeout=RPC_TIMEOUT)
    return request, response


def service_rows(service, sql, user):
    """One value from a service's schema, read with psql as that service's role; `:'user'` in `sql` is the user id and
    `:'schema'` the schema's name, quoted by psql as literals."""
    psql = shutil.which("psql") or "/usr/lib/postgresql/15/bin/psql"
    result = subprocess.run(
        [psql, "--no-psqlrc", "--tuples-only", "--no-align", "--set=ON_ERROR_STOP=1", "--set=user=" + user,
         "--set=schema=" + service,
         os.environ["HABITFLOW_TEST_%s_DATABASE_URL" % service.upper()]],
        input=sql, capture_output=True, text=True, timeout=RPC_TIMEOUT)
    if result.returncode != 0:
        raise RuntimeError("psql failed: %s" % result.stderr)
    return result.stdout.strip()


def rows_naming(service, user):
    """The tables and uuid columns of a service's schema (but deleted_users) that hold the user id, as
    "table.column=count" joined by commas; empty when none does. Read as the service's own role."""
    sql = """
        SELECT coalesce(string_agg(found, ',' ORDER BY found), '') FROM (
            SELECT format('%s.%s=%s', c.table_name, c.column_name, n.count) AS found
            FROM information_schema.columns AS c
            JOIN information_schema.tables AS t USING (table_schema, table_name)
            CROSS JOIN LATERAL (
                SELECT (xpath('/row/count/text()', query_to_xml(format('SELECT count(*) FROM %I.%I WHERE %I = %L',
                        c.table_schema, c.table_name, c.column_name, :'user'), false, true, '')))[1]::text::int
            ) AS n(count)
            WHERE c.table_schema = :'schema' AND c.data_type = 'uuid' AND t.table_type = 'BASE TABLE'
              AND c.table_name <> 'deleted_users' AND n.count > 0) AS holders
    """
    return service_rows(service, sql, user)


# What a client may never read in a status message: addresses, ports, errno, Swift or C type names, Swift case or
# member names (camelCase), SQL.
INTERNAL_DETAIL = re.compile(
    r"\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:]*:[0-9a-fA-F:]*\]|localhost|:\d{2,5}\b|errno|Habitflow_|NIO|"
    r"\b[A-Z][A-Za-z]+(?:Error|Failure|Exception)\b|\b[A-Z][A-Za-z]+\(\w+:|Swift\.|\b[a-z]+(?:[A-Z][a-z]+)+\b|"
    r"ECONNREFUSED|nghttp2|libpq|SQLSTATE")


def bearer(token):
    return (("authorization", "Bearer " + token),)


def status_details(error):
    """The google.rpc.Status of a failed call (from grpc-status-details-bin), or None."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status()
            status.ParseFromString(value)
            return status
    return None


def field_violations(error):
    """The fields named by the BadRequest details of a failed call, in order."""
    status = status_details(error)
    fields = []
    for detail in status.details if status else ():
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            fields += [violation.field for violation in bad_request.field_violations]
    return fields


def error_reason(error):
    status = status_details(error)
    for detail in status.details if status else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info.reason
    return None


class GatewayEndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        start_stack(cls)

    def test_register_log_in_habits_week_and_dashboard(self):
        account, registered = register(self, time_zone="America/New_York")
        self.assertTrue(registered.tokens.access_token)
        login = self.auth.Login(auth_pb2.LoginRequest(email=account.email, password=account.password),
                                timeout=RPC_TIMEOUT)
        self.assertEqual(login.user.id, registered.user.id)
        token = bearer(login.tokens.access_token)

        read = self.habits.CreateHabit(habits_service_pb2.CreateHabitRequest(name="Read", weekly_target=3),
                                       metadata=token, timeout=RPC_TIMEOUT)
        walk = self.habits.CreateHabit(habits_service_pb2.CreateHabitRequest(name="Walk", weekly_target=1),
                                       metadata=token, timeout=RPC_TIMEOUT)
        week = self.habits.GetWeek(habits_service_pb2.GetWeekRequest(), metadata=token, timeout=RPC_TIMEOUT)
        today = datetime.date(week.today.year, week.today.month, week.today.day)
        monday = datetime.date(week.start_date.year, week.start_date.month, week.start_date.day)
        # Three different days of this week up to today for "Read" (fewer early in the week), today for "Walk".
        days = [monday + datetime.timedelta(days=offset) for offset in range((today - monday).days + 1)][-3:]
        for day in days:
            self.habits.MarkHabitDone(
                habits_service_pb2.MarkHabitDoneRequest(
                    habit_id=read.id, date=resources_pb2.LocalDate(year=day.year, month=day.month, day=day.day)),
                metadata=token, timeout=RPC_TIMEOUT)
        self.habits.MarkHabitDone(habits_service_pb2.MarkHabitDoneRequest(habit_id=walk.id), metadata=token,
                                  timeout=RPC_TIMEOUT)

        week = self.habits.GetWeek(habits_service_pb2.GetWeekRequest(), metadata=token, timeout=RPC_TIMEOUT)
        progress = {habit.habit.name: habit.progress for habit in week.habits}
        self.assertEqual(progress, {"Read": "%d/3" % len(days), "Walk": "1/1"})
        met = 1 + (1 if len(days) == 3 else 0)
        self.assertEqual(week.score.met_habits, met)
        self.assertEqual(week.score.total_habits, 2)

        dashboard = self.gateway.GetDashboard(gateway_pb2.GetDashboardRequest(), metadata=token, timeout=RPC_TIMEOUT)
        self.assertEqual(dashboard.week_name, week.week_name)
        self.assertEqual(dashboard.weekly_score.display, week.score.display)
        self.assertEqual([habit.progress for habit in dashboard.habits], [habit.progress for habit in week.habits])
        self.assertEqual(len(dashboard.category_scores), len(week.category_scores))
        # Goals answered (this user has none); the leaderboard has only this user, first.
        self.assertEqual(len(dashboard.goals), 0)
        self.assertEqual(list(dashboard.missing_parts), [])
        self.assertEqual([(line.rank, line.me, line.display) for line in dashboard.leaderboard.top],
                         [(1, True, week.score.display)])
        self.assertEqual(dashboard.leaderboard.me.user_id, registered.user.id)

    def test_a_goal_with_a_linked_habit(self):
        _, registered = register(self, time_zone="Pacific/Auckland")
        token = bearer(registered.tokens.access_token)
        habit = self.habits.CreateHabit(habits_service_pb2.CreateHabitRequest(name="Practice", weekly_target=3),
                                        metadata=token, timeout=RPC_TIMEOUT)
        goal_id = str(uuid.uuid4())
        request = goals_service_pb2.CreateGoalRequest(
            goal_id=goal_id, title="Practice three times a week", icon="🎸",
            type=goals_resources_pb2.GOAL_TYPE_WEEKLY_HABIT, target=goals_resources_pb2.GoalTarget(value=3),
            horizon=goals_resources_pb2.HORIZON_TWELVE_WEEKS, habit_ids=[habit.id])
        created = self.goals.CreateGoal(request, metadata=token, timeout=RPC_TIMEOUT)
        self.assertEqual(created.id, goal_id)
        self.assertEqual(created.owner_id, registered.user.id)
        self.assertEqual(created.status, goals_resources_pb2.GOAL_STATUS_NOT_STARTED)
        self.assertEqual([link.habit_id for link in created.links], [habit.id])
        # A retried create (same goal_id) returns the same goal rather than a second one.
        self.assertEqual(self.goals.CreateGoal(request, metadata=token, timeout=RPC_TIMEOUT).id, goal_id)

        self.habits.MarkHabitDone(habits_service_pb2.MarkHabitDoneRequest(habit_id=habit.id), metadata=token,
                                  timeout=RPC_TIMEOUT)
        goal = self.goals.GetGoal(goals_service_pb2.GetGoalRequest(goal_id=goal_id), metadata=token,
                                  timeout=RPC_TIMEOUT)
        self.assertEqual(goal.progress.display, "1/3")
        self.assertEqual(goal.progress.percent, 33)
        self.assertEqual(goal.status, goals_resources_pb2.GOAL_STATUS_IN_PROGRESS)
        self.assertEqual([link.habit_name for link in goal.links], ["Practice"])

        listed = self.goals.ListGoals(goals_service_pb2.ListGoalsRequest(), metadata=token, timeout=RPC_TIMEOUT)
        self.assertEqual([(g.id, g.progress.display) for g in listed.goals], [(goal_id, "1/3")])
        self.assertEqual(listed.next_page_token, "")

        dashboard = self.gateway.GetDashboard(gateway_pb2.GetDashboardRequest(), metadata=token, timeout=RPC_TIMEOUT)
        self.assertEqual([(g.goal_id, g.title, g.icon, g.display, g.percent) for g in dashboard.goals],
                         [(goal_id, "Practice three times a week", "🎸", "1/3", 33)])
        self.assertEqual(dashboard.goals[0].status, gateway_pb2.GOAL_STATUS_IN_PROGRESS)
        self.assertNotIn(gateway_pb2.DASHBOARD_PART_GOALS, [part.part for part in dashboard.missing_parts])

    def test_planning_a_week_moves_a_goal(self):
        _, registered = register(self)
        token = bearer(registered.tokens.access_token)
        goal = self.goals.CreateGoal(
            goals_service_pb2.CreateGoalRequest(
                title="Write weekly", type=goals_resources_pb2.GOAL_TYPE_WEEKLY_HABIT,
                target=goals_resources_pb2.GoalTarget(value=2), horizon=goals_resources_pb2.HORIZON_FOUR_WEEKS),
            metadata=token, timeout=RPC_TIMEOUT)
        view = self.goals.GetPlanningView(goals_service_pb2.GetPlanningViewRequest(), metadata=token,
                                          timeout=RPC_TIMEOUT)
        self.assertEqual([planned.goal.id for planned in view.goals], [goal.id])
        task = self.goals.CreateTask(
            goals_service_pb2.CreateTaskRequest(title="Draft the post", week=view.week, goal_id=goal.id),
            metadata=token, timeout=RPC_TIMEOUT)
        self.goals.CompleteTask(goals_service_pb2.CompleteTaskRequest(task_id=task.id), metadata=token,
                                timeout=RPC_TIMEOUT)
        moved = self.goals.GetGoal(goals_service_pb2.GetGoalRequest(goal_id=goal.id), metadata=token,
                                   timeout=RPC_TIMEOUT)
        self.assertEqual(moved.progress.display, "1/2")
        prompts = self.goals.ListReflectionPrompts(goals_service_pb2.ListReflectionPromptsRequest(), metadata=token,
                                                   timeout=RPC_TIMEOUT)
        self.assertTrue(prompts.version)
        self.assertGreater(len(prompts.prompts), 0)
        with self.assertRaises(grpc.RpcError) as caught:
            self.goals.CreateTask(goals_service_pb2.CreateTaskRequest(title="", week=view.week), metadata=token,
                                  timeout=RPC_TIMEOUT)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(field_violations(caught.exception), ["title"])

    def test_friends_partners_a_shared_goal_and_the_leaderboard(self):
        _, ana = register(self)
        ben_account, ben = register(self, time_zone="America/Los_Angeles")
        ana_token, ben_token = bearer(ana.tokens.access_token), bearer(ben.tokens.access_token)

        # A request to nobody looks like a request to somebody.
        to_nobody = self.social.SendFriendRequest(
            social_service_pb2.SendFriendRequestRequest(email="nobody-%s@example.com" % uuid.uuid4().hex),
            metadata=ana_token, timeout=RPC_TIMEOUT)
        to_ben = self.social.SendFriendRequest(social_service_pb2.SendFriendRequestRequest(email=ben_account.email),
                                               metadata=ana_token, timeout=RPC_TIMEOUT)
        self.assertEqual([field.name for field, _ in to_nobody.ListFields() if field.name != "addressed_to"],
                         [field.name for field, _ in to_ben.ListFields() if field.name != "addressed_to"])
        self.assertEqual(to_nobody.state, to_ben.state)
        self.assertFalse(to_ben.HasField("other"))

        incoming = self.social.ListRequests(social_service_pb2.ListRequestsRequest(), metadata=ben_token,
                                            timeout=RPC_TIMEOUT).requests
        self.assertEqual([(r.id, r.other.user_id) for r in incoming], [(to_ben.id, ana.user.id)])
        self.social.AcceptRequest(social_service_pb2.AcceptRequestRequest(request_id=to_ben.id), metadata=ben_token,
                                  timeout=RPC_TIMEOUT)
        friends = self.social.ListFriends(social_service_pb2.ListFriendsRequest(), metadata=ana_token,
                                          timeout=RPC_TIMEOUT).friends
        self.assertEqual([f.person.username for f in friends], [ben.user.username])

        partner_request = self.social.SendPartnerRequest(
            social_service_pb2.SendPartnerRequestRequest(user_id=ben.user.id), metadata=ana_token, timeout=RPC_TIMEOUT)
        self.social.AcceptRequest(social_service_pb2.AcceptRequestRequest(request_id=partner_request.id),
                                  metadata=ben_token, timeout=RPC_TIMEOUT)
        partner = self.social.GetPartner(social_service_pb2.GetPartnerRequest(), metadata=ana_token,
                                         timeout=RPC_TIMEOUT)
        self.assertEqual(partner.partner.user_id, ben.user.id)

        # A shared goal: both link a habit of their own and check in; progress sums both.
        ana_habit = self.habits.CreateHabit(habits_service_pb2.CreateHabitRequest(name="Walk", weekly_target=3),
                                            metadata=ana_token, timeout=RPC_TIMEOUT)
        ben_habit = self.habits.CreateHabit(habits_service_pb2.CreateHabitRequest(name="Run", weekly_target=3),
                                            metadata=ben_token, timeout=RPC_TIMEOUT)
        goal = self.goals.CreateGoal(
            goals_service_pb2.CreateGoalRequest(
                title="100 km together", type=goals_resources_pb2.GOAL_TYPE_COUNT,
                target=goals_resources_pb2.GoalTarget(value=10), horizon=goals_resources_pb2.HORIZON_ONGOING,
                habit_ids=[ana_habit.id], shared=True),
            metadata=ana_token, timeout=RPC_TIMEOUT)
        self.assertEqual(goal.partner_id, ben.user.id)
        self.goals.LinkHabit(goals_service_pb2.LinkHabitRequest(goal_id=goal.id, habit_id=ben_habit.id),
                             metadata=ben_token, timeout=RPC_TIMEOUT)
        self.habits.MarkHabitDone(habits_service_pb2.MarkHabitDoneRequest(habit_id=ana_habit.id), metadata=ana_token,
                                  timeout=RPC_TIMEOUT)
        self.habits.MarkHabitDone(habits_service_pb2.MarkHabitDoneRequest(habit_id=ben_habit.id), metadata=ben_token,
                                  timeout=RPC_TIMEOUT)
        for token in (ana_token, ben_token):
            seen = self.goals.GetGoal(goals_service_pb2.GetGoalRequest(goal_id=goal.id), metadata=token,
                                      timeout=RPC_TIMEOUT)
            self.assertEqual(seen.progress.display, "2/10")
        with self.assertRaises(grpc.RpcError) as caught:
            self.goals.DeleteGoal(goals_service_pb2.DeleteGoalRequest(goal_id=goal.id), metadata=ben_token,
                                  timeout=RPC_TIMEOUT)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.PERMISSION_DENIED)

        # Both are on the leaderboard (ana's week); the dashboard shows its top.
        board = self.social.GetLeaderboard(social_service_pb2.GetLeaderboardRequest(), metadata=ana_token,
                                           timeout=RPC_TIMEOUT)
        self.assertEqual(sorted(entry.person.user_id for entry in board.entries), sorted([ana.user.id, ben.user.id]))
        self.assertTrue(all(not entry.person.username.count("@") for entry in board.entries))
        dashboard = self.gateway.GetDashboard(gateway_pb2.GetDashboardRequest(), metadata=ana_token,
                                              timeout=RPC_TIMEOUT)
        self.assertEqual(dashboard.leaderboard.total, 2)
        self.assertEqual([goal.goal_id for goal in dashboard.goals], [goal.id])

        # The partnership ends: the goal is ana's own, ben loses it (goals learns through social's event).
        self.social.EndPartnership(social_service_pb2.EndPartnershipRequest(), metadata=ben_token,
                                   timeout=RPC_TIMEOUT)
        deadline = time.monotonic() + 10
        while True:
            mine = self.goals.GetGoal(goals_service_pb2.GetGoalRequest(goal_id=goal.id), metadata=ana_token,
                                      timeout=RPC_TIMEOUT)
            if not mine.shared or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertFalse(mine.shared)
        self.assertEqual(mine.progress.display, "2/10")
        with self.assertRaises(grpc.RpcError) as caught:
            self.goals.GetGoal(goals_service_pb2.GetGoalRequest(goal_id=goal.id), metadata=ben_token,
                               timeout=RPC_TIMEOUT)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_a_goal_without_a_title_is_refused(self):
        _, registered = register(self)
        with self.assertRaises(grpc.RpcError) as caught:
            self.goals.CreateGoal(
                goals_service_pb2.CreateGoalRequest(
                    title="", type=goals_resources_pb2.GOAL_TYPE_COUNT, target=goals_resources_pb2.GoalTarget(value=10),
                    horizon=goals_resources_pb2.HORIZON_FOUR_WEEKS),
                metadata=bearer(registered.tokens.access_token), timeout=RPC_TIMEOUT)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(field_violations(caught.exception), ["title"])

    def test_deleting_an_account_removes_its_data_everywhere(self):
        # Auth's outbox relay runs here as in the stack: the account's UserDeleted reaches habits, goals and social,
        # which each forget the user; the partner keeps the goal they shared as their own.
        account, registered = register(self)
        ben_account, ben = register(self)
        token, ben_token = bearer(registered.tokens.access_token), bearer(ben.tokens.access_token)
        user = registered.user.id
        habit = self.habits.CreateHabit(habits_service_pb2.CreateHabitRequest(name="Stretch", weekly_target=2),
                                        metadata=token, timeout=RPC_TIMEOUT)
        self.habits.MarkHabitDone(habits_service_pb2.MarkHabitDoneRequest(habit_id=habit.id), metadata=token,
                                  timeout=RPC_TIMEOUT)
        self.goals.CreateGoal(
            goals_service_pb2.CreateGoalRequest(
                title="Stretch twice a week", type=goals_resources_pb2.GOAL_TYPE_WEEKLY_HABIT,
                target=goals_resources_pb2.GoalTarget(value=2), horizon=goals_resources_pb2.HORIZON_FOUR_WEEKS,
                habit_ids=[habit.id]),
            metadata=token, timeout=RPC_TIMEOUT)
        request = self.social.SendFriendRequest(social_service_pb2.SendFriendRequestRequest(email=ben_account.email),
                                                metadata=token, timeout=RPC_TIMEOUT)
        self.social.AcceptRequest(social_service_pb2.AcceptRequestRequest(request_id=request.id), metadata=ben_token,
                                  timeout=RPC_TIMEOUT)
        partner = self.social.SendPartnerRequest(social_service_pb2.SendPartnerRequestRequest(user_id=user),
                                                 metadata=ben_token, timeout=RPC_TIMEOUT)
        self.social.AcceptRequest(social_service_pb2.AcceptRequestRequest(request_id=partner.id), metadata=token,
                                  timeout=RPC_TIMEOUT)
        shared = self.goals.CreateGoal(
            goals_service_pb2.CreateGoalRequest(
                title="Walk together", type=goals_resources_pb2.GOAL_TYPE_COUNT,
                target=goals_resources_pb2.GoalTarget(value=20), horizon=goals_resources_pb2.HORIZON_ONGOING,
                shared=True),
            metadata=ben_token, timeout=RPC_TIMEOUT)
        # One each way: the deleted user's own shared goal leaves ben's view with a tombstone naming nobody.
        self.goals.CreateGoal(
            goals_service_pb2.CreateGoalRequest(
                title="Read together", type=goals_resources_pb2.GOAL_TYPE_COUNT,
                target=goals_resources_pb2.GoalTarget(value=12), horizon=goals_resources_pb2.HORIZON_ONGOING,
                shared=True),
            metadata=token, timeout=RPC_TIMEOUT)
        self.social.UpdateSharingSettings(
            social_service_pb2.UpdateSharingSettingsRequest(
                settings=social_resources_pb2.SharingSettings(private_mode=True),
                update_mask=field_mask_pb2.FieldMask(paths=["private_mode"])),
            metadata=token, timeout=RPC_TIMEOUT)
        for service in ("auth", "habits", "goals", "social"):
            self.assertNotEqual(rows_naming(service, user), "", "%s holds nothing of the user before" % service)

        deleted = time.monotonic()
        self.auth.DeleteAccount(auth_pb2.DeleteAccountRequest(password=account.password), metadata=token,
                                timeout=RPC_TIMEOUT)
        # Within 10 s no table of any schema, each read as its own role, names the user (but `deleted_users`,
        # which remembers the account so that nothing of it is made again).
        for service in ("auth", "habits", "goals", "social"):
            while rows_naming(service, user) != "" and time.monotonic() < deleted + 10:
                time.sleep(0.2)
            self.assertEqual(rows_naming(service, user), "", "%s still holds rows of the deleted user" % service)
        for service in ("habits", "goals", "social"):
            self.assertEqual(service_rows(service, "SELECT count(*) FROM deleted_users WHERE user_id = :'user'", user),
                             "1", "%s never received the account's UserDeleted event" % service)

        # The partner keeps the shared goal as their own; the friend is gone from their list.
        deadline = time.monotonic() + 10
        while True:
            kept = self.goals.GetGoal(goals_service_pb2.GetGoalRequest(goal_id=shared.id), metadata=ben_token,
                                      timeout=RPC_TIMEOUT)
            if not kept.shared or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertFalse(kept.shared)
        self.assertEqual(kept.partner_id, "")
        friends = self.social.ListFriends(social_service_pb2.ListFriendsRequest(), metadata=ben_token,
                                          timeout=RPC_TIMEOUT)
        self.assertEqual(len(friends.friends), 0)
        # The address and the username can be registered again.
        again = self.auth.Register(
            auth_pb2.RegisterRequest(email=account.email, username=account.username, password=account.password),
            timeout=RPC_TIMEOUT)
        self.assertNotEqual(again.user.id, user)

    def test_request_ids_come_back(self):
        _, registered = register(self)
        _, call = self.auth.GetProfile.with_call(
            auth_pb2.GetProfileRequest(), metadata=bearer(registered.tokens.access_token) + (("x-request-id", "e2e-1"),),
            timeout=RPC_TIMEOUT)
        self.assertIn(("x-request-id", "e2e-1"), call.initial_metadata())
        _, call = self.auth.GetProfile.with_call(
            auth_pb2.GetProfileRequest(), metadata=bearer(registered.tokens.access_token), timeout=RPC_TIMEOUT)
        generated = dict(call.initial_metadata()).get("x-request-id")
        self.assertEqual(str(uuid.UUID(generated)), generated)

    def test_errors_carry_field_violations(self):
        _, registered = register(self)
        with self.assertRaises(grpc.RpcError) as caught:
            self.habits.CreateHabit(habits_service_pb2.CreateHabitRequest(name=""),
                                    metadata=bearer(registered.tokens.access_token), timeout=RPC_TIMEOUT)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIsNotNone(status_details(caught.exception))
        self.assertEqual(field_violations(caught.exception), ["name"])

    def test_calls_without_a_valid_token_are_refused(self):
        _, registered = register(self)
        token = registered.tokens.access_token
        request = habits_service_pb2.ListHabitsRequest()
        with self.assertRaises(grpc.RpcError) as caught:
            self.habits.ListHabits(request, timeout=RPC_TIMEOUT)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(error_reason(caught.exception), "TOKEN_MISSING")

        header, payload, signature = token.split(".")
        claims = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        forged_claims = claims.replace(registered.user.id.encode(), str(uuid.uuid4()).encode())
        self.assertNotEqual(forged_claims, claims)
        forged = base64.urlsafe_b64encode(forged_claims).rstrip(b"=").decode()
        unsigned_header = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
        for tampered in ["%s.%s.%s" % (header, forged, signature),          # another user's id, same signature
                         "%s.%s." % (unsigned_header, payload),             # alg none, no signature
                         "%s.%s.%s" % (header, payload, signature[::-1])]:  # a broken signature
            with self.assertRaises(grpc.RpcError) as caught:
                self.habits.ListHabits(request, metadata=bearer(tampered), timeout=RPC_TIMEOUT)
            self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED, tampered)
            self.assertEqual(error_reason(caught.exception), "TOKEN_INVALID")

        # The internal identity headers cannot be used to pick a user.
        with self.assertRaises(grpc.RpcError) as caught:
            self.habits.ListHabits(request, metadata=(("x-habitflow-user-id", registered.user.id),
                                                      ("x-habitflow-caller", "gateway")), timeout=RPC_TIMEOUT)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED)

    def test_internal_services_are_unreachable(self):
        _, registered = register(self)
        token = bearer(registered.tokens.access_token)
        auth_internal = service_stub(self.channel, auth_internal_pb2, "AuthInternal")
        habits_internal = service_stub(self.channel, habits_internal_pb2, "HabitsInternal")
        goals_internal = service_stub(self.channel, goals_internal_pb2, "GoalsInternal")
        calls = [
            lambda: auth_internal.GetVerificationKeys(
                auth_internal_pb2.GetVerificationKeysRequest(), metadata=token, timeout=RPC_TIMEOUT),
            lambda: auth_internal.CheckSession(
                auth_internal_pb2.CheckSessionRequest(session_id=registered.tokens.session_id,
                                                      user_id=registered.user.id), metadata=token, timeout=RPC_TIMEOUT),
            lambda: habits_internal.PurgeUser(
                habits_internal_pb2.PurgeUserRequest(user_id=registered.user.id), metadata=token, timeout=RPC_TIMEOUT),
            lambda: goals_internal.PurgeUser(
                goals_internal_pb2.PurgeUserRequest(user_id=registered.user.id), metadata=token, timeout=RPC_TIMEOUT),
            lambda: goals_internal.ListActiveGoals(
                goals_internal_pb2.ListActiveGoalsRequest(user_id=registered.user.id), metadata=token,
                timeout=RPC_TIMEOUT),
        ]
        for call in calls:
            with self.assertRaises(grpc.RpcError) as caught:
                call()
            self.assertEqual(caught.exception.code(), grpc.StatusCode.UNIMPLEMENTED)

        # Reflection describes the public API only (what `grpcurl list` shows).
        reflection = self.channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
        responses = list(reflection(
            iter([reflection_pb2.ServerReflectionRequest(list_services=""),
                  reflection_pb2.ServerReflectionRequest(file_containing_symbol="habitflow.auth.v1.AuthInternal")]),
            timeout=RPC_TIMEOUT))
        services = {service.name for service in responses[0].list_services_response.service}
        self.assertEqual(services, {
            "habitflow.auth.v1.AuthService", "habitflow.habits.v1.HabitsService", "habitflow.goals.v1.GoalsService",
            "habitflow.social.v1.SocialService", "habitflow.gateway.v1.GatewayService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection"})
        self.assertEqual(responses[1].error_response.error_code, grpc.StatusCode.NOT_FOUND.value[0])

    def test_health(self):
        health = service_stub(self.channel, health_pb2, "Health")
        self.assertEqual(health.Check(health_pb2.HealthCheckRequest(), timeout=RPC_TIMEOUT).status,
                         health_pb2.HealthCheckResponse.SERVING)


class ServiceOutage(unittest.TestCase):
    """A stack of its own, whose services are stopped mid-test."""

    @classmethod
    def setUpClass(cls):
        start_stack(cls)

    def test_a_service_down_during_an_account_deletion_purges_the_user_when_back(self):
        account, registered = register(self)
        token = bearer(registered.tokens.access_token)
        user = registered.user.id
        self.social.GetSharingSettings(social_service_pb2.GetSharingSettingsRequest(), metadata=token,
                                       timeout=RPC_TIMEOUT)
        self.assertEqual(service_rows("social", "SELECT count(*) FROM users WHERE user_id = :'user'", user), "1")

        self.assertEqual(self.stack.stop("social"), 0)
        self.auth.DeleteAccount(auth_pb2.DeleteAccountRequest(password=account.password), metadata=token,
                                timeout=RPC_TIMEOUT)
        # The others are not held back by the one that is down.
        deadline = time.monotonic() + 10
        for service in ("habits", "goals"):
            while (service_rows(service, "SELECT count(*) FROM deleted_users WHERE user_id = :'user'", user) != "1"
                   and time.monotonic() < deadline):
                time.sleep(0.2)
            self.assertEqual(service_rows(service, "SELECT count(*) FROM deleted_users WHERE user_id = :'user'", user),
                             "1", "%s did not forget the account while social was down" % service)
        self.assertEqual(service_rows("social", "SELECT count(*) FROM users WHERE user_id = :'user'", user), "1")

        back = time.monotonic()
        self.stack.start(["social"], peers=["auth", "habits", "goals", "social", "gateway"])
        self.stack.wait_serving(["social"], timeout=60)
        while (service_rows("social", "SELECT count(*) FROM deleted_users WHERE user_id = :'user'", user) != "1"
               and time.monotonic() < back + 20):
            time.sleep(0.2)
        self.assertEqual(service_rows("social", "SELECT count(*) FROM users WHERE user_id = :'user'", user), "0",
                         "social did not purge the account after it came back")
        self.assertEqual(service_rows("social", "SELECT count(*) FROM deleted_users WHERE user_id = :'user'", user),
                         "1")

    def assert_client_safe(self, message, service):
        """A status message for a client: names the service, and no address, port, type name or errno."""
        self.assertIn("the %s service" % service, message)
        self.assertIsNone(INTERNAL_DETAIL.search(message), message)

    def test_a_stopped_service_is_unavailable_while_the_others_work(self):
        account, registered = register(self)
        token = bearer(registered.tokens.access_token)
        self.habits.CreateHabit(habits_service_pb2.CreateHabitRequest(name="Journal"), metadata=token,
                                timeout=RPC_TIMEOUT)
        dashboard = self.gateway.GetDashboard(gateway_pb2.GetDashboardRequest(), metadata=token, timeout=RPC_TIMEOUT)
        self.assertNotIn(gateway_pb2.DASHBOARD_PART_HABITS, [part.part for part in dashboard.missing_parts])

        stopping = time.monotonic()
        # SIGTERM: the service drains and exits cleanly (status 0), well before stop()'s SIGKILL fallback.
        self.assertEqual(self.stack.stop("habits"), 0)
        self.assertLess(time.monotonic() - stopping, 10.0)
        started = time.monotonic()
        with self.assertRaises(grpc.RpcError) as caught:
            self.habits.ListHabits(habits_service_pb2.ListHabitsRequest(), metadata=token, timeout=RPC_TIMEOUT)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertLess(time.monotonic() - started, 3.0)
        # The client learns which service and what to do; the address and the connection error go to the gateway's
        # log. The call above took the gateway's fast path (its token was known); a new token's first call takes the
        # general path, with the same answer.
        self.assertEqual(caught.exception.details(), "the habits service is unavailable; retry later")
        login = self.auth.Login(auth_pb2.LoginRequest(email=account.email, password=account.password),
                                timeout=RPC_TIMEOUT)
        with self.assertRaises(grpc.RpcError) as caught:
            self.habits.ListHabits(habits_service_pb2.ListHabitsRequest(), metadata=bearer(login.tokens.access_token),
                                   timeout=RPC_TIMEOUT)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(caught.exception.details(), "the habits service is unavailable; retry later")
        # Goals reads progress from habits: whatever it answers names no address either.
        try:
            self.goals.ListGoals(goals_service_pb2.ListGoalsRequest(), metadata=token, timeout=RPC_TIMEOUT)
        except grpc.RpcError as error:
            self.assert_client_safe(error.details(), "habits")
        with open(os.path.join(self.log_dir, "gateway.log"), errors="replace") as f:
            self.assertIn("127.0.0.1:%d" % self.stack.ports["habits"], f.read(),
                          "the gateway's log should name what it could not reach")

        profile = self.auth.GetProfile(auth_pb2.GetProfileRequest(), metadata=token, timeout=RPC_TIMEOUT)
        self.assertEqual(profile.id, registered.user.id)
        dashboard = self.gateway.GetDashboard(gateway_pb2.GetDashboardRequest(), metadata=token, timeout=RPC_TIMEOUT)
        missing = {part.part: part.code for part in dashboard.missing_parts}
        self.assertEqual(missing.get(gateway_pb2.DASHBOARD_PART_HABITS), grpc.StatusCode.UNAVAILABLE.value[0])
        self.assertEqual(len(dashboard.habits), 0)
        for part in dashboard.missing_parts:
            self.assertIsNone(INTERNAL_DETAIL.search(part.message), part.message)
        self.assertEqual([part.message for part in dashboard.missing_parts
                          if part.part == gateway_pb2.DASHBOARD_PART_HABITS],
                         ["the habits service is unavailable; retry later"])

        # Goals goes too: its part is missing as well, and the dashboard still answers.
        self.assertEqual(self.stack.stop("goals"), 0)
        with self.assertRaises(grpc.RpcError) as caught:
            self.goals.ListGoals(goals_service_pb2.ListGoalsRequest(), metadata=token, timeout=RPC_TIMEOUT)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)
        dashboard = self.gateway.GetDashboard(gateway_pb2.GetDashboardRequest(), metadata=token, timeout=RPC_TIMEOUT)
        missing = {part.part: part.code for part in dashboard.missing_parts}
        self.assertEqual(missing, {gateway_pb2.DASHBOARD_PART_HABITS: grpc.StatusCode.UNAVAILABLE.value[0],
                                   gateway_pb2.DASHBOARD_PART_GOALS: grpc.StatusCode.UNAVAILABLE.value[0],
                                   # The leaderboard's scores come from habits.
                                   gateway_pb2.DASHBOARD_PART_LEADERBOARD: grpc.StatusCode.UNAVAILABLE.value[0]})
        self.assertEqual(len(dashboard.goals), 0)
        for part in dashboard.missing_parts:
            self.assertIsNone(INTERNAL_DETAIL.search(part.message), part.message)


if __name__ == "__main__":
    unittest.main()
