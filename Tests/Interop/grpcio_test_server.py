"""A grpc.testing.TestService on grpcio (a server we did not write), for our Swift client's interop tests.

    /usr/bin/python3 Tests/Interop/grpcio_test_server.py [--port 0]

Prints `listening on 127.0.0.1:PORT` once it accepts calls, and serves until stdin closes or it is killed. It behaves
as grpc/grpc doc/interop-test-descriptions.md asks of a server: payloads of the requested sizes, echoed metadata
(`x-grpc-test-echo-initial`, `x-grpc-test-echo-trailing-bin`), echoed statuses, compressed responses on request.
Stubs come from interop_common.load_stubs (generated at run time; the `grpc.testing` package collision is handled there).
"""

import argparse
import sys
import threading
import time
from concurrent import futures

import grpc

import interop_common

stubs = interop_common.load_stubs()
messages_pb2 = stubs.messages_pb2
empty_pb2 = stubs.empty_pb2
test_pb2_grpc = stubs.test_pb2_grpc


def _echo_metadata(context):
    initial = []
    trailing = []
    for key, value in context.invocation_metadata():
        if key == "x-grpc-test-echo-initial":
            initial.append((key, value))
        elif key == "x-grpc-test-echo-trailing-bin":
            trailing.append((key, value))
    if initial:
        context.send_initial_metadata(initial)
    if trailing:
        context.set_trailing_metadata(trailing)


def _maybe_echo_status(request, context):
    if request.HasField("response_status") and request.response_status.code != 0:
        context.abort(grpc.StatusCode(_code(request.response_status.code)), request.response_status.message)


def _code(number):
    for code in grpc.StatusCode:
        if code.value[0] == number:
            return code.value
    return grpc.StatusCode.UNKNOWN.value


def _payload(size):
    return messages_pb2.Payload(body=b"\0" * size)


class TestService(test_pb2_grpc.TestServiceServicer):
    def EmptyCall(self, request, context):
        _echo_metadata(context)
        return empty_pb2.Empty()

    def UnaryCall(self, request, context):
        _echo_metadata(context)
        _maybe_echo_status(request, context)
        if request.response_compressed.value:
            context.set_compression(grpc.Compression.Gzip)
        return messages_pb2.SimpleResponse(payload=_payload(request.response_size))

    CacheableUnaryCall = UnaryCall

    def StreamingOutputCall(self, request, context):
        _echo_metadata(context)
        _maybe_echo_status(request, context)
        for parameters in request.response_parameters:
            if parameters.interval_us:
                time.sleep(parameters.interval_us / 1e6)
            yield messages_pb2.StreamingOutputCallResponse(payload=_payload(parameters.size))

    def StreamingInputCall(self, request_iterator, context):
        _echo_metadata(context)
        total = sum(len(request.payload.body) for request in request_iterator)
        return messages_pb2.StreamingInputCallResponse(aggregated_payload_size=total)

    def FullDuplexCall(self, request_iterator, context):
        _echo_metadata(context)
        for request in request_iterator:
            _maybe_echo_status(request, context)
            for parameters in request.response_parameters:
                if parameters.interval_us:
                    time.sleep(parameters.interval_us / 1e6)
                yield messages_pb2.StreamingOutputCallResponse(payload=_payload(parameters.size))

    def HalfDuplexCall(self, request_iterator, context):
        _echo_metadata(context)
        buffered = list(request_iterator)
        for request in buffered:
            for parameters in request.response_parameters:
                yield messages_pb2.StreamingOutputCallResponse(payload=_payload(parameters.size))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    arguments = parser.parse_args()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32),
                         options=[("grpc.max_receive_message_length", 16 << 20)])
    test_pb2_grpc.add_TestServiceServicer_to_server(TestService(), server)
    port = server.add_insecure_port("127.0.0.1:%d" % arguments.port)
    server.start()
    print("listening on 127.0.0.1:%d" % port, flush=True)
    # Serve until the parent closes our stdin (or kills us): no orphan when a test run dies.
    threading.Thread(target=lambda: (sys.stdin.read(), server.stop(0)), daemon=True).start()
    server.wait_for_termination()


if __name__ == "__main__":
    main()
