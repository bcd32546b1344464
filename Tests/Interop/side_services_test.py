"""grpc.health.v1.Health and server reflection (v1 and v1alpha) of interop-server, driven by grpcio."""

import time
import unittest

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool

from interop_common import RPC_TIMEOUT, InteropServer, load_stubs

STUBS = None
SERVER = None

TEST_SERVICE = "grpc.testing.TestService"
HEALTH_SERVICE = "grpc.health.v1.Health"
REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"
TEST_PROTO_FILES = {"grpc/testing/test.proto", "grpc/testing/empty.proto", "grpc/testing/messages.proto"}
NOT_FOUND = grpc.StatusCode.NOT_FOUND.value[0]  # 5


def setUpModule():
    global STUBS, SERVER
    STUBS = load_stubs()
    SERVER = InteropServer().start()


def tearDownModule():
    if SERVER is not None:
        SERVER.stop()


class Base(unittest.TestCase):
    def setUp(self):
        global SERVER
        if not SERVER.alive():
            SERVER = InteropServer().start()
        self.channel = grpc.insecure_channel(SERVER.address)
        self.addCleanup(self.channel.close)


class HealthTest(Base):
    def setUp(self):
        super().setUp()
        self.stub = STUBS.health_pb2_grpc.HealthStub(self.channel)
        self.pb = STUBS.health_pb2

    def check(self, service):
        return self.stub.Check(self.pb.HealthCheckRequest(service=service), timeout=RPC_TIMEOUT)

    def test_check_server_wide_is_serving(self):
        self.assertEqual(self.check("").status, self.pb.HealthCheckResponse.SERVING)

    def test_check_test_service_is_serving(self):
        self.assertEqual(self.check(TEST_SERVICE).status, self.pb.HealthCheckResponse.SERVING)

    def test_check_unknown_service_is_not_found(self):
        with self.assertRaises(grpc.RpcError) as ctx:
            self.check("no.such.Service")
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.NOT_FOUND, ctx.exception.details())

    def test_watch_sends_serving_at_once(self):
        for service in ("", TEST_SERVICE):
            with self.subTest(service=service):
                call = self.stub.Watch(self.pb.HealthCheckRequest(service=service), timeout=RPC_TIMEOUT)
                start = time.monotonic()
                first = next(call)
                self.assertLess(time.monotonic() - start, 5.0, "first Watch response not sent at once")
                self.assertEqual(first.status, self.pb.HealthCheckResponse.SERVING)
                call.cancel()

    def test_watch_unknown_service_sends_service_unknown_and_stays_open(self):
        # health-checking.md: Watch of an unknown service answers SERVICE_UNKNOWN and does not end the call.
        call = self.stub.Watch(self.pb.HealthCheckRequest(service="no.such.Service"), timeout=RPC_TIMEOUT)
        first = next(call)
        self.assertEqual(first.status, self.pb.HealthCheckResponse.SERVICE_UNKNOWN)
        time.sleep(0.3)
        self.assertTrue(call.is_active(), "Watch ended with %s" % (call.code(),))
        call.cancel()


class ReflectionMixin:
    """Reflection checks, parameterised by the generated v1 or v1alpha modules."""

    pb = None
    pb_grpc = None

    def setUp(self):
        super().setUp()
        self.stub = self.pb_grpc.ServerReflectionStub(self.channel)

    def reflect(self, *requests):
        """Send all requests on one ServerReflectionInfo stream; one response per request, in order."""
        call = self.stub.ServerReflectionInfo(iter(requests), timeout=RPC_TIMEOUT)
        responses = list(call)
        self.assertEqual(call.code(), grpc.StatusCode.OK)
        self.assertEqual(len(responses), len(requests), responses)
        for req, resp in zip(requests, responses):
            self.assertEqual(resp.original_request, req, "original_request not echoed")
        return responses

    def listed_services(self):
        (resp,) = self.reflect(self.pb.ServerReflectionRequest(list_services=""))
        self.assertEqual(resp.WhichOneof("message_response"), "list_services_response", resp)
        return [s.name for s in resp.list_services_response.service]

    def file_descriptors(self, resp):
        self.assertEqual(resp.WhichOneof("message_response"), "file_descriptor_response", resp)
        files = []
        for raw in resp.file_descriptor_response.file_descriptor_proto:
            fd = descriptor_pb2.FileDescriptorProto()
            fd.ParseFromString(raw)
            files.append(fd)
        return files

    def assertSelfContained(self, files, must_include):
        names = [f.name for f in files]
        self.assertEqual(len(names), len(set(names)), "duplicate files: %r" % names)
        for name in must_include:
            self.assertIn(name, names)
        by_name = {f.name: f for f in files}
        for f in files:
            for dep in f.dependency:  # file names must equal the import paths so dependencies resolve
                self.assertIn(dep, by_name, "%s imports %s, which was not returned (got %r)" % (f.name, dep, names))
        # They must also build into a descriptor pool (what grpcurl and friends do with them).
        pool, added = descriptor_pool.DescriptorPool(), set()

        def add(name):
            if name in added:
                return
            for dep in by_name[name].dependency:
                add(dep)
            pool.Add(by_name[name])
            added.add(name)

        for name in by_name:
            add(name)
        return pool

    def assertErrorNotFound(self, resp):
        self.assertEqual(resp.WhichOneof("message_response"), "error_response", resp)
        self.assertEqual(resp.error_response.error_code, NOT_FOUND, resp.error_response)


class ReflectionV1Test(ReflectionMixin, Base):
    @classmethod
    def setUpClass(cls):
        cls.pb = STUBS.reflection_v1_pb2
        cls.pb_grpc = STUBS.reflection_v1_pb2_grpc

    def test_list_services(self):
        services = self.listed_services()
        for name in (TEST_SERVICE, HEALTH_SERVICE, REFLECTION_V1):
            self.assertIn(name, services)

    def test_file_containing_symbol_service(self):
        (resp,) = self.reflect(self.pb.ServerReflectionRequest(file_containing_symbol=TEST_SERVICE))
        files = self.file_descriptors(resp)
        pool = self.assertSelfContained(files, TEST_PROTO_FILES)
        service = pool.FindServiceByName(TEST_SERVICE)
        self.assertEqual(service.file.name, "grpc/testing/test.proto")
        self.assertTrue({"EmptyCall", "UnaryCall", "StreamingOutputCall", "StreamingInputCall", "FullDuplexCall",
                         "HalfDuplexCall", "UnimplementedCall"} <= {m.name for m in service.methods})
        self.assertEqual(pool.FindMethodByName(TEST_SERVICE + ".UnaryCall").input_type.full_name,
                         "grpc.testing.SimpleRequest")

    def test_file_containing_symbol_message_and_method(self):
        resp_msg, resp_method = self.reflect(
            self.pb.ServerReflectionRequest(file_containing_symbol="grpc.testing.SimpleRequest"),
            self.pb.ServerReflectionRequest(file_containing_symbol=TEST_SERVICE + ".UnaryCall"))
        pool = self.assertSelfContained(self.file_descriptors(resp_msg), {"grpc/testing/messages.proto"})
        self.assertEqual(pool.FindMessageTypeByName("grpc.testing.SimpleRequest").file.name,
                         "grpc/testing/messages.proto")
        self.assertSelfContained(self.file_descriptors(resp_method), {"grpc/testing/test.proto"})

    def test_file_by_filename(self):
        resp_test, resp_health = self.reflect(
            self.pb.ServerReflectionRequest(file_by_filename="grpc/testing/test.proto"),
            self.pb.ServerReflectionRequest(file_by_filename="grpc/health/v1/health.proto"))
        self.assertSelfContained(self.file_descriptors(resp_test), TEST_PROTO_FILES)
        pool = self.assertSelfContained(self.file_descriptors(resp_health), {"grpc/health/v1/health.proto"})
        self.assertEqual(pool.FindServiceByName(HEALTH_SERVICE).full_name, HEALTH_SERVICE)

    def test_unknown_symbol_and_file_give_not_found(self):
        bad_symbol, bad_file, good = self.reflect(
            self.pb.ServerReflectionRequest(file_containing_symbol="no.such.Symbol"),
            self.pb.ServerReflectionRequest(file_by_filename="no/such/file.proto"),
            self.pb.ServerReflectionRequest(list_services=""))
        self.assertErrorNotFound(bad_symbol)
        self.assertErrorNotFound(bad_file)
        # An error answers one request; the stream goes on serving the next.
        self.assertEqual(good.WhichOneof("message_response"), "list_services_response")


class ReflectionV1AlphaTest(ReflectionMixin, Base):
    @classmethod
    def setUpClass(cls):
        cls.pb = STUBS.reflection_v1alpha_pb2
        cls.pb_grpc = STUBS.reflection_v1alpha_pb2_grpc

    def test_list_services(self):
        services = self.listed_services()
        for name in (TEST_SERVICE, HEALTH_SERVICE, REFLECTION_V1):
            self.assertIn(name, services)

    def test_file_containing_symbol_service(self):
        (resp,) = self.reflect(self.pb.ServerReflectionRequest(file_containing_symbol=TEST_SERVICE))
        self.assertSelfContained(self.file_descriptors(resp), TEST_PROTO_FILES)


if __name__ == "__main__":
    unittest.main()
