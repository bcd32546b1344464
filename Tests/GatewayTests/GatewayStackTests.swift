import HabitFlowInternalCredential
import Foundation
import HabitFlowAuthProtos
import HabitFlowGRPCSideServiceProtos
import HabitFlowGateway
import HabitFlowGatewayProtos
import HabitFlowGoalsProtos
import HabitFlowHabitsProtos
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowServiceKit
import HabitFlowStackTestSupport
import HabitFlowTestSupport
import Testing

/// The gateway over the real auth, habits and goals services and the test Postgres, called as a client would.
@Suite struct GatewayStackTests {
    struct Clients {
        let channel: RPCChannel
        var auth: Habitflow_Auth_V1_AuthService.Client { .init(transport: channel) }
        var habits: Habitflow_Habits_V1_HabitsService.Client { .init(transport: channel) }
        var goals: Habitflow_Goals_V1_GoalsService.Client { .init(transport: channel) }
        var gateway: Habitflow_Gateway_V1_GatewayService.Client { .init(transport: channel) }
    }

    static func bearer(_ token: String) -> CallOptions {
        var options = CallOptions()
        options.metadata.add("authorization", "Bearer \(token)")
        return options
    }

    /// Registers a fresh account through the gateway; returns its tokens.
    static func register(_ clients: Clients, device: String = "test device") async throws -> (
        TestAccount, Habitflow_Auth_V1_RegisterResponse
    ) {
        let account = TestAccount()
        let response = try await clients.auth.register(
            .with {
                $0.email = account.email
                $0.username = account.username
                $0.password = account.password
                $0.timeZone = "Europe/Berlin"
                $0.device.deviceName = device
            })
        return (account, response)
    }

    @Test func aUsersDayThroughTheGateway() async throws {
        let stack = try await TestStack.start()
        let clients = Clients(channel: try stack.gatewayChannel())
        let (account, registered) = try await Self.register(clients)
        #expect(!registered.tokens.accessToken.isEmpty)

        let login = try await clients.auth.login(
            .with {
                $0.email = account.email
                $0.password = account.password
            })
        let options = Self.bearer(login.tokens.accessToken)
        #expect(try await clients.auth.getProfile(.init(), options: options).email == account.email)

        let read = try await clients.habits.createHabit(
            .with {
                $0.name = "Read"
                $0.weeklyTarget = 2
            }, options: options)
        let run = try await clients.habits.createHabit(
            .with {
                $0.name = "Run"
                $0.weeklyTarget = 3
            }, options: options)
        _ = try await clients.habits.markHabitDone(.with { $0.habitID = read.id }, options: options)
        _ = try await clients.habits.markHabitDone(
            .with {
                $0.habitID = read.id
                $0.entryID = UUID().uuidString.lowercased()
            }, options: options)
        _ = try await clients.habits.markHabitDone(.with { $0.habitID = run.id }, options: options)

        let week = try await clients.habits.getWeek(.init(), options: options)
        #expect(week.habits.map(\.progress) == ["2/2", "1/3"])
        #expect(week.score.display == "50% (1/2 habits)")

        let dashboard = try await clients.gateway.getDashboard(.init(), options: options)
        #expect(dashboard.weekName == week.weekName)
        #expect(dashboard.weeklyScore.display == "50% (1/2 habits)")
        #expect(dashboard.habits.map(\.name) == ["Read", "Run"])
        #expect(dashboard.habits.map(\.progress) == ["2/2", "1/3"])
        #expect(dashboard.habits.map(\.met) == [true, false])
        #expect(dashboard.categoryScores.map(\.categoryName).contains("Uncategorized"))
        // Goals answered (this user has none); the leaderboard has this user alone, first.
        #expect(dashboard.goals.isEmpty)
        #expect(dashboard.missingParts.isEmpty)
        #expect(dashboard.leaderboard.top.map(\.rank) == [1])
        #expect(dashboard.leaderboard.me.userID == registered.user.id)
        #expect(dashboard.leaderboard.me.display == "50% (1/2 habits)")
        #expect(dashboard.leaderboard.total == 1)
        #expect(!dashboard.timeZone.isEmpty)

        // Errors of a service come through with their details.
        let invalid = await #expect(throws: RPCError.self) {
            _ = try await clients.habits.createHabit(.with { $0.name = "" }, options: options)
        }
        #expect(invalid?.code == .invalidArgument)
        #expect(invalid?.fieldViolations.first?.field == "name")

        // Request ids: made up when absent, kept when given, returned either way.
        let generated = try await clients.auth.getProfileWithMetadata(.init(), options: options)
        #expect(UUID(uuidString: generated.initialMetadata["x-request-id"] ?? "") != nil)
        var withID = options
        withID.metadata.add("x-request-id", "client-chosen-42")
        let echoed = try await clients.auth.getProfileWithMetadata(.init(), options: withID)
        #expect(echoed.initialMetadata["x-request-id"] == "client-chosen-42")

        await clients.channel.close()
        await stack.stop()
    }

    /// A weekly goal linked to a habit, made through the gateway: the dashboard's goals part shows its progress, and
    /// only the goals the user is working on.
    @Test func goalsThroughTheGatewayAndOnTheDashboard() async throws {
        let stack = try await TestStack.start()
        let clients = Clients(channel: try stack.gatewayChannel())
        let (_, registered) = try await Self.register(clients)
        let options = Self.bearer(registered.tokens.accessToken)

        let run = try await clients.habits.createHabit(
            .with {
                $0.name = "Run"
                $0.weeklyTarget = 3
            }, options: options)
        let goal = try await clients.goals.createGoal(
            .with {
                $0.title = "Run three times a week"
                $0.icon = "🏃"
                $0.type = .weeklyHabit
                $0.target.value = 3
                $0.horizon = .fourWeeks
                $0.habitIds = [run.id]
            }, options: options)
        #expect(goal.ownerID == registered.user.id)
        #expect(goal.status == .notStarted)
        #expect(goal.progress.display == "0/3")
        #expect(goal.links.map(\.habitID) == [run.id])
        let other = try await clients.goals.createGoal(
            .with {
                $0.title = "Read 12 books"
                $0.type = .count
                $0.target.value = 12
                $0.horizon = .ongoing
            }, options: options)
        // A goal the user is done with is not on the dashboard.
        let archived = try await clients.goals.createGoal(
            .with {
                $0.title = "An old goal"
                $0.type = .count
                $0.target.value = 5
                $0.horizon = .twelveWeeks
            }, options: options)
        _ = try await clients.goals.archiveGoal(.with { $0.goalID = archived.id }, options: options)

        _ = try await clients.habits.markHabitDone(.with { $0.habitID = run.id }, options: options)
        let read = try await clients.goals.getGoal(.with { $0.goalID = goal.id }, options: options)
        #expect(read.progress.display == "1/3")
        #expect(read.status == .inProgress)

        // A review rates a category: its latest rating joins the dashboard next to the category scores.
        let categories = try await clients.habits.listCategories(.init(), options: options).categories
        let health = try #require(categories.first { $0.name == "Health" })
        let review = try await clients.goals.createReview(
            .with {
                $0.type = .twelveWeek
                $0.ratings = [.with {
                    $0.categoryID = health.id
                    $0.rating = 7
                }]
            }, options: options)

        let dashboard = try await clients.gateway.getDashboard(.init(), options: options)
        #expect(dashboard.missingParts.isEmpty)
        #expect(dashboard.habits.map(\.progress) == ["1/3"])
        #expect(dashboard.categoryRatings.map(\.categoryID) == [health.id])
        let categoryRating = try #require(dashboard.categoryRatings.first)
        #expect(categoryRating.categoryName == "Health" && categoryRating.rating == 7)
        #expect(
            [categoryRating.date.year, categoryRating.date.month, categoryRating.date.day]
                == [review.date.year, review.date.month, review.date.day])
        #expect(Set(dashboard.goals.map(\.goalID)) == [goal.id, other.id])
        let card = try #require(dashboard.goals.first { $0.goalID == goal.id })
        #expect(card.title == "Run three times a week")
        #expect(card.icon == "🏃")
        #expect(card.categoryID == read.categoryID)
        #expect(card.status == .inProgress)
        #expect(card.display == "1/3")
        #expect(card.percent == 33)
        #expect(card.percent == read.progress.percent)
        #expect(card.overallPercent == read.progress.overallPercent)
        #expect(!card.thisWeekMet)
        #expect(!card.shared)
        let otherCard = try #require(dashboard.goals.first { $0.goalID == other.id })
        #expect(otherCard.status == .notStarted)
        #expect(otherCard.display == other.progress.display)

        // Goals' own errors come through the gateway with their details.
        let invalid = await #expect(throws: RPCError.self) {
            _ = try await clients.goals.createGoal(
                .with {
                    $0.type = .count
                    $0.target.value = 5
                    $0.horizon = .fourWeeks
                }, options: options)
        }
        #expect(invalid?.code == .invalidArgument)
        #expect(invalid?.fieldViolations.map(\.field) == ["title"])

        await clients.channel.close()
        await stack.stop()
    }

    /// With goals stopped, goal calls fail `UNAVAILABLE` at once and the dashboard still answers, without its goals
    /// part, which `missing_parts` names.
    @Test func theDashboardWithoutGoals() async throws {
        let stack = try await TestStack.start()
        let clients = Clients(channel: try stack.gatewayChannel())
        let (_, registered) = try await Self.register(clients)
        let options = Self.bearer(registered.tokens.accessToken)
        let habit = try await clients.habits.createHabit(.with { $0.name = "Stretch" }, options: options)
        _ = try await clients.goals.createGoal(
            .with {
                $0.title = "Stretch every week"
                $0.type = .recurringTask
                $0.horizon = .eightWeeks
                $0.habitIds = [habit.id]
            }, options: options)
        #expect(try await clients.gateway.getDashboard(.init(), options: options).goals.count == 1)

        await stack.goals.shutdown()
        var once = options
        once.idempotent = false
        let started = ContinuousClock.now
        let unavailable = await #expect(throws: RPCError.self) {
            _ = try await clients.goals.listGoals(.init(), options: once)
        }
        #expect(unavailable?.code == .unavailable)
        #expect(ContinuousClock.now - started < .seconds(5))

        let dashboard = try await clients.gateway.getDashboard(.init(), options: options)
        #expect(dashboard.goals.isEmpty)
        #expect(dashboard.categoryRatings.isEmpty)
        #expect(dashboard.habits.map(\.name) == ["Stretch"])
        #expect(dashboard.missingParts.map(\.part) == [.goals])
        let goalsPart = try #require(dashboard.missingParts.first { $0.part == .goals })
        #expect(goalsPart.code == Int32(RPCStatusCode.unavailable.rawValue))
        #expect(goalsPart.message.contains("goals"))

        await clients.channel.close()
        await stack.stop()
    }

    @Test func callsWithoutAValidTokenAreRefused() async throws {
        let stack = try await TestStack.start()
        let clients = Clients(channel: try stack.gatewayChannel())
        let (_, registered) = try await Self.register(clients)
        let token = registered.tokens.accessToken

        func refusal(_ options: CallOptions) async -> RPCError? {
            do {
                _ = try await clients.habits.listHabits(.init(), options: options)
                return nil
            } catch {
                return error as? RPCError
            }
        }
        let missing = await refusal(CallOptions())
        #expect(missing?.code == .unauthenticated)
        #expect(missing?.errorReason == "TOKEN_MISSING")
        // A refusal also carries the request id.
        #expect(missing?.trailers["x-request-id"] != nil)

        #expect(await refusal(Self.bearer("not-a-jwt"))?.errorReason == "TOKEN_INVALID")
        var notBearer = CallOptions()
        notBearer.metadata.add("authorization", "Basic \(token)")
        #expect(await refusal(notBearer)?.errorReason == "TOKEN_MISSING")

        // Tampering with the claims (here: one character of the payload) breaks the signature.
        var parts = token.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        var payload = Array(parts[1])
        payload[payload.count / 2] = payload[payload.count / 2] == "A" ? "B" : "A"
        parts[1] = String(payload)
        let tampered = await refusal(Self.bearer(parts.joined(separator: ".")))
        #expect(tampered?.code == .unauthenticated)
        #expect(tampered?.errorReason == "TOKEN_INVALID")

        // The internal identity cannot be forged from outside: without a token the call is refused, and with one
        // the gateway's own identity wins.
        var forged = CallOptions()
        forged.metadata.add(InternalCredential.Key.userID, UUID().uuidString.lowercased())
        forged.metadata.add(InternalCredential.Key.caller, "gateway")
        #expect(await refusal(forged)?.code == .unauthenticated)
        var forgedWithToken = Self.bearer(token)
        forgedWithToken.metadata.add(InternalCredential.Key.userID, UUID().uuidString.lowercased())
        let profile = try await clients.auth.getProfile(.init(), options: forgedWithToken)
        #expect(profile.id == registered.user.id)

        await clients.channel.close()
        await stack.stop()
    }

    @Test func internalServicesAreNotRoutedAndReflectionShowsThePublicAPI() async throws {
        let stack = try await TestStack.start()
        let clients = Clients(channel: try stack.gatewayChannel())
        let (_, registered) = try await Self.register(clients)
        let options = Self.bearer(registered.tokens.accessToken)

        let authInternal = await #expect(throws: RPCError.self) {
            _ = try await Habitflow_Auth_V1_AuthInternal.Client(transport: clients.channel)
                .getVerificationKeys(.init(), options: options)
        }
        #expect(authInternal?.code == .unimplemented)
        let habitsInternal = await #expect(throws: RPCError.self) {
            _ = try await Habitflow_Habits_V1_HabitsInternal.Client(transport: clients.channel)
                .purgeUser(.with { $0.userID = registered.user.id }, options: options)
        }
        #expect(habitsInternal?.code == .unimplemented)
        // Bulk imports included: only tools holding the internal credential reach them, straight at habits.
        let importEntries = await #expect(throws: RPCError.self) {
            _ = try await Habitflow_Habits_V1_HabitsInternal.Client(transport: clients.channel)
                .importEntries(.with { $0.userID = registered.user.id }, options: options)
        }
        #expect(importEntries?.code == .unimplemented)
        let goalsInternal = await #expect(throws: RPCError.self) {
            _ = try await Habitflow_Goals_V1_GoalsInternal.Client(transport: clients.channel)
                .purgeUser(.with { $0.userID = registered.user.id }, options: options)
        }
        #expect(goalsInternal?.code == .unimplemented)

        // Reflection: the public services only; the internal ones are not even described.
        let reflection = Grpc_Reflection_V1_ServerReflection.Client(transport: clients.channel)
        let (requests, continuation) = AsyncStream.makeStream(of: Grpc_Reflection_V1_ServerReflectionRequest.self)
        let responses = try await reflection.serverReflectionInfo(requests: requests)
        var iterator = responses.makeAsyncIterator()
        continuation.yield(.with { $0.listServices = "" })
        let listed = try #require(try await iterator.next()).listServicesResponse.service.map(\.name)
        #expect(
            Set(listed) == [
                "habitflow.auth.v1.AuthService", "habitflow.habits.v1.HabitsService",
                "habitflow.goals.v1.GoalsService", "habitflow.social.v1.SocialService",
                "habitflow.gateway.v1.GatewayService", "grpc.health.v1.Health",
                "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection",
            ])
        continuation.yield(.with { $0.fileContainingSymbol = "habitflow.auth.v1.AuthInternal" })
        #expect(try #require(try await iterator.next()).errorResponse.errorCode == Int32(RPCStatusCode.notFound.rawValue))
        continuation.yield(.with { $0.fileContainingSymbol = "habitflow.goals.v1.GoalsInternal" })
        #expect(try #require(try await iterator.next()).errorResponse.errorCode == Int32(RPCStatusCode.notFound.rawValue))
        continuation.yield(.with { $0.fileContainingSymbol = "habitflow.social.v1.SocialInternal" })
        #expect(try #require(try await iterator.next()).errorResponse.errorCode == Int32(RPCStatusCode.notFound.rawValue))
        continuation.yield(.with { $0.fileContainingSymbol = "habitflow.auth.v1.AuthService" })
        let files = try #require(try await iterator.next()).fileDescriptorResponse.fileDescriptorProto
        #expect(!files.isEmpty)
        continuation.yield(.with { $0.fileContainingSymbol = "habitflow.goals.v1.GoalsService" })
        let goalsFiles = try #require(try await iterator.next()).fileDescriptorResponse.fileDescriptorProto
        #expect(!goalsFiles.isEmpty)
        continuation.finish()

        await clients.channel.close()
        await stack.stop()
    }

    @Test func revokedSessionsAndDeletedAccountsAreRefusedWithinSeconds() async throws {
        let stack = try await TestStack.start { gateway in
            gateway.sessionCheckInterval = .milliseconds(500)
        }
        let clients = Clients(channel: try stack.gatewayChannel())
        let (account, first) = try await Self.register(clients, device: "phone")
        let second = try await clients.auth.login(
            .with {
                $0.email = account.email
                $0.password = account.password
                $0.device.deviceName = "laptop"
            })
        let firstOptions = Self.bearer(first.tokens.accessToken)
        let secondOptions = Self.bearer(second.tokens.accessToken)
        _ = try await clients.habits.listHabits(.init(), options: firstOptions)

        // The laptop signs the phone out: the phone's still unexpired token stops working within the check interval.
        _ = try await clients.auth.revokeSession(.with { $0.sessionID = first.tokens.sessionID }, options: secondOptions)
        let revoked = try await eventually(timeout: .seconds(20)) {
            do {
                _ = try await clients.habits.listHabits(.init(), options: firstOptions)
                return false
            } catch let error as RPCError {
                return error.errorReason == "SESSION_REVOKED"
            }
        }
        #expect(revoked)
        _ = try await clients.habits.listHabits(.init(), options: secondOptions)

        // Deleting the account: its last token stops working too.
        _ = try await clients.auth.deleteAccount(.with { $0.password = account.password }, options: secondOptions)
        let deleted = try await eventually(timeout: .seconds(20)) {
            do {
                _ = try await clients.habits.listHabits(.init(), options: secondOptions)
                return false
            } catch let error as RPCError {
                return error.code == .unauthenticated
            }
        }
        #expect(deleted)

        await clients.channel.close()
        await stack.stop()
    }

    @Test func rateLimitsPerAddressAndPerAccount() async throws {
        let stack = try await TestStack.start { gateway in
            // Slow refill: a busy machine must not hand out a token between the calls.
            gateway.accountRateLimit = .init(perSecond: 0.01, burst: 3)
        }
        let clients = Clients(channel: try stack.gatewayChannel())
        let (_, registered) = try await Self.register(clients)
        let options = Self.bearer(registered.tokens.accessToken)
        for _ in 0..<3 { _ = try await clients.habits.listHabits(.init(), options: options) }
        let limited = await #expect(throws: RPCError.self) {
            _ = try await clients.habits.listHabits(.init(), options: options)
        }
        #expect(limited?.code == .resourceExhausted)
        let delay = try #require(limited?.retryDelay)
        #expect(delay > .zero && delay <= .seconds(100))
        // Another account from the same address is not affected.
        let (_, other) = try await Self.register(clients)
        _ = try await clients.habits.listHabits(.init(), options: Self.bearer(other.tokens.accessToken))
        await clients.channel.close()
        await stack.stop()

        let strict = try await TestStack.start { gateway in
            gateway.addressRateLimit = .init(perSecond: 0.01, burst: 4)
        }
        let strictClients = Clients(channel: try strict.gatewayChannel())
        var outcomes: [RPCStatusCode] = []
        for _ in 0..<6 {
            do {
                _ = try await strictClients.auth.login(
                    .with {
                        $0.email = "nobody-\(UUID())@example.com"
                        $0.password = "wrong password"
                    })
                outcomes.append(.ok)
            } catch let error as RPCError {
                outcomes.append(error.code)
                if error.code == .resourceExhausted { #expect(error.retryDelay != nil) }
            }
        }
        #expect(outcomes.prefix(4).allSatisfy { $0 == .unauthenticated })
        #expect(outcomes.suffix(2).allSatisfy { $0 == .resourceExhausted })
        // Health checks are not rate-limited.
        let health = Grpc_Health_V1_Health.Client(transport: strictClients.channel)
        #expect(try await health.check(.init()).status == .serving)
        await strictClients.channel.close()
        await strict.stop()
    }

    @Test func aStoppedServiceIsUnavailableWhileTheOthersWork() async throws {
        let stack = try await TestStack.start()
        let clients = Clients(channel: try stack.gatewayChannel())
        let (_, registered) = try await Self.register(clients)
        let options = Self.bearer(registered.tokens.accessToken)
        _ = try await clients.habits.createHabit(.with { $0.name = "Stretch" }, options: options)

        await stack.habits[0].shutdown()
        // Without the client's own retries (it would retry a read that failed UNAVAILABLE): the gateway's answer.
        var once = options
        once.idempotent = false
        let started = ContinuousClock.now
        let unavailable = await #expect(throws: RPCError.self) {
            _ = try await clients.habits.listHabits(.init(), options: once)
        }
        #expect(unavailable?.code == .unavailable)
        // At once, not after the call's deadline (30 s by default).
        #expect(ContinuousClock.now - started < .seconds(5))

        // Auth still answers; the dashboard names the missing part instead of failing.
        #expect(try await clients.auth.getProfile(.init(), options: options).id == registered.user.id)
        let dashboard = try await clients.gateway.getDashboard(.init(), options: options)
        let habitsPart = try #require(dashboard.missingParts.first { $0.part == .habits })
        #expect(habitsPart.code == Int32(RPCStatusCode.unavailable.rawValue))
        #expect(dashboard.habits.isEmpty)

        await clients.channel.close()
        await stack.stop()
    }

    @Test func replicasShareTheCallsAndADownOneIsSkipped() async throws {
        let stack = try await TestStack.start(habitsReplicas: 2)
        let clients = Clients(channel: try stack.gatewayChannel())
        let (_, registered) = try await Self.register(clients)
        let options = Self.bearer(registered.tokens.accessToken)
        for index in 0..<6 {
            _ = try await clients.habits.createHabit(.with { $0.name = "Habit \(index)" }, options: options)
        }
        // Both replicas served calls (each counts what it handled).
        for host in stack.habits {
            let handled = host.runtime.metrics.emitToString()
            #expect(handled.contains("method=\"CreateHabit\""))
        }
        await stack.habits[1].shutdown()
        for _ in 0..<6 {
            #expect(try await clients.habits.listHabits(.init(), options: options).habits.count == 6)
        }
        await clients.channel.close()
        await stack.stop()
    }

    @Test func tlsWithALPN() async throws {
        let certificates = TestCertificates.shared
        let stack = try await TestStack.start { gateway in
            gateway.tls = .init(
                certificatePath: certificates.server.certificatePath, privateKeyPath: certificates.server.privateKeyPath)
        }
        let channel = try stack.gatewayChannel { configuration in
            configuration.tls = .client(
                serverName: "localhost", trustRoots: .certificates(.file(certificates.caCertificatePath)))
        }
        let clients = Clients(channel: channel)
        let (_, registered) = try await Self.register(clients)
        #expect(try await clients.auth.getProfile(.init(), options: Self.bearer(registered.tokens.accessToken)).id
            == registered.user.id)
        await channel.close()

        // Plaintext against the TLS port fails.
        let plaintext = try stack.gatewayChannel { $0.connectTimeout = .seconds(2) }
        await #expect(throws: RPCError.self) {
            _ = try await Grpc_Health_V1_Health.Client(transport: plaintext).check(.init())
        }
        await plaintext.close()
        await stack.stop()
    }

    @Test func oversizedMessagesAreRefused() async throws {
        let stack = try await TestStack.start { gateway in
            gateway.maxMessageSize = 16 * 1024
        }
        let clients = Clients(channel: try stack.gatewayChannel())
        let (_, registered) = try await Self.register(clients)
        let tooLarge = await #expect(throws: RPCError.self) {
            _ = try await clients.habits.createHabit(
                .with { $0.name = String(repeating: "x", count: 32 * 1024) },
                options: Self.bearer(registered.tokens.accessToken))
        }
        #expect(tooLarge?.code == .resourceExhausted)
        await clients.channel.close()
        await stack.stop()
    }

    @Test func healthAndMetrics() async throws {
        let stack = try await TestStack.start { gateway in
            gateway.service.metricsPort = 0
        }
        let clients = Clients(channel: try stack.gatewayChannel())
        let health = Grpc_Health_V1_Health.Client(transport: clients.channel)
        #expect(try await health.check(.init()).status == .serving)
        #expect(try await health.check(.with { $0.service = "habitflow.habits.v1.HabitsService" }).status == .serving)
        _ = try? await clients.habits.listHabits(.init())

        let port = try #require(stack.gateway.metricsPort)
        let (status, body) = try await run("/usr/bin/curl", ["-s", "http://127.0.0.1:\(port)/metrics"])
        #expect(status == 0)
        #expect(body.contains("habitflow_rpc_server_handled_total"))
        #expect(body.contains("habitflow_gateway_authentication_failures_total{reason=\"TOKEN_MISSING\"}"))
        await clients.channel.close()
        await stack.stop()
    }
}
