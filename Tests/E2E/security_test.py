"""Security end to end (issue #28), from Python grpcio against the real executables and the test Postgres:

- AuthorizationMatrix: every public RPC, enumerated from the generated descriptors of the services the gateway routes,
  called as user B with user A's resource ids (and with one of A's ids among B's own), then as nobody, with a
  tampered token, an expired token and the token of a deleted account. Every internal RPC each service serves,
  called on the service's own port without the internal credential, with one signed by another secret, and with the
  identity forwarded client calls carry. A public RPC the matrix has no plan for fails the test.
- SecretsInLogs: a full scenario at the most verbose log level, then every log line of every process scanned for
  tokens, passwords, the internal secret and credential, and the users' emails.
- GatewayTLS: the gateway's TLS, checked with grpcio, Python's ssl and `openssl s_client`.

Environment: as gateway_e2e_test (scripts/test sets it). Prints its figures (pairs tried, leaks found, lines
scanned) in the test output.
"""

import base64
import datetime
import hashlib
import hmac
import io
import json
import os
import re
import shutil
import socket
import socketserver
import ssl
import subprocess
import tempfile
import threading
import time
import unittest
import uuid
import zipfile

import grpc
from google.protobuf import descriptor, descriptor_pb2, field_mask_pb2, symbol_database

from gateway_e2e_test import (INTERNAL_DETAIL, KEY_ENCRYPTION_KEY, RPC_TIMEOUT, auth_internal_pb2,  # noqa: F401
                              auth_pb2, bearer, gateway_pb2, goals_internal_pb2, goals_resources_pb2,
                              goals_service_pb2, habits_internal_pb2, habits_service_pb2, reflection_pb2,
                              resources_pb2, service_rows, social_resources_pb2, social_service_pb2, start_stack)
from habitflow.events.v1 import change_notices_pb2, event_pb2, subscriber_pb2  # noqa: E402,F401
from habitflow.social.v1 import social_internal_pb2  # noqa: E402,F401

SYMBOLS = symbol_database.Default()
OK = grpc.StatusCode.OK
NOT_FOUND = grpc.StatusCode.NOT_FOUND
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
PERMISSION_DENIED = grpc.StatusCode.PERMISSION_DENIED
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
ALREADY_EXISTS = grpc.StatusCode.ALREADY_EXISTS
RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED

# The public services the gateway routes (and its own), each from its generated module.
PUBLIC_SERVICES = [
    (auth_pb2, "AuthService"), (habits_service_pb2, "HabitsService"), (goals_service_pb2, "GoalsService"),
    (social_service_pb2, "SocialService"), (gateway_pb2, "GatewayService"),
]
SIDE_SERVICES = {"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
                 "grpc.reflection.v1alpha.ServerReflection"}
# The RPCs that need no access token (Services/Gateway/README.md, Authentication).
NO_TOKEN = {"/habitflow.auth.v1.AuthService/" + name for name in (
    "Register", "Login", "Refresh", "RequestPasswordReset", "ConfirmPasswordReset", "ConfirmEmailChange",
    "SocialLogin")}

# A request field named like this names a resource of this kind (the kinds of ids the victim's fixture has).
ID_FIELDS = {
    "habit_id": "habit", "habit_ids": "habit", "category_id": "category", "category_ids": "category",
    "shared_category_ids": "category", "goal_id": "goal", "parent_goal_id": "goal", "task_id": "task",
    "review_id": "review", "assessment_id": "assessment", "request_id": "request", "entry_id": "entry",
    "session_id": "session", "user_id": "user", "user_ids": "user", "owner_id": "user", "partner_id": "user",
}
# Fields ending in `_id` that name no resource of anybody's.
NOT_RESOURCE_IDS = {
    "device_id": "the client's own device id (DeviceInfo), chosen by the client",
    "conversation_id": "an external conversation reference (free text, seed 002)",
}
# A nested message of this type names its resource in `id` (the Update* requests).
ID_MESSAGES = {
    "habitflow.habits.v1.Habit": "habit", "habitflow.habits.v1.Category": "category",
    "habitflow.goals.v1.Goal": "goal", "habitflow.goals.v1.Task": "task", "habitflow.goals.v1.Review": "review",
    "habitflow.goals.v1.Assessment": "assessment", "habitflow.auth.v1.User": "user",
}


def method_path(method):
    return "/%s/%s" % (method.containing_service.full_name, method.name)


def streaming(method):
    proto = descriptor_pb2.MethodDescriptorProto()
    method.CopyToProto(proto)
    return proto.client_streaming, proto.server_streaming


class Outcome:
    """How one call ended: its code, every response message, and the error (None when OK)."""

    def __init__(self, code, responses, error=None):
        self.code, self.responses, self.error = code, responses, error

    @property
    def message(self):
        return self.error.details() if self.error is not None else ""

    def blobs(self):
        """Everything the caller received, as bytes: serialized responses (an export's archive unzipped), the
        status message and the status details."""
        out = [response.SerializeToString() for response in self.responses]
        chunks = [response for response in self.responses if isinstance(response, gateway_pb2.ExportMyDataChunk)]
        if chunks:
            data = b"".join(chunk.data for chunk in chunks)
            try:
                with zipfile.ZipFile(io.BytesIO(data)) as archive:
                    out += [archive.read(name) for name in archive.namelist()]
            except zipfile.BadZipFile:
                out.append(data)
        if self.error is not None:
            out.append((self.error.details() or "").encode())
            for key, value in self.error.trailing_metadata() or ():
                out.append(value if isinstance(value, bytes) else value.encode())
        return out

    def __repr__(self):
        return "%s %r" % (self.code.name, self.message)


# Not a protobuf message: field 31 with wire type 7, which does not exist.
UNPARSEABLE = b"\xff\xff\xff\xff"


# Streams that run until the client ends them: called with this deadline (seconds), which ends them
# DEADLINE_EXCEEDED once they have sent what they have.
OPEN_ENDED = {"/habitflow.gateway.v1.GatewayService/WatchChanges": 2}


def call(channel, method, request, metadata=(), timeout=RPC_TIMEOUT):
    """One call of any kind (unary or streaming, one request message), collecting every response. `request` may be
    bytes, sent as they are."""
    timeout = OPEN_ENDED.get(method_path(method), timeout)
    client_streaming, server_streaming = streaming(method)
    request_class = SYMBOLS.GetSymbol(method.input_type.full_name)
    response_class = SYMBOLS.GetSymbol(method.output_type.full_name)
    kinds = {(False, False): channel.unary_unary, (False, True): channel.unary_stream,
             (True, False): channel.stream_unary, (True, True): channel.stream_stream}
    serialize = (lambda raw: raw) if isinstance(request, bytes) else request_class.SerializeToString
    callable_ = kinds[(client_streaming, server_streaming)](
        method_path(method), request_serializer=serialize, response_deserializer=response_class.FromString)
    argument = iter([request]) if client_streaming else request
    responses = []
    try:
        if server_streaming:
            for response in callable_(argument, metadata=metadata, timeout=timeout):
                responses.append(response)
        else:
            responses.append(callable_(argument, metadata=metadata, timeout=timeout))
    except grpc.RpcError as error:
        return Outcome(error.code(), responses, error)
    return Outcome(OK, responses)


def public_methods():
    for module, name in PUBLIC_SERVICES:
        yield from module.DESCRIPTOR.services_by_name[name].methods


# MARK: Requests that name someone's resources

def id_paths(message_descriptor, prefix="", depth=0):
    """Every (path, field descriptor, kind) of a request that names a resource, recursively through HabitFlow
    messages (a repeated message field contributes one element). Raises for an `_id` field of an unknown kind, so a
    new kind of id is noticed."""
    found = []
    for field in message_descriptor.fields:
        path = prefix + field.name
        if field.type == descriptor.FieldDescriptor.TYPE_STRING:
            if field.name in ID_FIELDS:
                found.append((path, ID_FIELDS[field.name]))
            elif field.name == "id" and prefix:
                kind = ID_MESSAGES.get(message_descriptor.full_name)
                if kind is None:
                    raise AssertionError("%s names an `id` of an unknown kind (add it to ID_MESSAGES)" % path)
                found.append((path, kind))
            elif (field.name.endswith("_id") or field.name.endswith("_ids")) and field.name not in NOT_RESOURCE_IDS:
                raise AssertionError(
                    "%s names an id of an unknown kind (add it to ID_FIELDS or NOT_RESOURCE_IDS)" % path)
        elif (field.type == descriptor.FieldDescriptor.TYPE_MESSAGE and depth < 3
              and field.message_type.full_name.startswith("habitflow.")):
            found += id_paths(field.message_type, path + ".", depth + 1)
    return found


def set_path(message, path, value):
    """Sets a string field (a repeated one gets [value]) at a dotted path, creating one element of repeated messages."""
    head, _, rest = path.partition(".")
    field = message.DESCRIPTOR.fields_by_name[head]
    if rest:
        if field.label == descriptor.FieldDescriptor.LABEL_REPEATED:
            target = getattr(message, head)[0] if len(getattr(message, head)) else getattr(message, head).add()
        else:
            target = getattr(message, head)
        set_path(target, rest, value)
    elif field.label == descriptor.FieldDescriptor.LABEL_REPEATED:
        del getattr(message, head)[:]
        getattr(message, head).append(value)
    else:
        setattr(message, head, value)


def oneof_rivals(message_descriptor, path):
    """The paths of the other members of the oneof `path`'s field belongs to (top level only)."""
    field = message_descriptor.fields_by_name.get(path)
    if field is None or field.containing_oneof is None:
        return set()
    return {other.name for other in field.containing_oneof.fields if other.name != path}


class Plan:
    """How the matrix attacks one RPC as user B.

    expect: the codes accepted for the request naming A's resources (OK only where the call acts on the caller's own
    things whatever the ids say, or is directed at another user by design: `why` says which). mixed: per id path, the
    codes accepted when only that path names A's resource and every other id is B's own (default: `expect`).
    creates: the field holding the client-chosen id of a resource the call creates (ids are per user: naming A's id
    makes B a resource of B's own with that id, so such calls run last, and B's own value there is a new id).
    extra: sets the fields that are not ids, so that only ownership can make the call fail (after: what must come once
    the ids are in, such as a rating next to its category). fresh: made by a throwaway
    account (the call ends the caller's session or account). kinds: id kinds replaced for this RPC, by kind or by
    path. also: more (label, change of the request, codes) variants, for calls directed at A by design. reveals:
    attributes of A's (Person) the answer may carry by the API's contract, with `why`.
    """

    def __init__(self, expect, why="", mixed=None, creates=None, extra=None, after=None, fresh=False, kinds=None,
                 also=(), reveals=()):
        self.expect = codes(expect)
        self.why, self.creates = why, creates
        self.mixed = {path: codes(value) for path, value in (mixed or {}).items()}
        self.extra, self.after, self.fresh, self.kinds = extra, after, fresh, kinds or {}
        self.also, self.reveals = also, reveals


def codes(value):
    return set(value) if isinstance(value, (set, list, tuple)) else {value}


def unique(label):
    return "%s %s" % (label, uuid.uuid4().hex[:8])


def mask(*paths):
    return field_mask_pb2.FieldMask(paths=list(paths))


def _set(**values):
    def apply(request, env):
        for key, value in values.items():
            value = value(env) if callable(value) else value
            target = request
            parts = key.split(".")
            for part in parts[:-1]:
                target = getattr(target, part)
            field = target.DESCRIPTOR.fields_by_name[parts[-1]]
            if field.label == descriptor.FieldDescriptor.LABEL_REPEATED:
                del getattr(target, parts[-1])[:]
                getattr(target, parts[-1]).extend(value)
            elif field.type == descriptor.FieldDescriptor.TYPE_MESSAGE:
                getattr(target, parts[-1]).CopyFrom(value)
            else:
                setattr(target, parts[-1], value)
    return apply


def _today(module):
    return lambda env: module.LocalDate(year=env.today.year, month=env.today.month, day=env.today.day)


def _week(module):
    return lambda env: module.IsoWeek(year=env.week[0], week=env.week[1])


NF = NOT_FOUND
GOALS = "/habitflow.goals.v1.GoalsService/"
HABITS = "/habitflow.habits.v1.HabitsService/"
AUTH = "/habitflow.auth.v1.AuthService/"
SOCIAL = "/habitflow.social.v1.SocialService/"
GATEWAY = "/habitflow.gateway.v1.GatewayService/"
OWN = "acts on the caller's own data; names none of A's"
BLOCKED = ("anyone may block anyone they name by id or username (user-directed); the block, in BlockUser, "
           "ListBlockedUsers and the change feed, shows the person as they were when blocked (BlockedUser.person: "
           "username and display name, never the email)")

PLANS = {
    # Auth: the sign-in RPCs name A by email or by a credential only A has.
    AUTH + "Register": Plan(ALREADY_EXISTS, "A's email: emails are unique, so sign-up says it is taken; nothing of "
                            "the account comes back",
                            extra=_set(email=lambda env: env.a.email,
                                       username=lambda env: "sec_" + uuid.uuid4().hex[:12],
                                       password="another password 1")),
    AUTH + "Login": Plan({UNAUTHENTICATED, RESOURCE_EXHAUSTED}, "A's email with a wrong password (throttled after 5)",
                         extra=_set(email=lambda env: env.a.email, password="not the password 1")),
    AUTH + "Refresh": Plan(UNAUTHENTICATED, "A's access token presented as a refresh token",
                           extra=_set(refresh_token=lambda env: env.a.access_token)),
    AUTH + "Logout": Plan(OK, "ends the caller's own session (no id to name); A's still works afterwards", fresh=True),
    AUTH + "LogoutEverywhere": Plan(OK, "ends the caller's own sessions only; A's still works afterwards", fresh=True),
    AUTH + "ListSessions": Plan(OK, OWN),
    AUTH + "RevokeSession": Plan(NF),
    AUTH + "GetProfile": Plan(OK, OWN),
    AUTH + "UpdateProfile": Plan(OK, "the profile is always the caller's: `user.id` is ignored, A's stays as it was",
                                 extra=_set(**{"user.display_name": lambda env: unique("B renamed"),
                                               "update_mask": mask("display_name")})),
    AUTH + "ChangePassword": Plan(INVALID_ARGUMENT, "A's password as the current one: not the caller's", fresh=True,
                                  extra=_set(current_password=lambda env: env.a.password,
                                             new_password="a brand new password 1")),
    AUTH + "RequestPasswordReset": Plan({OK, RESOURCE_EXHAUSTED}, "the same answer for every address (the mail goes "
                                        "to A); throttled per address", extra=_set(email=lambda env: env.a.email)),
    AUTH + "ConfirmPasswordReset": Plan(INVALID_ARGUMENT, "a token A was never sent",
                                        extra=_set(token=lambda env: env.a.refresh_token,
                                                   new_password="a brand new password 1")),
    AUTH + "RequestEmailChange": Plan(ALREADY_EXISTS, "A's email as the new address: taken (as at sign-up)",
                                      extra=_set(new_email=lambda env: env.a.email,
                                                 password=lambda env: env.b.password)),
    AUTH + "ConfirmEmailChange": Plan(INVALID_ARGUMENT, "a token A was never sent",
                                      extra=_set(token=lambda env: env.a.refresh_token)),
    AUTH + "DeleteAccount": Plan(INVALID_ARGUMENT, "A's password: not the caller's", fresh=True,
                                 extra=_set(password=lambda env: env.a.password)),
    AUTH + "SocialLogin": Plan(FAILED_PRECONDITION, "A's access token as an ID token (no provider is configured)",
                               extra=_set(**{"credential.provider": auth_pb2.SOCIAL_PROVIDER_GOOGLE,
                                             "credential.id_token": lambda env: env.a.access_token})),

    # Habits: another user's ids answer NOT_FOUND.
    HABITS + "ListCategories": Plan(OK, OWN),
    HABITS + "CreateCategory": Plan(OK, "A's category id as the new id: B gets a category of B's own",
                                    creates="category_id", extra=_set(name=lambda env: unique("B cat"))),
    HABITS + "RenameCategory": Plan(NF, extra=_set(name=lambda env: unique("B cat"))),
    HABITS + "ReorderCategories": Plan(NF),
    HABITS + "DeleteCategory": Plan(NF),
    HABITS + "CreateHabit": Plan(NF, creates="habit_id", mixed={"habit_id": OK},
                                 extra=_set(name=lambda env: unique("B habit"))),
    HABITS + "GetHabit": Plan(NF),
    HABITS + "ListHabits": Plan(OK, OWN),
    HABITS + "UpdateHabit": Plan(NF, extra=_set(**{"habit.name": lambda env: unique("B habit"),
                                                 "update_mask": mask("name", "category_id")})),
    HABITS + "DeleteHabit": Plan(NF),
    HABITS + "MarkHabitDone": Plan(NF, creates="entry_id", mixed={"entry_id": OK}),
    HABITS + "MarkHabitNotDone": Plan(NF),
    HABITS + "ListEntries": Plan(NF, extra=_set(start_date=_today(resources_pb2), end_date=_today(resources_pb2))),
    HABITS + "GetWeek": Plan(OK, OWN),
    HABITS + "GetScoreHistory": Plan(OK, OWN),
    HABITS + "ListChanges": Plan(OK, OWN),

    # Goals.
    GOALS + "CreateGoal": Plan(NF, creates="goal_id", mixed={"goal_id": OK}, extra=_set(
        title=lambda env: unique("B goal"), type=goals_resources_pb2.GOAL_TYPE_COUNT,
        target=goals_resources_pb2.GoalTarget(value=5), horizon=goals_resources_pb2.HORIZON_FOUR_WEEKS)),
    GOALS + "GetGoal": Plan(NF),
    GOALS + "ListGoals": Plan(OK, "filters naming A's category or parent goal match nothing of B's: an empty page"),
    GOALS + "UpdateGoal": Plan(NF, kinds={"goal.id": "rating_goal"}, mixed={
        "goal.owner_id": OK, "goal.partner_id": OK, "goal.links.habit_id": OK, "goal.links.user_id": OK},
        why="owner_id, partner_id and links are output only (not in the mask): ignored",
        extra=_set(**{"goal.title": lambda env: unique("B goal"),
                      "update_mask": mask("title", "category_id", "parent_goal_id")})),
    GOALS + "PauseGoal": Plan(NF),
    GOALS + "ResumeGoal": Plan(NF),
    GOALS + "CompleteGoal": Plan(NF),
    GOALS + "ArchiveGoal": Plan(NF),
    GOALS + "RestoreGoal": Plan(NF),
    GOALS + "DeleteGoal": Plan(NF),
    GOALS + "LinkHabit": Plan(NF),
    GOALS + "UnlinkHabit": Plan(NF, mixed={"habit_id": OK},
                                why="B's goal with A's habit: not linked, and unlinking an unlinked habit returns the "
                                "goal unchanged (B's own)"),
    GOALS + "AddAssessment": Plan(NF, creates="assessment_id", mixed={"assessment_id": OK},
                                  kinds={"goal": "rating_goal"}, extra=_set(value=2)),
    GOALS + "ListAssessments": Plan(NF, kinds={"goal": "rating_goal"}),
    GOALS + "DeleteAssessment": Plan(NF, kinds={"goal": "rating_goal"}),
    GOALS + "CreateReview": Plan(NF, "its one rating names the category", creates="review_id",
                                 mixed={"review_id": OK}, extra=_set(type=goals_resources_pb2.REVIEW_TYPE_TWELVE_WEEK),
                                 after=lambda request, env: [setattr(r, "rating", 7) for r in request.ratings]),
    GOALS + "UpdateReview": Plan(NF, extra=_set(**{"review.note": lambda env: unique("B note"),
                                                   "update_mask": mask("note", "ratings")}),
                                 after=lambda request, env: [setattr(r, "rating", 6) for r in request.review.ratings]),
    GOALS + "DeleteReview": Plan(NF),
    GOALS + "ListReviews": Plan(OK, OWN),
    GOALS + "GetCategoryRatings": Plan(OK, OWN),
    GOALS + "GetGoalsOverview": Plan(OK, OWN),
    GOALS + "GetGoalHistory": Plan(NF),
    GOALS + "CreateTask": Plan(NF, creates="task_id", mixed={"task_id": OK},
                               extra=_set(title=lambda env: unique("B task"), week=_week(goals_resources_pb2))),
    GOALS + "UpdateTask": Plan(NF, extra=_set(**{"task.title": lambda env: unique("B task"),
                                               "update_mask": mask("title", "goal_id")})),
    GOALS + "CompleteTask": Plan(NF),
    GOALS + "UncompleteTask": Plan(NF),
    GOALS + "DeleteTask": Plan(NF),
    GOALS + "ListTasks": Plan(NF),
    GOALS + "ListChanges": Plan(OK, OWN),
    GOALS + "GetPlanningView": Plan(OK, OWN),
    GOALS + "ListSuggestions": Plan(OK, OWN),
    GOALS + "ListReflectionPrompts": Plan(OK, OWN),

    # Social: requests are global ids; people are named by id, email or username.
    SOCIAL + "SendFriendRequest": Plan(
        ALREADY_EXISTS, "request ids are global: A's is taken (nothing of A's request comes back); sent to an "
        "address nobody has", creates="request_id", extra=_set(username=lambda env: "nobody_" + uuid.uuid4().hex[:12]),
        also=[("a friend request to A (user-directed: allowed, and it must not tell whether A exists)",
               _set(request_id=lambda env: str(uuid.uuid4()), username=lambda env: env.a.username), {OK})]),
    SOCIAL + "ListRequests": Plan(OK, OWN),
    SOCIAL + "AcceptRequest": Plan(NF),
    SOCIAL + "DeclineRequest": Plan(NF),
    SOCIAL + "CancelRequest": Plan(NF),
    SOCIAL + "ListFriends": Plan(OK, OWN),
    SOCIAL + "RemoveFriend": Plan(OK, "ending a friendship that does not exist succeeds (idempotent); nothing changes"),
    SOCIAL + "BlockUser": Plan(OK, BLOCKED, reveals=("display_name",)),
    SOCIAL + "UnblockUser": Plan(OK, "idempotent, the caller's own block list"),
    SOCIAL + "ListBlockedUsers": Plan(OK, BLOCKED, reveals=("display_name",)),
    SOCIAL + "SendPartnerRequest": Plan(NF, "A is not B's friend", creates="request_id"),
    SOCIAL + "GetPartner": Plan(NF, "B has no partner"),
    SOCIAL + "EndPartnership": Plan(OK, "B has no partnership: nothing to end"),
    SOCIAL + "GetSharingSettings": Plan(OK, OWN),
    SOCIAL + "UpdateSharingSettings": Plan(NF, extra=_set(update_mask=mask("shared_category_ids"))),
    SOCIAL + "GetLeaderboard": Plan(OK, OWN),
    SOCIAL + "ListChanges": Plan(OK, BLOCKED, reveals=("display_name",)),

    # The gateway's own.
    GATEWAY + "GetDashboard": Plan(OK, OWN),
    GATEWAY + "ExportMyData": Plan(OK, OWN + " (the archive is unzipped and searched)"),
    GATEWAY + "WatchChanges": Plan(grpc.StatusCode.DEADLINE_EXCEEDED,
                                   OWN + "; runs until its deadline (OPEN_ENDED), sending the caller's own change "
                                   "feeds (a full sync, searched): " + BLOCKED, reveals=("display_name",)),
}

class Person:
    """An account the matrix uses, with one resource of every kind and the private text they carry."""

    created = []

    def __init__(self, test_case, label, resources=True):
        Person.created.append(self)
        suffix = uuid.uuid4().hex[:12]
        self.email = "sec-%s-%s@example.com" % (label, suffix)
        self.username = "sec_%s_%s" % (label, suffix)
        self.password = "secret pass %s %s" % (label, suffix)
        self.display_name = "%s Private %s" % (label.upper(), suffix)
        self.device_name = "%s-phone-%s" % (label, suffix)
        registered = test_case.auth.Register(auth_pb2.RegisterRequest(
            email=self.email, username=self.username, password=self.password, display_name=self.display_name,
            device=auth_pb2.DeviceInfo(device_id=str(uuid.uuid4()), device_name=self.device_name)),
            timeout=RPC_TIMEOUT)
        self.user_id = registered.user.id
        self.access_token = registered.tokens.access_token
        self.refresh_token = registered.tokens.refresh_token
        self.token = bearer(self.access_token)
        self.ids = {"user": self.user_id, "session": registered.tokens.session_id}
        self.markers = [self.email, self.display_name, self.device_name, self.access_token, self.refresh_token]
        if resources:
            self._make_resources(test_case, label, suffix)

    def _make_resources(self, test_case, label, suffix):
        t, habits, goals, social = self.token, test_case.habits, test_case.goals, test_case.social
        texts = {kind: "%s-%s-%s" % (label, kind, suffix) for kind in (
            "cat", "habit", "goal", "goalnote", "rating", "assessment", "task", "review")}
        category = habits.CreateCategory(habits_service_pb2.CreateCategoryRequest(name=texts["cat"]), metadata=t,
                                         timeout=RPC_TIMEOUT)
        habit = habits.CreateHabit(habits_service_pb2.CreateHabitRequest(
            name=texts["habit"], category_id=category.id, weekly_target=3), metadata=t, timeout=RPC_TIMEOUT)
        entry = habits.MarkHabitDone(habits_service_pb2.MarkHabitDoneRequest(habit_id=habit.id), metadata=t,
                                     timeout=RPC_TIMEOUT)
        goal = goals.CreateGoal(goals_service_pb2.CreateGoalRequest(
            title=texts["goal"], description=texts["goalnote"], type=goals_resources_pb2.GOAL_TYPE_COUNT,
            target=goals_resources_pb2.GoalTarget(value=10), horizon=goals_resources_pb2.HORIZON_ONGOING,
            category_id=category.id, habit_ids=[habit.id]), metadata=t, timeout=RPC_TIMEOUT)
        rating = goals.CreateGoal(goals_service_pb2.CreateGoalRequest(
            title=texts["rating"], type=goals_resources_pb2.GOAL_TYPE_RATING,
            target=goals_resources_pb2.GoalTarget(value=4, rating_scale=5),
            horizon=goals_resources_pb2.HORIZON_TWELVE_WEEKS), metadata=t, timeout=RPC_TIMEOUT)
        assessment = goals.AddAssessment(goals_service_pb2.AddAssessmentRequest(
            goal_id=rating.id, value=3, note=texts["assessment"]), metadata=t, timeout=RPC_TIMEOUT)
        week = goals.GetPlanningView(goals_service_pb2.GetPlanningViewRequest(), metadata=t, timeout=RPC_TIMEOUT).week
        task = goals.CreateTask(goals_service_pb2.CreateTaskRequest(title=texts["task"], week=week, goal_id=goal.id),
                                metadata=t, timeout=RPC_TIMEOUT)
        review = goals.CreateReview(goals_service_pb2.CreateReviewRequest(
            type=goals_resources_pb2.REVIEW_TYPE_TWELVE_WEEK, note=texts["review"],
            ratings=[goals_resources_pb2.CategoryRating(category_id=category.id, rating=7)]), metadata=t,
            timeout=RPC_TIMEOUT)
        # A pending friend request from this person to a third account.
        third = Person(test_case, label + "x", resources=False)
        request = social.SendFriendRequest(social_service_pb2.SendFriendRequestRequest(username=third.username),
                                           metadata=t, timeout=RPC_TIMEOUT)
        self.ids.update(category=category.id, habit=habit.id, entry=entry.id, goal=goal.id, rating_goal=rating.id,
                        assessment=assessment.id, task=task.id, review=review.id, request=request.id)
        self.texts = texts
        self.markers += list(texts.values())
        self.week = (week.year, week.week)


def allowed(plan, person):
    """The person's private text a call under `plan` must not return (all of it but what the plan reveals)."""
    revealed = {getattr(person, attribute) for attribute in plan.reveals}
    return [marker for marker in person.markers if marker not in revealed]


class Env:
    """What plans read: A (the victim), B (the attacker), today and this week."""

    def __init__(self, a, b):
        self.a, self.b = a, b
        self.week = a.week
        self.today = datetime.datetime.now(datetime.timezone.utc).date()


def build_request(method, plan, env, owners):
    """The request of `method` whose id paths name the resources of `owners[path]` (a Person; a creates field owned
    by B gets a new id), with the plan's other fields set."""
    request = SYMBOLS.GetSymbol(method.input_type.full_name)()
    if plan.extra:
        plan.extra(request, env)
    rivals = set()
    for path, kind in id_paths(method.input_type):
        if path in rivals:
            continue
        owner = owners(path)
        kind = plan.kinds.get(path, plan.kinds.get(kind, kind))
        if owner is env.b and path == plan.creates:
            value = str(uuid.uuid4())
        else:
            value = owner.ids[kind]
        set_path(request, path, value)
        rivals |= oneof_rivals(method.input_type, path)
    if plan.after:
        plan.after(request, env)
    return request


# MARK: Tokens an attacker could present

def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def tampered(token, user_id):
    """The token with its subject replaced by `user_id`, signature kept."""
    header, payload, signature = token.split(".")
    claims = json.loads(unb64url(payload))
    claims["sub"] = user_id
    return "%s.%s.%s" % (header, b64url(json.dumps(claims, separators=(",", ":")).encode()), signature)


def resigned(token, **changes):
    """The token with `changes` to its claims, signed again with auth's real signing key: read sealed from auth's
    table (as auth's role) and opened with the key-encryption key the test stack runs with."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    header, payload, _ = token.split(".")
    key_id = json.loads(unb64url(header))["kid"]
    sealed = base64.b64decode(service_rows(
        "auth", "SELECT encode(sealed_private_key, 'base64') FROM signing_keys WHERE key_id = :'user'", key_id))
    seed = AESGCM(base64.b64decode(KEY_ENCRYPTION_KEY)).decrypt(sealed[:12], sealed[12:], key_id.encode())
    claims = json.loads(unb64url(payload))
    claims.update(changes)
    signing_input = "%s.%s" % (header, b64url(json.dumps(claims, separators=(",", ":")).encode()))
    signature = Ed25519PrivateKey.from_private_bytes(seed).sign(signing_input.encode())
    return "%s.%s" % (signing_input, b64url(signature))


def internal_credential(secret, path, caller, user_id=None, issued_at=None):
    """The internal credential metadata (Shared/InternalCredential) for a call of `path`, signed with `secret`."""
    issued_at = str(int(issued_at if issued_at is not None else time.time()))
    message = "\n".join(["v1", caller, user_id or "", "", "", issued_at, path]).encode()
    signature = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    metadata = [("x-habitflow-caller", caller), ("x-habitflow-issued-at", issued_at),
                ("x-habitflow-internal-auth", signature)]
    if user_id:
        metadata.append(("x-habitflow-user-id", user_id))
    return tuple(metadata)


def internal_request(method):
    """A request of an internal method naming a random (never existing) user, event or resource."""
    request = SYMBOLS.GetSymbol(method.input_type.full_name)()

    def fill(message, depth):
        for field in message.DESCRIPTOR.fields:
            if field.containing_oneof is not None and message.WhichOneof(field.containing_oneof.name):
                continue
            if field.type == descriptor.FieldDescriptor.TYPE_STRING and (
                    field.name == "id" or field.name.endswith("_id") or field.name.endswith("_ids")):
                if field.label == descriptor.FieldDescriptor.LABEL_REPEATED:
                    getattr(message, field.name).append(str(uuid.uuid4()))
                else:
                    setattr(message, field.name, str(uuid.uuid4()))
            elif field.type == descriptor.FieldDescriptor.TYPE_STRING and field.name == "type":
                setattr(message, field.name, "habitflow.events.v1.SecurityProbe")
            elif (field.type == descriptor.FieldDescriptor.TYPE_MESSAGE and depth < 2
                  and field.label != descriptor.FieldDescriptor.LABEL_REPEATED
                  and field.message_type.full_name.startswith("habitflow.")):
                fill(getattr(message, field.name), depth + 1)

    fill(request, 0)
    return request


def reflected_services(channel):
    reflection = channel.stream_stream(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
    responses = list(reflection(iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                                timeout=RPC_TIMEOUT))
    return {service.name for service in responses[0].list_services_response.service}


class AuthorizationMatrix(unittest.TestCase):
    """Every public RPC under five attacks, every internal RPC under three."""

    @classmethod
    def setUpClass(cls):
        # The matrix makes hundreds of calls a second from one address: the gateway's limits would refuse some
        # (RESOURCE_EXHAUSTED is not what is under test here). Mail goes to a sink, as it goes to SMTP anywhere but a
        # local stack (whose auth writes each mail as a file).
        cls.mail = SMTPSink()
        cls.addClassCleanup(cls.mail.close)
        start_stack(cls, log_level="trace", extra_env={
            "HABITFLOW_GATEWAY_ADDRESS_RATE_LIMIT": "100000", "HABITFLOW_GATEWAY_ADDRESS_RATE_BURST": "100000",
            "HABITFLOW_GATEWAY_ACCOUNT_RATE_LIMIT": "100000", "HABITFLOW_GATEWAY_ACCOUNT_RATE_BURST": "100000",
            "HABITFLOW_GATEWAY_EXPORT_INTERVAL_MS": "1", "HABITFLOW_SMTP_HOST": "127.0.0.1",
            "HABITFLOW_SMTP_PORT": str(cls.mail.port)})

    def test_every_public_rpc_has_a_plan(self):
        known = {method_path(method) for method in public_methods()}
        self.assertEqual(sorted(known - set(PLANS)), [], "public RPCs the matrix does not know how to attack")
        self.assertEqual(sorted(set(PLANS) - known), [], "plans for RPCs that no longer exist")
        # Every service the gateway serves (reflection) is one the matrix enumerates.
        served = reflected_services(self.channel) - SIDE_SERVICES
        enumerated = {module.DESCRIPTOR.services_by_name[name].full_name for module, name in PUBLIC_SERVICES}
        self.assertEqual(served, enumerated)
        for method in public_methods():
            id_paths(method.input_type)  # raises for an id of an unknown kind

    def test_public_rpcs_refuse_other_users_and_bad_tokens(self):
        a = Person(self, "a")
        b = Person(self, "b")
        env = Env(a, b)
        deleted = self.deleted_account_token()
        now = int(time.time())
        attacks = {
            "nobody": (),
            "tampered token (subject swapped to A)": bearer(tampered(b.access_token, a.user_id)),
            "expired token (signed by auth's key, exp a day ago)": bearer(resigned(
                b.access_token, iat=now - 2 * 86400, exp=now - 86400, jti=str(uuid.uuid4()))),
            "token of a deleted account": bearer(deleted),
        }
        # The forged expired token is refused for its expiry alone: the same claims signed with a future exp pass.
        control = resigned(b.access_token, iat=now - 60, exp=now + 3600, jti=str(uuid.uuid4()))
        self.assertEqual(self.auth.GetProfile(auth_pb2.GetProfileRequest(), metadata=bearer(control),
                                              timeout=RPC_TIMEOUT).id, b.user_id)

        tried, leaks, failures, internals = {}, [], [], []

        def attempt(attack, method, request, metadata, expect, markers):
            outcome = call(self.channel, method, request, metadata)
            tried[attack] = tried.get(attack, 0) + 1
            label = "%s %s" % (attack, method_path(method))
            found = [marker for marker in markers if any(marker.encode() in blob for blob in outcome.blobs())]
            if found:
                leaks.append("%s: %s leaked %s" % (label, outcome, found))
            if outcome.code not in expect:
                failures.append("%s: expected %s, got %s" % (
                    label, "/".join(sorted(code.name for code in expect)), outcome))
            if outcome.error is not None and INTERNAL_DETAIL.search(outcome.message):
                internals.append("%s: %r" % (label, outcome.message))
            return outcome

        fresh_people = {}

        def caller_for(path, plan):
            if not plan.fresh:
                return b
            fresh_people[path] = Person(self, "f", resources=False)
            fresh = fresh_people[path]
            fresh.ids = b.ids  # the fresh caller's own ids are not needed: every id names A's
            return fresh

        # Phase 1: every RPC with A's ids everywhere (creates naming A's id last), then as the four anonymous
        # attackers; phase 2: one of A's ids among B's own; phase 3: the calls that create with A's id.
        deferred = []
        for method in public_methods():
            path = method_path(method)
            plan = PLANS[path]
            request = build_request(method, plan, env, lambda _: a)
            if plan.creates and plan.creates in dict(id_paths(method.input_type)):
                deferred.append((method, plan, request))
            else:
                caller = caller_for(path, plan)
                attempt("B with A's ids", method, request, caller.token, plan.expect, allowed(plan, a))
            for attack, metadata in attacks.items():
                expect = plan.expect if path in NO_TOKEN else {UNAUTHENTICATED}
                attempt(attack, method, request, metadata, expect, a.markers + b.markers)
            # Bytes that are no request at all: refused by whoever parses them, with nothing internal in the message.
            attempt("B with an unparseable request", method, UNPARSEABLE, b.token, {grpc.StatusCode.INTERNAL},
                    a.markers)
            for label, change, expect in plan.also:
                variant = build_request(method, plan, env, lambda _: a)
                change(variant, env)
                attempt("B, " + label, method, variant, b.token, expect, allowed(plan, a))
        for method in public_methods():
            plan = PLANS[method_path(method)]
            paths = [path for path, _ in id_paths(method.input_type)]
            if len(paths) < 2:
                continue
            for path in paths:
                if path == plan.creates:
                    continue
                request = build_request(method, plan, env, lambda p, path=path: a if p == path else b)
                attempt("B's ids but one of A's", method, request, b.token, plan.mixed.get(path, plan.expect),
                        allowed(plan, a))
        # Every create naming A's id everywhere before any that makes B a resource with one of A's ids (those refused
        # first: CreateCategory with A's id succeeds, and makes A's category id one of B's too).
        deferred.sort(key=lambda item: OK in item[1].expect)
        for method, plan, request in deferred:
            attempt("B with A's ids", method, request, b.token, plan.expect, allowed(plan, a))
        for method, plan, request in deferred:
            if len(id_paths(method.input_type)) > 1:
                request = build_request(method, plan, env, lambda p, plan=plan: a if p == plan.creates else b)
                attempt("B's ids but one of A's", method, request, b.token, plan.mixed.get(plan.creates, plan.expect),
                        allowed(plan, a))

        # A's things are all still there, unchanged, and A's session still works.
        self.assert_untouched(a)
        total = sum(tried.values())
        print("\nauthorization matrix: %d (RPC, attack) pairs tried over %d public RPCs; %d leaks; %d unexpected "
              "answers; %d messages with internal details" % (
                  total, len(PLANS), len(leaks), len(failures), len(internals)))
        for attack, count in tried.items():
            print("  %4d  %s" % (count, attack))
        # And nothing of the attacks' secrets reached a log line (every process logs at trace here; lines are written
        # in batches within 100 ms).
        time.sleep(0.5)
        secrets = {"the internal secret": self.internal_secret}
        for person in Person.created:
            for attribute in ("email", "password", "access_token", "refresh_token"):
                secrets["%s's %s" % (person.username, attribute)] = getattr(person, attribute)
        secrets.update({"the %s" % attack: value[0][1][len("Bearer "):] for attack, value in attacks.items() if value})
        lines_scanned, levels, logged = scan_logs(self.log_dir, secrets)
        print("  logs of the matrix at trace: %d lines scanned (levels %s), %d secrets looked for, %d found" % (
            sum(lines_scanned.values()), ", ".join(levels), len(secrets), len(logged)))
        for line in leaks + failures + internals + logged:
            print("  !! " + line)
        self.assertEqual(leaks, [])
        self.assertEqual(failures, [])
        self.assertEqual(internals, [])
        self.assertEqual(logged, [])

    def deleted_account_token(self):
        """The access token of an account deleted a moment ago, once the gateway refuses it (within seconds)."""
        gone = Person(self, "d", resources=False)
        self.auth.DeleteAccount(auth_pb2.DeleteAccountRequest(password=gone.password), metadata=gone.token,
                                timeout=RPC_TIMEOUT)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                self.auth.GetProfile(auth_pb2.GetProfileRequest(), metadata=gone.token, timeout=RPC_TIMEOUT)
            except grpc.RpcError as error:
                if error.code() == UNAUTHENTICATED:
                    return gone.access_token
            time.sleep(0.2)
        self.fail("the gateway still accepts the token of a deleted account")

    def assert_untouched(self, a):
        t = a.token
        self.assertEqual(self.auth.GetProfile(auth_pb2.GetProfileRequest(), metadata=t,
                                              timeout=RPC_TIMEOUT).display_name, a.display_name)
        habit = self.habits.GetHabit(habits_service_pb2.GetHabitRequest(habit_id=a.ids["habit"]), metadata=t,
                                     timeout=RPC_TIMEOUT)
        self.assertEqual((habit.name, habit.deleted, habit.category_id), (a.texts["habit"], False, a.ids["category"]))
        categories = self.habits.ListCategories(habits_service_pb2.ListCategoriesRequest(), metadata=t,
                                                timeout=RPC_TIMEOUT).categories
        self.assertIn(a.texts["cat"], [category.name for category in categories])
        goal = self.goals.GetGoal(goals_service_pb2.GetGoalRequest(goal_id=a.ids["goal"]), metadata=t,
                                  timeout=RPC_TIMEOUT)
        self.assertEqual((goal.title, goal.status, [link.habit_id for link in goal.links]),
                         (a.texts["goal"], goals_resources_pb2.GOAL_STATUS_IN_PROGRESS, [a.ids["habit"]]))
        tasks = self.goals.ListTasks(goals_service_pb2.ListTasksRequest(goal_id=a.ids["goal"]), metadata=t,
                                     timeout=RPC_TIMEOUT).tasks
        self.assertEqual([(task.id, task.title, task.completed) for task in tasks],
                         [(a.ids["task"], a.texts["task"], False)])
        reviews = self.goals.ListReviews(goals_service_pb2.ListReviewsRequest(), metadata=t, timeout=RPC_TIMEOUT)
        self.assertEqual([(review.id, review.note) for review in reviews.reviews],
                         [(a.ids["review"], a.texts["review"])])
        assessments = self.goals.ListAssessments(
            goals_service_pb2.ListAssessmentsRequest(goal_id=a.ids["rating_goal"]), metadata=t, timeout=RPC_TIMEOUT)
        self.assertEqual([item.id for item in assessments.assessments], [a.ids["assessment"]])
        requests = self.social.ListRequests(social_service_pb2.ListRequestsRequest(
            direction=social_service_pb2.DIRECTION_OUTGOING), metadata=t, timeout=RPC_TIMEOUT).requests
        self.assertEqual([(r.id, r.state) for r in requests],
                         [(a.ids["request"], social_resources_pb2.REQUEST_STATE_PENDING)])
        sessions = self.auth.ListSessions(auth_pb2.ListSessionsRequest(), metadata=t, timeout=RPC_TIMEOUT).sessions
        self.assertIn(a.ids["session"], [session.id for session in sessions])

    def test_internal_rpcs_refuse_calls_without_a_valid_credential(self):
        wrong_secret = base64.b64encode(os.urandom(24)).decode()
        # The gateway itself calls these two (its own identity is "gateway"): see Services/Gateway/README.md.
        gateway_may_call = {"/habitflow.auth.v1.AuthInternal/GetVerificationKeys",
                            "/habitflow.auth.v1.AuthInternal/CheckSession"}
        public = {module.DESCRIPTOR.services_by_name[name].full_name for module, name in PUBLIC_SERVICES}
        tried, failures = {}, []
        pool = SYMBOLS.pool
        for process in ("auth", "habits", "goals", "social"):
            channel = grpc.insecure_channel(self.stack.address(process))
            self.addCleanup(channel.close)
            internal = sorted(reflected_services(channel) - SIDE_SERVICES - public)
            self.assertTrue(internal, "%s serves no internal service?" % process)
            # The credential the test makes is right when signed with the right secret (else a refusal proves nothing).
            if process == "auth":
                method = pool.FindServiceByName("habitflow.auth.v1.AuthInternal").methods_by_name["GetVerificationKeys"]
                outcome = call(channel, method, internal_request(method),
                               internal_credential(self.internal_secret, method_path(method), "security-test"))
                self.assertEqual(outcome.code, OK, outcome)
            for service_name in internal:
                for method in pool.FindServiceByName(service_name).methods:
                    path = method_path(method)
                    request = internal_request(method)
                    attacks = [
                        ("without the internal credential", (), {UNAUTHENTICATED}),
                        ("signed with another secret",
                         internal_credential(wrong_secret, path, "habits", str(uuid.uuid4())), {UNAUTHENTICATED}),
                        ("signed as a forwarded client call (caller gateway)",
                         internal_credential(self.internal_secret, path, "gateway", str(uuid.uuid4())),
                         {OK} if path in gateway_may_call else {PERMISSION_DENIED}),
                    ]
                    for attack, metadata, expect in attacks:
                        outcome = call(channel, method, request, metadata)
                        tried[attack] = tried.get(attack, 0) + 1
                        if outcome.code not in expect:
                            failures.append("%s on %s %s: got %s" % (attack, process, path, outcome))
                    # And through the gateway, with a user's token: not routed.
                    outcome = call(self.channel, method, request, self.user_token())
                    tried["through the gateway"] = tried.get("through the gateway", 0) + 1
                    if outcome.code != grpc.StatusCode.UNIMPLEMENTED:
                        failures.append("through the gateway %s: got %s" % (path, outcome))
        print("\ninternal RPCs: %d (RPC, attack) pairs tried; %d accepted that should not be" % (
            sum(tried.values()), len(failures)))
        for attack, count in tried.items():
            print("  %4d  %s" % (count, attack))
        for line in failures:
            print("  !! " + line)
        self.assertEqual(failures, [])

    def user_token(self):
        if not hasattr(self, "_user"):
            type(self)._user = Person(self, "u", resources=False)
        return self._user.token



# MARK: Secrets in logs

# What no log line may hold whatever the values: tokens, credentials, addresses.
SECRET_PATTERNS = {
    "a JWT": re.compile(r"eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]+"),
    "an HMAC-SHA256 in hex (an internal credential)": re.compile(r"\b[0-9a-f]{64}\b"),
    "the internal credential's header": re.compile(r"x-habitflow-internal-auth"),
    "an email address": re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+"),
}


def scan_logs(log_dir, secrets):
    """Every line of every process's log, searched for the `secrets` ({label: value}) and SECRET_PATTERNS. Returns
    the lines per process, the log levels seen and what was found."""
    found, lines_scanned, levels = [], {}, set()
    for name in ("auth", "habits", "goals", "social", "gateway"):
        with open(os.path.join(log_dir, name + ".log"), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        lines_scanned[name] = len(lines)
        for number, line in enumerate(lines, 1):
            level = re.match(r"\S+ (trace|debug|info|notice|warning|error|critical) ", line)
            if level:
                levels.add(level.group(1))
            for label, value in secrets.items():
                if value in line:
                    found.append("%s.log:%d holds %s: %s" % (name, number, label, line[:300]))
            for label, pattern in SECRET_PATTERNS.items():
                if pattern.search(line):
                    found.append("%s.log:%d holds %s: %s" % (name, number, label, line[:300]))
    return lines_scanned, sorted(levels), found


class SMTPSink:
    """A mail server on loopback that keeps every message: how the tests receive auth's mail (configured as
    HABITFLOW_SMTP_HOST/PORT, as in any deployment but the local stack)."""

    def __init__(self):
        self.messages = []
        self.lock = threading.Lock()
        sink = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                self.wfile.write(b"220 sink ready\r\n")
                recipient = None
                for line in self.rfile:
                    command = line.decode("ascii", "replace").strip()
                    verb = command.split(" ")[0].upper()
                    if verb == "RCPT":
                        recipient = command.split(":", 1)[1].strip().strip("<>")
                    if verb == "DATA":
                        self.wfile.write(b"354 go ahead\r\n")
                        lines = []
                        for data in self.rfile:
                            if data == b".\r\n":
                                break
                            lines.append(data[1:] if data.startswith(b"..") else data)
                        with sink.lock:
                            sink.messages.append((recipient, b"".join(lines).decode("utf-8", "replace")))
                    if verb == "QUIT":
                        self.wfile.write(b"221 bye\r\n")
                        return
                    self.wfile.write(b"250 ok\r\n")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def token(self, recipient, subject, timeout=30):
        """The code in the newest mail to `recipient` whose text has `subject` (waits for it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                found = [text for to, text in self.messages if to == recipient and subject in text]
            if found:
                lines = found[-1].split("\r\n")
                marker = next(index for index, line in enumerate(lines) if line.startswith("or enter this code"))
                return lines[marker + 1].strip()
            time.sleep(0.1)
        raise AssertionError("no mail with %r reached %s" % (subject, recipient))


class SecretsInLogs(unittest.TestCase):
    """A full scenario with every process logging at `trace`, then every log line scanned."""

    @classmethod
    def setUpClass(cls):
        cls.mail = SMTPSink()
        cls.addClassCleanup(cls.mail.close)
        start_stack(cls, log_level="trace", extra_env={
            "HABITFLOW_SMTP_HOST": "127.0.0.1", "HABITFLOW_SMTP_PORT": str(cls.mail.port)})

    def test_no_secret_in_any_log_line(self):
        secrets = {"the internal secret": self.internal_secret}

        def keep(label, value):
            self.assertTrue(value, label)
            secrets["%s (%d)" % (label, len(secrets))] = value
            return value

        def keep_tokens(tokens):
            keep("an access token", tokens.access_token)
            keep("an access token's signature", tokens.access_token.rsplit(".", 1)[1])
            keep("a refresh token", tokens.refresh_token)
            return bearer(tokens.access_token)

        auth, habits, goals, social = self.auth, self.habits, self.goals, self.social
        suffix = uuid.uuid4().hex[:12]
        email = keep("an email", "logs-x-%s@example.com" % suffix)
        new_email = keep("an email", "logs-x2-%s@example.com" % suffix)
        y_email = keep("an email", "logs-y-%s@example.com" % suffix)
        passwords = [keep("a password", "%s password %s" % (which, suffix)) for which in ("first", "second", "third")]
        x = auth.Register(auth_pb2.RegisterRequest(email=email, username="logs_x_" + suffix, password=passwords[0]),
                          timeout=RPC_TIMEOUT)
        keep_tokens(x.tokens)
        login = auth.Login(auth_pb2.LoginRequest(email=email, password=passwords[0]), timeout=RPC_TIMEOUT)
        keep_tokens(login.tokens)
        refreshed = auth.Refresh(auth_pb2.RefreshRequest(refresh_token=login.tokens.refresh_token), timeout=RPC_TIMEOUT)
        token = keep_tokens(refreshed.tokens)
        # A refresh token used twice: auth revokes that session (and says so in its log).
        with self.assertRaises(grpc.RpcError):
            auth.Refresh(auth_pb2.RefreshRequest(refresh_token=login.tokens.refresh_token), timeout=RPC_TIMEOUT)
        token = keep_tokens(auth.Login(auth_pb2.LoginRequest(email=email, password=passwords[0]),
                                       timeout=RPC_TIMEOUT).tokens)
        auth.GetProfile(auth_pb2.GetProfileRequest(), metadata=token, timeout=RPC_TIMEOUT)
        auth.ChangePassword(auth_pb2.ChangePasswordRequest(current_password=passwords[0], new_password=passwords[1]),
                            metadata=token, timeout=RPC_TIMEOUT)
        with self.assertRaises(grpc.RpcError):
            auth.Login(auth_pb2.LoginRequest(email=email, password=passwords[0]), timeout=RPC_TIMEOUT)
        auth.RequestPasswordReset(auth_pb2.RequestPasswordResetRequest(email=email), timeout=RPC_TIMEOUT)
        reset = keep("a password reset token", self.mail.token(email, "Reset"))
        with self.assertRaises(grpc.RpcError):
            auth.ConfirmPasswordReset(
                auth_pb2.ConfirmPasswordResetRequest(token=reset[::-1], new_password=passwords[2]), timeout=RPC_TIMEOUT)
        auth.ConfirmPasswordReset(auth_pb2.ConfirmPasswordResetRequest(token=reset, new_password=passwords[2]),
                                  timeout=RPC_TIMEOUT)
        token = keep_tokens(auth.Login(auth_pb2.LoginRequest(email=email, password=passwords[2]),
                                       timeout=RPC_TIMEOUT).tokens)
        auth.RequestEmailChange(auth_pb2.RequestEmailChangeRequest(new_email=new_email, password=passwords[2]),
                                metadata=token, timeout=RPC_TIMEOUT)
        change = keep("an email change token", self.mail.token(new_email, "Confirm"))
        auth.ConfirmEmailChange(auth_pb2.ConfirmEmailChangeRequest(token=change), timeout=RPC_TIMEOUT)
        login = auth.Login(auth_pb2.LoginRequest(email=new_email, password=passwords[2]), timeout=RPC_TIMEOUT)
        token = keep_tokens(login.tokens)
        # Refused tokens: tampered, and one with a bad signature.
        for bad in (tampered(login.tokens.access_token, str(uuid.uuid4())), login.tokens.access_token[:-4] + "AAAA"):
            keep("a refused token", bad)
            with self.assertRaises(grpc.RpcError):
                habits.ListHabits(habits_service_pb2.ListHabitsRequest(), metadata=bearer(bad), timeout=RPC_TIMEOUT)

        y_password = keep("a password", "y password %s" % suffix)
        y = auth.Register(auth_pb2.RegisterRequest(email=y_email, username="logs_y_" + suffix, password=y_password),
                          timeout=RPC_TIMEOUT)
        y_token = keep_tokens(y.tokens)
        sent = social.SendFriendRequest(social_service_pb2.SendFriendRequestRequest(email=y_email), metadata=token,
                                        timeout=RPC_TIMEOUT)
        social.AcceptRequest(social_service_pb2.AcceptRequestRequest(request_id=sent.id), metadata=y_token,
                             timeout=RPC_TIMEOUT)
        habit = habits.CreateHabit(habits_service_pb2.CreateHabitRequest(name="Walk"), metadata=token,
                                   timeout=RPC_TIMEOUT)
        habits.MarkHabitDone(habits_service_pb2.MarkHabitDoneRequest(habit_id=habit.id), metadata=token,
                             timeout=RPC_TIMEOUT)
        goal = goals.CreateGoal(goals_service_pb2.CreateGoalRequest(
            title="Walk more", type=goals_resources_pb2.GOAL_TYPE_COUNT, target=goals_resources_pb2.GoalTarget(value=5),
            horizon=goals_resources_pb2.HORIZON_ONGOING, habit_ids=[habit.id]), metadata=token, timeout=RPC_TIMEOUT)
        goals.GetGoal(goals_service_pb2.GetGoalRequest(goal_id=goal.id), metadata=token, timeout=RPC_TIMEOUT)
        social.GetLeaderboard(social_service_pb2.GetLeaderboardRequest(), metadata=y_token, timeout=RPC_TIMEOUT)
        self.gateway.GetDashboard(gateway_pb2.GetDashboardRequest(), metadata=token, timeout=RPC_TIMEOUT)
        export = self.channel.unary_stream(
            "/habitflow.gateway.v1.GatewayService/ExportMyData",
            request_serializer=gateway_pb2.ExportMyDataRequest.SerializeToString,
            response_deserializer=gateway_pb2.ExportMyDataChunk.FromString)
        self.assertTrue(list(export(gateway_pb2.ExportMyDataRequest(), metadata=token, timeout=RPC_TIMEOUT)))
        # An internal call with a forged credential, straight to a service.
        forged = internal_credential(base64.b64encode(os.urandom(24)).decode(),
                                     "/habitflow.habits.v1.HabitsInternal/PurgeUser", "auth", x.user.id)
        keep("a forged internal credential", dict(forged)["x-habitflow-internal-auth"])
        with grpc.insecure_channel(self.stack.address("habits")) as channel:
            purge = channel.unary_unary("/habitflow.habits.v1.HabitsInternal/PurgeUser",
                                        request_serializer=habits_internal_pb2.PurgeUserRequest.SerializeToString,
                                        response_deserializer=habits_internal_pb2.PurgeUserResponse.FromString)
            with self.assertRaises(grpc.RpcError):
                purge(habits_internal_pb2.PurgeUserRequest(user_id=x.user.id), metadata=forged, timeout=RPC_TIMEOUT)
        auth.LogoutEverywhere(auth_pb2.LogoutEverywhereRequest(keep_current_session=True), metadata=token,
                              timeout=RPC_TIMEOUT)
        with self.assertRaises(grpc.RpcError):
            auth.DeleteAccount(auth_pb2.DeleteAccountRequest(password=passwords[0]), metadata=token,
                               timeout=RPC_TIMEOUT)
        auth.DeleteAccount(auth_pb2.DeleteAccountRequest(password=passwords[2]), metadata=token, timeout=RPC_TIMEOUT)
        auth.DeleteAccount(auth_pb2.DeleteAccountRequest(password=y_password), metadata=y_token, timeout=RPC_TIMEOUT)
        # The deletions reach every service (events), then every process stops, its log complete.
        deadline = time.monotonic() + 15
        for service in ("habits", "goals", "social"):
            while (service_rows(service, "SELECT count(*) FROM deleted_users WHERE user_id = :'user'", y.user.id) != "1"
                   and time.monotonic() < deadline):
                time.sleep(0.2)
        self.stack.stop_all()

        lines_scanned, levels, found = scan_logs(self.log_dir, secrets)
        print("\nlogs of the scenario at trace: %d lines scanned (%s), levels seen: %s; %d secrets and %d patterns "
              "looked for; %d found" % (
                  sum(lines_scanned.values()), ", ".join("%s %d" % item for item in lines_scanned.items()),
                  ", ".join(levels), len(secrets), len(SECRET_PATTERNS), len(found)))
        for line in found:
            print("  !! " + line)
        # Every process logged (the gateway a line per call at least), so the scan read something.
        self.assertTrue(all(lines_scanned.values()), lines_scanned)
        self.assertGreater(lines_scanned["gateway"], 30)
        self.assertEqual(found, [])


# MARK: TLS

class GatewayTLS(unittest.TestCase):
    """The gateway serving TLS (HABITFLOW_GATEWAY_TLS_CERT/KEY) with a certificate made here: TLS 1.3 only, ALPN h2."""

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.mkdtemp(prefix="habitflow-e2e-tls-")
        cls.addClassCleanup(shutil.rmtree, cls.folder, True)
        cls.certificate = os.path.join(cls.folder, "gateway.crt")
        cls.key = os.path.join(cls.folder, "gateway.key")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
             "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
             "-keyout", cls.key, "-out", cls.certificate], check=True, capture_output=True)
        start_stack(cls, gateway_tls=(cls.certificate, cls.key))
        cls.host, cls.port = "127.0.0.1", cls.stack.ports["gateway"]

    def context(self, alpn=("h2",), maximum=None):
        context = ssl.create_default_context(cafile=self.certificate)
        if alpn is not None:
            context.set_alpn_protocols(list(alpn))
        if maximum is not None:
            context.maximum_version = maximum
        return context

    def handshake(self, context):
        """A TLS connection to the gateway (the caller closes it); raises ssl.SSLError when refused."""
        raw = socket.create_connection((self.host, self.port), timeout=10)
        try:
            return context.wrap_socket(raw, server_hostname="localhost")
        except BaseException:
            raw.close()
            raise

    def assert_still_serving(self):
        profile = self.auth.Register(auth_pb2.RegisterRequest(
            email="tls-%s@example.com" % uuid.uuid4().hex[:12], username="tls_" + uuid.uuid4().hex[:12],
            password="correct horse tls"), timeout=RPC_TIMEOUT)
        self.assertTrue(profile.tokens.access_token)

    def test_grpc_over_tls_13_with_alpn_h2(self):
        # grpcio (BoringSSL inside) insists on ALPN h2; the channel trusts the certificate made here.
        registered = self.auth.Register(auth_pb2.RegisterRequest(
            email="tls-%s@example.com" % uuid.uuid4().hex[:12], username="tls_" + uuid.uuid4().hex[:12],
            password="correct horse tls"), timeout=RPC_TIMEOUT)
        profile = self.auth.GetProfile(auth_pb2.GetProfileRequest(), metadata=bearer(registered.tokens.access_token),
                                       timeout=RPC_TIMEOUT)
        self.assertEqual(profile.id, registered.user.id)
        with self.handshake(self.context()) as connection:
            self.assertEqual(connection.version(), "TLSv1.3")
            self.assertEqual(connection.selected_alpn_protocol(), "h2")

    def test_a_tls_12_client_is_refused(self):
        with self.assertRaises(ssl.SSLError) as caught:
            self.handshake(self.context(maximum=ssl.TLSVersion.TLSv1_2)).close()
        self.assertIn("PROTOCOL_VERSION", str(caught.exception).upper().replace(" ", "_"))
        self.assert_still_serving()

    def test_a_client_without_h2_is_refused(self):
        # Offering only HTTP/1.1: a no_application_protocol alert (RFC 7301).
        with self.assertRaises(ssl.SSLError) as caught:
            self.handshake(self.context(alpn=("http/1.1",))).close()
        self.assertIn("NO_APPLICATION_PROTOCOL", str(caught.exception).upper().replace(" ", "_"))
        # Offering no ALPN at all: the handshake completes without a protocol, then the gateway closes the connection
        # (Shared/TLS: requiresApplicationProtocol is off; the RPC server closes what did not negotiate h2).
        with self.handshake(self.context(alpn=None)) as connection:
            self.assertIsNone(connection.selected_alpn_protocol())
            connection.settimeout(10)
            try:
                self.assertEqual(connection.recv(1024), b"")
            except (ConnectionResetError, ssl.SSLError):
                pass
        self.assert_still_serving()

    def test_a_plaintext_http2_client_is_closed(self):
        preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
        with socket.create_connection((self.host, self.port), timeout=10) as connection:
            connection.sendall(preface)
            received = b""
            started = time.monotonic()
            try:
                while True:
                    data = connection.recv(4096)
                    if not data:
                        break
                    received += data
            except ConnectionResetError:
                pass
            elapsed = time.monotonic() - started
            self.assertLess(elapsed, 5)
        print("\nplaintext HTTP/2 preface on the TLS port: %d bytes back (%s), closed after %.3f s" % (
            len(received), "a TLS alert record" if received[:1] == b"\x15" else "nothing", elapsed))
        # Nothing HTTP/2 came back: at most a TLS alert record (content type 21).
        self.assertTrue(received == b"" or received[:1] == b"\x15", received[:32])
        self.assert_still_serving()

    def openssl(self, *arguments):
        command = ["openssl", "s_client", "-connect", "%s:%d" % (self.host, self.port), "-servername", "localhost",
                   "-CAfile", self.certificate, "-verify_return_error"] + list(arguments)
        result = subprocess.run(command, input=b"", capture_output=True, timeout=30)
        return result.returncode, (result.stdout + result.stderr).decode("utf-8", "replace")

    def test_openssl_s_client(self):
        status, output = self.openssl("-tls1_3", "-alpn", "h2")
        self.assertEqual(status, 0, output)
        self.assertIn("TLSv1.3", output)
        self.assertIn("ALPN protocol: h2", output)
        self.assertIn("Verify return code: 0 (ok)", output)
        status, output = self.openssl("-tls1_2", "-alpn", "h2")
        self.assertNotEqual(status, 0, output)
        self.assertIn("alert protocol version", output)
        status, output = self.openssl("-tls1_3", "-alpn", "http/1.1")
        self.assertNotEqual(status, 0, output)
        self.assertIn("no application protocol", output)
        self.assert_still_serving()


if __name__ == "__main__":
    unittest.main()
