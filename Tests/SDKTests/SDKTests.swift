import Foundation
import HabitFlowArchive
import HabitFlowAuthProtos
import HabitFlowGatewayProtos
import HabitFlowGoalsProtos
import HabitFlowHabitsProtos
import HabitFlowLocking
import HabitFlowRPC
import HabitFlowSDK
import HabitFlowStackTestSupport
import HabitFlowTestSupport
import SwiftProtobuf
import Testing

/// A token store that counts how often the SDK saved tokens: once per sign-in, once per refresh.
final class CountingTokenStore: TokenStore {
    private let state: Locked<(tokens: StoredTokens?, saves: Int)>

    init(_ tokens: StoredTokens? = nil) {
        state = Locked((tokens, 0))
    }

    var saves: Int { state.withLock { $0.saves } }

    func load() async -> StoredTokens? { state.withLock { $0.tokens } }
    func save(_ tokens: StoredTokens) async {
        state.withLock {
            $0.tokens = tokens
            $0.saves += 1
        }
    }
    func clear() async { state.withLock { $0.tokens = nil } }
}

/// Runs `body` `count` times at once; rethrows the first failure.
func concurrently(_ count: Int, _ body: @escaping @Sendable () async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<count { group.addTask { try await body() } }
        try await group.waitForAll()
    }
}

/// The SDK against the real stack (gateway, auth, habits, goals, Postgres).
@Suite struct SDKTests {
    static func client(
        _ stack: TestStack, store: any TokenStore = InMemoryTokenStore(),
        configure: (inout HabitFlowClient.Configuration) -> Void = { _ in }
    ) throws -> HabitFlowClient {
        var configuration = HabitFlowClient.Configuration(host: "127.0.0.1", port: stack.gatewayPort)
        configuration.deviceName = "sdk tests"
        configure(&configuration)
        return try HabitFlowClient(configuration: configuration, tokenStore: store)
    }

    @Test func signUpTypedCallsAndLogOut() async throws {
        let stack = try await TestStack.start()
        let client = try Self.client(stack)
        let account = TestAccount()
        let user = try await client.signUp(
            email: account.email, username: account.username, password: account.password, timeZone: "Asia/Tokyo")
        #expect(await client.signedInUserID == user.id)

        let habit = try await client.habits.createHabit(
            .with {
                $0.name = "Meditate"
                $0.weeklyTarget = 1
            })
        _ = try await client.habits.markHabitDone(.with { $0.habitID = habit.id })
        let dashboard = try await client.dashboard()
        #expect(dashboard.weeklyScore.display == "100% (1/1 habits)")

        // Logging in again (same account, this client) replaces the session.
        try await client.logOut()
        #expect(await client.signedInUserID == nil)
        let signedOut = await #expect(throws: HabitFlowError.self) { _ = try await client.habits.listHabits(.init()) }
        #expect(signedOut?.kind == .notSignedIn)

        try await client.logIn(username: account.username, password: account.password)
        #expect(try await client.habits.listHabits(.init()).habits.map(\.name) == ["Meditate"])
        let wrong = await #expect(throws: HabitFlowError.self) {
            try await client.logIn(email: account.email, password: "not the password")
        }
        #expect(wrong?.kind == .notSignedIn)
        await client.close()
        await stack.stop()
    }

    @Test func goalsTypedCalls() async throws {
        let stack = try await TestStack.start()
        let client = try Self.client(stack)
        let account = TestAccount()
        try await client.signUp(
            email: account.email, username: account.username, password: account.password, timeZone: "Europe/Lisbon")

        let habit = try await client.habits.createHabit(
            .with {
                $0.name = "Swim"
                $0.weeklyTarget = 2
            })
        let created = try await client.goals.createGoal(
            .with {
                $0.goalID = UUID().uuidString.lowercased()
                $0.title = "Swim twice a week"
                $0.type = .weeklyHabit
                $0.target.value = 2
                $0.horizon = .twelveWeeks
                $0.habitIds = [habit.id]
            })
        #expect(created.progress.display == "0/2")
        _ = try await client.habits.markHabitDone(.with { $0.habitID = habit.id })

        let goal = try await client.goals.getGoal(.with { $0.goalID = created.id })
        #expect(goal.title == "Swim twice a week")
        #expect(goal.links.map(\.habitName) == ["Swim"])
        #expect(goal.progress.display == "1/2")
        #expect(goal.progress.percent == 50)
        #expect(goal.status == .inProgress)
        #expect(try await client.goals.listGoals(.init()).goals.map(\.id) == [created.id])
        #expect(try await client.dashboard().goals.map(\.display) == ["1/2"])

        let invalid = await #expect(throws: HabitFlowError.self) {
            _ = try await client.goals.getGoal(.with { $0.goalID = "not a goal id" })
        }
        #expect(invalid?.kind == .invalidInput)
        #expect(invalid?.fieldViolations.map(\.field) == ["goal_id"])
        await client.close()
        await stack.stop()
    }

    @Test func theDataExportIsSavedOnlyOnceComplete() async throws {
        let stack = try await TestStack.start()
        let client = try Self.client(stack)
        let account = TestAccount()
        try await client.signUp(email: account.email, username: account.username, password: account.password)
        _ = try await client.habits.createHabit(.with { $0.name = "Stretch, then \"breathe\"" })
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sdk-export-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("export.zip")

        let saved = try await client.exportMyData(to: file)
        #expect(saved.suggestedFileName.hasPrefix("habitflow-export-\(account.username)-"))
        let archive = try Data(contentsOf: file)
        #expect(saved.byteCount == archive.count)
        let names = try ZipDirectory.entries(of: archive).map(\.name)
        #expect(names.first == "profile.csv")
        #expect(names.last == "README.txt")
        #expect(names.contains("habits.csv"))

        // A second export within the minute is refused: the archive already there stays as it was, and nothing
        // partial is left beside it.
        let refused = await #expect(throws: HabitFlowError.self) { try await client.exportMyData(to: file) }
        #expect(refused?.kind == .rateLimited)
        #expect(refused?.retryAfter != nil)
        #expect(try Data(contentsOf: file) == archive)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["export.zip"])
        await client.close()
        await stack.stop()
    }

    @Test func watchingChangesAndResumingFromTheCursor() async throws {
        let stack = try await TestStack.start()
        let client = try Self.client(stack)
        let account = TestAccount()
        try await client.signUp(email: account.email, username: account.username, password: account.password)
        let habit = try await client.habits.createHabit(.with { $0.name = "Walk" })

        var cursor = ""
        var watch = try await client.watchChanges().makeAsyncIterator()
        while let message = try await watch.next() {
            cursor = message.cursor
            if message.heartbeat.caughtUp { break }
        }
        let entry = try await client.habits.markHabitDone(.with { $0.habitID = habit.id })
        var seen: [String] = []
        while seen.isEmpty, let message = try await watch.next() {
            guard case .changes(let changes) = message.event else { continue }
            let page = try Habitflow_Habits_V1_ListChangesResponse(unpackingAny: changes.listChanges)
            seen = page.changes.compactMap { if case .entry(let entry) = $0.resource { entry.id } else { nil } }
        }
        #expect(seen == [entry.id])

        // From the cursor before the check-in: it alone, then caught up.
        var resumed = try await client.watchChanges(from: cursor).makeAsyncIterator()
        var again: [String] = []
        while let message = try await resumed.next(), !message.heartbeat.caughtUp {
            guard case .changes(let changes) = message.event,
                let page = try? Habitflow_Habits_V1_ListChangesResponse(unpackingAny: changes.listChanges)
            else { continue }
            again += page.changes.compactMap { if case .entry(let entry) = $0.resource { entry.id } else { nil } }
        }
        #expect(again == [entry.id])

        let malformed = await #expect(throws: HabitFlowError.self) {
            var broken = try await client.watchChanges(from: "nonsense").makeAsyncIterator()
            _ = try await broken.next()
        }
        #expect(malformed?.kind == .invalidInput)
        await client.close()
        await stack.stop()
    }

    @Test func errorsCarryTheStatusAndFieldViolations() async throws {
        let stack = try await TestStack.start()
        let client = try Self.client(stack)
        let account = TestAccount()
        try await client.signUp(email: account.email, username: account.username, password: account.password)

        let invalid = await #expect(throws: HabitFlowError.self) {
            _ = try await client.habits.createHabit(.with { $0.name = "   " })
        }
        #expect(invalid?.kind == .invalidInput)
        #expect(invalid?.code == .invalidArgument)
        #expect(invalid?.fieldViolations.map(\.field) == ["name"])

        let missing = await #expect(throws: HabitFlowError.self) {
            _ = try await client.habits.getHabit(.with { $0.habitID = UUID().uuidString.lowercased() })
        }
        #expect(missing?.kind == .notFound)

        let taken = await #expect(throws: HabitFlowError.self) {
            try await client.signUp(email: account.email, username: account.username, password: account.password)
        }
        #expect(taken?.kind == .alreadyExists)
        await client.close()

        // A deadline too short for any call.
        let hasty = try Self.client(stack) { $0.timeout = .microseconds(1) }
        let late = await #expect(throws: HabitFlowError.self) {
            try await hasty.logIn(email: account.email, password: account.password)
        }
        #expect(late?.kind == .timedOut)
        await hasty.close()
        await stack.stop()
    }

    /// Access tokens live 6 s here (long enough for a busy machine to finish a test step with a fresh one) and the
    /// gateway allows no leeway, so tokens expire during the test.
    static let tokenLifetime: Duration = .seconds(6)

    static func shortLivedTokenStack() async throws -> TestStack {
        try await TestStack.start(
            configureGateway: { $0.tokenLeeway = .zero },
            configureAuth: { $0.accessTokenLifetime = tokenLifetime })
    }

    @Test func oneRefreshForManyCallsThatFindTheTokenExpired() async throws {
        let stack = try await Self.shortLivedTokenStack()
        let store = CountingTokenStore()
        let client = try Self.client(stack, store: store) { $0.refreshMargin = .zero }
        let account = TestAccount()
        try await client.signUp(email: account.email, username: account.username, password: account.password)
        #expect(store.saves == 1)
        let firstToken = try #require(await client.tokens?.accessToken)

        try await Task.sleep(for: Self.tokenLifetime + .seconds(1))
        // Twenty calls at once: the SDK sees the token has expired and refreshes it once for all of them (two
        // refreshes would reuse the refresh token, which signs the session out).
        try await concurrently(20) {
            let habits = try await client.habits.listHabits(.init()).habits
            #expect(habits.isEmpty)
        }
        #expect(store.saves == 2)
        #expect(try #require(await client.tokens?.accessToken) != firstToken)
        #expect(try await client.auth.listSessions(.init()).sessions.count == 1)
        await client.close()
        await stack.stop()
    }

    @Test func callsRefusedForAnExpiredTokenAreSentAgainAfterOneRefresh() async throws {
        let stack = try await Self.shortLivedTokenStack()
        let signIn = try Self.client(stack)
        let account = TestAccount()
        try await signIn.signUp(email: account.email, username: account.username, password: account.password)
        var tokens = try #require(await signIn.tokens)
        await signIn.close()

        // The client believes its token is good for an hour (a device clock that is behind): only the gateway's
        // refusal tells it otherwise.
        tokens.accessTokenExpiresAt = Date().addingTimeInterval(3600)
        let store = CountingTokenStore(tokens)
        let client = try Self.client(stack, store: store) { $0.refreshMargin = .zero }
        try await Task.sleep(for: Self.tokenLifetime + .seconds(1))
        try await concurrently(20) { _ = try await client.habits.listCategories(.init()) }
        #expect(store.saves == 1)
        #expect(try await client.auth.getProfile(.init()).email == account.email)

        // A session revoked elsewhere: the SDK forgets the tokens and says so.
        _ = try await client.auth.logoutEverywhere(.with { $0.keepCurrentSession = false })
        let ended = await #expect(throws: HabitFlowError.self) {
            for _ in 0..<50 {
                _ = try await client.habits.listHabits(.init())
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        #expect(ended?.kind == .notSignedIn)
        #expect(await client.tokens == nil)
        await client.close()
        await stack.stop()
    }
}
