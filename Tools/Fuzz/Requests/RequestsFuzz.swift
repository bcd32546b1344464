internal import Dispatch
internal import Foundation
internal import HabitFlowAuth
internal import HabitFlowAuthProtos
internal import HabitFlowFuzzSupport
internal import HabitFlowGatewayProtos
internal import HabitFlowGoals
internal import HabitFlowGoalsProtos
internal import HabitFlowHabits
internal import HabitFlowHabitsProtos
internal import HabitFlowLocking
internal import HabitFlowPostgres
internal import HabitFlowRPC
internal import HabitFlowServiceAPI
internal import HabitFlowServiceKit
internal import HabitFlowSocial
internal import HabitFlowSocialProtos
internal import Logging
internal import NIOCore
internal import SwiftProtobuf

// Every public request message, decoded and validated by the code that serves it: the methods of the public
// services of auth, habits, goals and social exactly as their `ServiceDefinition`s build them, called the way the
// server calls them (the bytes of one request message in, through the generated method's protobuf decoding, into
// the service's handler and its request validation). The calls carry no authenticated user and the services have
// no database (their pool points at a socket that does not exist): a call ends with `INVALID_ARGUMENT` from
// validation, or `UNAUTHENTICATED` where the handler first needs the user, or, for the few methods that reach the
// store without a user (sign-up, sign-in), with the pool's connection error. Whatever the bytes, the answer must be
// a gRPC status, never a crash. The gateway's own two requests (empty messages) are decoded only.
//
// Page tokens and cursors carry a checksum, not a signature: a client can wrap any fields in a valid token, but a
// fuzzer mutating bytes never finds the checksum. So the input may name a token to make, as text (which the fuzzer's
// mutations of numbers in text keep intact): `<field number>~<list>|<field>|<field>...`, appended to the request as
// that string field (the last value of a field is the one that counts).
//
// Input: 2 bytes (big-endian) pick the method (in order of path), then the token text (may be empty) up to a NUL
// byte, then the request message.

private let publicServices: Set<String> = [
    Habitflow_Auth_V1_AuthService.name, Habitflow_Habits_V1_HabitsService.name,
    Habitflow_Goals_V1_GoalsService.name, Habitflow_Social_V1_SocialService.name,
]

/// The public methods of the four services, in order of path.
private let methods: [ServerMethod] = {
    let logger = Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() })
    var poolConfiguration = PostgresPool.Configuration(
        connectionString: "host=/nonexistent/habitflow-fuzz dbname=habitflow connect_timeout=1")
    poolConfiguration.maximumConnections = 2
    poolConfiguration.acquireTimeout = .milliseconds(200)
    let pool = PostgresPool(configuration: poolConfiguration, logger: logger)
    var authSettings = AuthSettings(keyEncryptionKey: Array(repeating: 7, count: 32))
    authSettings.mailPollInterval = .seconds(24 * 3600)
    authSettings.maintenanceInterval = nil
    let definitions = [
        AuthServiceDefinition.make(settings: authSettings), HabitsServiceDefinition.make(),
        GoalsServiceDefinition.make(), SocialServiceDefinition.make(),
    ]
    let services = Locked<[any RPCService]>([])
    let done = DispatchSemaphore(value: 0)
    Task {
        for definition in definitions {
            var configuration = ServiceConfiguration(
                service: definition.name, port: 0, databaseURL: nil, sqlDirectory: "/nonexistent",
                internalSecret: "fuzz-internal-secret-not-for-use")
            // Nothing listens on the discard port: no call can reach another process.
            for other in ServiceConfiguration.defaultPorts.keys {
                configuration.serviceAddresses[other] = [.init(host: "127.0.0.1", port: 9)]
            }
            let runtime = ServiceRuntime(configuration: configuration, logger: logger, database: pool)
            do {
                let parts = try await definition.makeParts(runtime)
                services.withLock { $0 += parts.services }
            } catch {
                fatalError("could not make the \(definition.name) service: \(error)")
            }
        }
        done.signal()
    }
    done.wait()
    let methods = services.withLock { $0 }.filter { publicServices.contains($0.serviceName) }.flatMap(\.methods)
    expect(methods.count > 60, "only \(methods.count) public methods")
    return methods.sorted { $0.descriptor.path < $1.descriptor.path }
}()

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    FuzzSeeds.writeSeedsIfAsked(seeds)
    _ = methods
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let choice = Int(input.uint16())
    let rest = input.rest()
    let separator = rest.firstIndex(of: 0) ?? rest.endIndex
    let payload = Array(rest[min(separator + 1, rest.endIndex)...]) + craftedToken(rest[..<separator])
    if choice % (methods.count + 2) >= methods.count {
        // The gateway's own requests: empty messages, whatever unknown fields they bring must survive a round trip.
        if let request = try? Habitflow_Gateway_V1_GetDashboardRequest(serializedBytes: payload) {
            let bytes: [UInt8]? = try? request.serializedBytes()
            let again = bytes.flatMap { try? Habitflow_Gateway_V1_GetDashboardRequest(serializedBytes: $0) }
            expect(again == request, "a request changed through a round trip")
        }
        _ = try? Habitflow_Gateway_V1_ExportMyDataRequest(serializedBytes: payload)
        return 0
    }
    call(methods[choice % (methods.count + 2)], payload)
    return 0
}

/// Calls `method` with one request message, as the server does, and checks that it ends with a gRPC status.
private func call(_ method: ServerMethod, _ payload: [UInt8]) {
    let context = ServerContext(
        method: method.descriptor, requestMetadata: [:], deadline: nil, peer: "ipv4:192.0.2.1:50000")
    let transport = OneRequestTransport(payload)
    let outcome = Locked<Result<Void, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    // Runs here until the handler first suspends; nearly every call ends before it does.
    Task.immediate {
        do {
            try await method.run(context, transport)
            outcome.withLock { $0 = .success(()) }
        } catch {
            outcome.withLock { $0 = .failure(error) }
        }
        done.signal()
    }
    done.wait()
    guard case .failure(let error) = outcome.withLock({ $0 }) else { return }
    switch error {
    case let error as RPCError:
        expect(error.code != .unknown, "\(method.descriptor.path) failed with UNKNOWN: \(error)")
    case is any RPCErrorConvertible, is PostgresError:
        break
    default:
        fatalError("\(method.descriptor.path) threw \(type(of: error)), which has no gRPC status: \(error)")
    }
}

/// One request message, then the end of the request stream; responses are dropped.
private final class OneRequestTransport: ServerCallTransport {
    private let request: Locked<ReceivedMessage?>

    init(_ payload: [UInt8]) {
        request = Locked(ReceivedMessage(payload: ByteBuffer(bytes: payload), wasCompressed: false))
    }

    func nextRequest() async throws -> ReceivedMessage? {
        request.withLock { request in
            defer { request = nil }
            return request
        }
    }

    func sendResponse(_ payload: ByteBuffer, compressed: Bool) async throws {}
    func sendInitialMetadata() async throws {}
}

// MARK: - Crafted page tokens

/// The string field that `<field number>~<list>|<field>|<field>...` describes, as protobuf bytes; none for other
/// text.
private func craftedToken(_ text: ArraySlice<UInt8>) -> [UInt8] {
    let text = String(decoding: text, as: UTF8.self)
    guard let tilde = text.firstIndex(of: "~"), let number = UInt64(text[..<tilde]), (1...536_870_911).contains(number)
    else { return [] }
    let parts = text[text.index(after: tilde)...].split(separator: "|", omittingEmptySubsequences: false)
    let token = Array(PageToken.encode(list: String(parts[0]), parts.dropFirst().map(String.init)).utf8)
    return encodeVarint(number << 3 | 2) + encodeVarint(UInt64(token.count)) + token
}

private func encodeVarint(_ value: UInt64) -> [UInt8] {
    var value = value
    var bytes: [UInt8] = []
    while value >= 0x80 {
        bytes.append(UInt8(value & 0x7F) | 0x80)
        value >>= 7
    }
    return bytes + [UInt8(value)]
}

// MARK: - Seeds

/// A request for every public method with no fields set, and requests that pass or nearly pass validation for the
/// methods with rules (written as proto JSON, sent as binary).
private func seeds() -> [String: [UInt8]] {
    func input(_ path: String, _ message: [UInt8], token: String = "") -> [UInt8] {
        guard let index = methods.firstIndex(where: { $0.descriptor.path == path }) else {
            fatalError("no public method \(path)")
        }
        var builder = FuzzInputBuilder()
        builder.uint16(UInt16(index))
        builder.bytes(Array(token.utf8) + [0])
        builder.bytes(message)
        return builder.bytes
    }
    func request<M: SwiftProtobuf.Message>(_ type: M.Type, _ json: String) -> [UInt8] {
        do {
            return try M(jsonString: json).serializedBytes()
        } catch {
            fatalError("seed \(json) is not a \(M.protoMessageName): \(error)")
        }
    }
    var seeds: [String: [UInt8]] = [:]
    for method in methods {
        seeds["empty-\(method.descriptor.method)-\(method.descriptor.service.split(separator: ".")[1])"] =
            input(method.descriptor.path, [])
    }
    let id = "3f2b8c1e-6d4a-4e1f-9c7b-2a5d8e9f0b1c"
    let other = "8a1d2c3b-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    let auth = "/habitflow.auth.v1.AuthService/"
    let habits = "/habitflow.habits.v1.HabitsService/"
    let goals = "/habitflow.goals.v1.GoalsService/"
    let social = "/habitflow.social.v1.SocialService/"
    let examples: [(name: String, path: String, token: String, message: [UInt8])] = [
        ("register", auth + "Register", "",
            request(
                Habitflow_Auth_V1_RegisterRequest.self,
                #"{"email":"ana@example.com","username":"ana.k","# +
                #""password":"correct horse battery staple","timeZone":"Europe/Berlin","# +
                #""displayName":"Ana 🌱","device":{"deviceId":"\#(id)","deviceName":"Ana's iPhone"}}"#)),
        ("register-bad", auth + "Register", "",
            request(
                Habitflow_Auth_V1_RegisterRequest.self,
                #"{"email":"not an email","username":"a","password":"short","timeZone":"GMT+2","# +
                #""displayName":"\u0007"}"#)),
        ("login", auth + "Login", "",
            request(Habitflow_Auth_V1_LoginRequest.self, #"{"username":"ana.k","password":"pw"}"#)),
        ("password-reset", auth + "RequestPasswordReset", "",
            request(Habitflow_Auth_V1_RequestPasswordResetRequest.self, #"{"email":"ana@example.com"}"#)),
        ("confirm-reset", auth + "ConfirmPasswordReset", "",
            request(
                Habitflow_Auth_V1_ConfirmPasswordResetRequest.self,
                #"{"token":"abc","newPassword":"another long password"}"#)),
        ("update-profile", auth + "UpdateProfile", "",
            request(
                Habitflow_Auth_V1_UpdateProfileRequest.self,
                #"{"user":{"username":"ana_k","displayName":"Ana","timeZone":"Asia/Kolkata"},"# +
                #""updateMask":"username,displayName,timeZone"}"#)),
        ("list-sessions", auth + "ListSessions", "2~sessions|\(id)",
            request(Habitflow_Auth_V1_ListSessionsRequest.self, #"{"pageSize":10}"#)),
        ("social-login", auth + "SocialLogin", "",
            request(
                Habitflow_Auth_V1_SocialLoginRequest.self,
                #"{"credential":{"provider":"SOCIAL_PROVIDER_GOOGLE","# +
                #""idToken":"eyJhbGciOiJSUzI1NiJ9.e30.c2ln","nonce":"n"},"timeZone":"UTC"}"#)),
        ("create-category", habits + "CreateCategory", "",
            request(Habitflow_Habits_V1_CreateCategoryRequest.self, #"{"categoryId":"\#(id)","name":"Health 💪"}"#)),
        ("reorder-categories", habits + "ReorderCategories", "",
            request(
                Habitflow_Habits_V1_ReorderCategoriesRequest.self,
                #"{"categoryIds":["\#(id)","\#(other)","\#(id)"]}"#)),
        ("create-habit", habits + "CreateHabit", "",
            request(
                Habitflow_Habits_V1_CreateHabitRequest.self,
                #"{"habitId":"\#(id)","name":"Run","categoryId":"\#(other)","weeklyTarget":3,"# +
                #""unit":"km"}"#)),
        ("update-habit", habits + "UpdateHabit", "",
            request(
                Habitflow_Habits_V1_UpdateHabitRequest.self,
                #"{"habit":{"id":"\#(id)","name":"Run far","weeklyTarget":22},"updateMask":"name,"# +
                #"weeklyTarget,color"}"#)),
        ("mark-done", habits + "MarkHabitDone", "",
            request(
                Habitflow_Habits_V1_MarkHabitDoneRequest.self,
                #"{"habitId":"\#(id)","date":{"year":2026,"month":2,"day":29},"value":2.5,"# +
                #""entryId":"\#(other)"}"#)),
        ("list-entries", habits + "ListEntries", "5~entries|20480|77",
            request(
                Habitflow_Habits_V1_ListEntriesRequest.self,
                #"{"habitId":"\#(id)","startDate":{"year":2026,"month":1,"day":1},"# +
                #""endDate":{"year":2026,"month":12,"day":31},"pageSize":100}"#)),
        ("list-habits", habits + "ListHabits", "3~habits|1042",
            request(Habitflow_Habits_V1_ListHabitsRequest.self, #"{"pageSize":-1}"#)),
        ("get-week", habits + "GetWeek", "",
            request(Habitflow_Habits_V1_GetWeekRequest.self, #"{"week":{"year":2026,"week":53}}"#)),
        ("score-history", habits + "GetScoreHistory", "",
            request(
                Habitflow_Habits_V1_GetScoreHistoryRequest.self,
                #"{"startWeek":{"year":2020,"week":1},"endWeek":{"year":2026,"week":3}}"#)),
        ("habits-changes", habits + "ListChanges", "1~changes|1234|2|\(id)",
            request(Habitflow_Habits_V1_ListChangesRequest.self, #"{"pageSize":500}"#)),
        ("create-goal", goals + "CreateGoal", "",
            request(
                Habitflow_Goals_V1_CreateGoalRequest.self,
                #"{"goalId":"\#(id)","title":"Run a marathon","description":"By autumn","icon":"🏃","# +
                #""type":"GOAL_TYPE_QUANTITY","target":{"value":500,"unit":"km"},"# +
                #""horizon":"HORIZON_TWELVE_WEEKS","startDate":{"year":2026,"month":1,"day":5},"# +
                #""habitIds":["\#(other)"]}"#)),
        ("create-goal-levels", goals + "CreateGoal", "",
            request(
                Habitflow_Goals_V1_CreateGoalRequest.self,
                #"{"title":"Spanish","type":"GOAL_TYPE_LEVEL","target":{"value":3,"levels":["A1","A2","# +
                #""B1"]},"horizon":"HORIZON_FIVE_YEARS"}"#)),
        ("list-goals", goals + "ListGoals", "6~goals:2;;;|20",
            request(
                Habitflow_Goals_V1_ListGoalsRequest.self,
                #"{"statuses":["GOAL_STATUS_IN_PROGRESS"],"pageSize":20}"#)),
        ("add-assessment", goals + "AddAssessment", "",
            request(
                Habitflow_Goals_V1_AddAssessmentRequest.self,
                #"{"goalId":"\#(id)","date":{"year":2026,"month":3,"day":1},"value":4,"note":"better"}"#)),
        ("list-assessments", goals + "ListAssessments", "3~assessments:\(id)|20000|3",
            request(Habitflow_Goals_V1_ListAssessmentsRequest.self, #"{"goalId":"\#(id)"}"#)),
        ("list-reviews", goals + "ListReviews", "2~reviews|20000|3",
            request(Habitflow_Goals_V1_ListReviewsRequest.self, #"{"pageSize":5}"#)),
        ("create-review", goals + "CreateReview", "",
            request(
                Habitflow_Goals_V1_CreateReviewRequest.self,
                #"{"type":"REVIEW_TYPE_TWELVE_WEEK","date":{"year":2026,"month":3,"day":29},"# +
                #""ratings":[{"categoryId":"\#(id)","rating":7}],"note":"ok"}"#)),
        ("create-task", goals + "CreateTask", "",
            request(
                Habitflow_Goals_V1_CreateTaskRequest.self,
                #"{"title":"Buy shoes","week":{"year":2026,"week":10},"goalId":"\#(id)"}"#)),
        ("list-tasks", goals + "ListTasks", "4~tasks:20518:|20520|1",
            request(Habitflow_Goals_V1_ListTasksRequest.self, #"{"week":{"year":2026,"week":10}}"#)),
        ("goal-history", goals + "GetGoalHistory", "",
            request(
                Habitflow_Goals_V1_GetGoalHistoryRequest.self,
                #"{"goalId":"\#(id)","startWeek":{"year":1,"week":1},"endWeek":{"year":9999,"# +
                #""week":52}}"#)),
        ("goals-changes", goals + "ListChanges", "1~changes|0|1|00000000-0000-0000-0000-000000000000",
            request(Habitflow_Goals_V1_ListChangesRequest.self, #"{}"#)),
        ("friend-request", social + "SendFriendRequest", "",
            request(
                Habitflow_Social_V1_SendFriendRequestRequest.self,
                #"{"requestId":"\#(id)","email":"bo@example.com"}"#)),
        ("list-requests", social + "ListRequests", "4~requests:incoming:|40",
            request(Habitflow_Social_V1_ListRequestsRequest.self, #"{"direction":"DIRECTION_INCOMING"}"#)),
        ("list-friends", social + "ListFriends", "2~friends|100",
            request(Habitflow_Social_V1_ListFriendsRequest.self, #"{"pageSize":50}"#)),
        ("sharing", social + "UpdateSharingSettings", "",
            request(
                Habitflow_Social_V1_UpdateSharingSettingsRequest.self,
                #"{"settings":{"shareWeeklyScore":true,"sharedCategoryIds":["\#(id)"]},"# +
                #""updateMask":"shareWeeklyScore,sharedCategoryIds"}"#)),
        ("leaderboard", social + "GetLeaderboard", "2~leaderboard|10",
            request(Habitflow_Social_V1_GetLeaderboardRequest.self, #"{"pageSize":10}"#)),
        ("social-changes", social + "ListChanges", "1~changes|99|1|\(id)",
            request(Habitflow_Social_V1_ListChangesRequest.self, #"{}"#)),
    ]
    for example in examples { seeds[example.name] = input(example.path, example.message, token: example.token) }
    var gateway = FuzzInputBuilder()
    gateway.uint16(UInt16(methods.count))
    gateway.bytes([0, 0x0A, 0x03, 0x61, 0x62, 0x63])  // an unknown field 1: "abc"
    seeds["gateway-dashboard"] = gateway.bytes
    return seeds
}
