internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowGatewayProtos
internal import HabitFlowHabitsProtos
internal import HabitFlowRPC
internal import Synchronization
internal import HabitFlowCrypto

/// HabitFlow's own traffic: virtual users sign up (or resume seeded accounts), then check in habits, read their week,
/// list habits and categories, read their score history, refresh their tokens...
///
/// Three shipped mixes: `read-heavy`, `write-heavy` and `mixed` (the same operations, other weights).
public struct HabitFlowScenario: LoadScenario {
    public enum Kind: String, CaseIterable, Sendable {
        case readHeavy = "read-heavy"
        case writeHeavy = "write-heavy"
        case mixed

        /// The shipped mix; the dashboard is the gateway's own RPC, so it is left out when calls go straight to the
        /// services.
        public func mix(withDashboard: Bool) -> OperationMix {
            switch (self, withDashboard) {
            case (.readHeavy, true):
                .fixed([
                    "week-view": 30, "dashboard": 15, "list-habits": 15, "score-history": 10, "list-categories": 10,
                    "get-profile": 5, "mark-done": 10, "refresh-token": 5,
                ])
            case (.readHeavy, false):
                .fixed([
                    "week-view": 40, "list-habits": 20, "score-history": 10, "list-categories": 10, "get-profile": 5,
                    "mark-done": 10, "refresh-token": 5,
                ])
            case (.writeHeavy, true):
                .fixed([
                    "mark-done": 50, "mark-not-done": 15, "week-view": 15, "dashboard": 5, "list-habits": 10,
                    "refresh-token": 5,
                ])
            case (.writeHeavy, false):
                .fixed(["mark-done": 50, "mark-not-done": 15, "week-view": 20, "list-habits": 10, "refresh-token": 5])
            case (.mixed, true):
                .fixed([
                    "mark-done": 30, "week-view": 20, "dashboard": 10, "list-habits": 15, "score-history": 10,
                    "mark-not-done": 5, "list-categories": 5, "refresh-token": 5,
                ])
            case (.mixed, false):
                .fixed([
                    "mark-done": 30, "week-view": 30, "list-habits": 15, "score-history": 10, "mark-not-done": 5,
                    "list-categories": 5, "refresh-token": 5,
                ])
            }
        }

        var summary: String {
            switch self {
            case .readHeavy: "HabitFlow users mostly reading: week view, habits, score history; some check-ins"
            case .writeHeavy: "HabitFlow users mostly checking in (mark done / not done), some reads"
            case .mixed: "HabitFlow users checking in and reading their week about equally"
            }
        }
    }

    public enum Operation: String, CaseIterable, Sendable {
        /// MarkHabitDone on one of the user's habits, a day in the last week.
        case markDone = "mark-done"
        /// MarkHabitNotDone on one of the user's habits, a day in the last week.
        case markNotDone = "mark-not-done"
        /// GetWeek: the current week with progress and scores.
        case weekView = "week-view"
        case listHabits = "list-habits"
        case listCategories = "list-categories"
        /// GetScoreHistory: the last 12 weeks' scores.
        case scoreHistory = "score-history"
        /// Refresh: rotates the user's refresh token.
        case refreshToken = "refresh-token"
        /// GetProfile on auth.
        case getProfile = "get-profile"
        /// The gateway's GetDashboard (habitflow.gateway.v1): weekly score, habits, goals, leaderboard in one call.
        case dashboard
        /// Register: signs up a new account (bcrypt on auth, and a `UserCreated` event for every subscriber). In no
        /// shipped mix; `scripts/faults` adds a little of it so events flow while services fail.
        case signUp = "sign-up"
    }

    /// One virtual user.
    public struct User: Sendable {
        var session: HabitFlowSession
        var habitIDs: [String]
        /// The seeded account it resumed, if any (its session is saved back after the run).
        var account: Int?
        var random: SeededGenerator
    }

    public let kind: Kind
    let api: HabitFlowAPI
    /// What this route can call: everything through the gateway; all but the dashboard straight to the services.
    let operations: [Operation]
    /// Seeded accounts to resume (empty: every user signs up).
    let accounts: [SeededAccount]
    let accountsFile: String?
    /// Habits each new account creates.
    let habitsPerNewUser: Int
    /// Where every call of the load is recorded, with the ids of what it wrote (`--ledger`).
    let ledger: LoadLedger?

    public init(
        kind: Kind, connector: HabitFlowConnector, callTimeout: Duration, accountsFile: String?,
        habitsPerNewUser: Int = 5, ledger: LoadLedger? = nil
    ) throws {
        self.ledger = ledger
        self.kind = kind
        self.api = HabitFlowAPI(connector: connector, callTimeout: callTimeout)
        self.accountsFile = accountsFile
        self.accounts = try accountsFile.map(SeededAccountsFile.read) ?? []
        if accountsFile != nil, accounts.isEmpty {
            throw OptionError("the accounts file \(accountsFile ?? "") holds no account; run `habitflow-load seed` first")
        }
        self.habitsPerNewUser = habitsPerNewUser
        self.operations = Operation.allCases.filter { $0 != .dashboard || connector.route.hasGateway }
    }

    public var name: String { kind.rawValue }
    public var operationNames: [String] { operations.map(\.rawValue) }
    public var defaultMix: OperationMix { kind.mix(withDashboard: operations.contains(.dashboard)) }

    public func openConnection(index: Int) async throws -> HabitFlowConnection { try await api.connector.open() }
    public func closeConnection(_ connection: HabitFlowConnection) async { await connection.close() }

    /// Resumes seeded account `index % count` (Refresh for the first user of each account, Login for others), or
    /// signs up a new account with a few habits.
    public func prepareUser(index: Int, connection: HabitFlowConnection) async throws -> User {
        // Auth wants a UUID per device: each virtual user is one.
        let device = UUID.random().lowercasedString
        let session: HabitFlowSession
        var account: Int?
        if accounts.isEmpty {
            let tag = UUID.random().lowercasedString.replacingOccurrences(of: "-", with: "").prefix(16)
            session = try await api.register(
                email: "load-\(tag)@example.com", username: "load_\(tag)", password: "load-\(tag)-password",
                device: device, on: connection)
        } else {
            let seeded = accounts[index % accounts.count]
            session = try await resume(seeded, claimsSession: index < accounts.count, device: device, on: connection)
            if index < accounts.count { account = index }
        }
        var habitIDs = try await api.habitIDs(of: session, on: connection)
        if habitIDs.isEmpty { habitIDs = try await api.createHabits(habitsPerNewUser, for: session, on: connection) }
        return User(
            session: session, habitIDs: habitIDs, account: account, random: SeededGenerator(seed: UInt64(index) &+ 1))
    }

    private func resume(
        _ seeded: SeededAccount, claimsSession: Bool, device: String, on connection: HabitFlowConnection
    ) async throws -> HabitFlowSession {
        if claimsSession, let refreshToken = seeded.refreshToken, let userID = UUID(canonical: seeded.userID) {
            var session = HabitFlowSession(
                userID: userID, accessToken: "", refreshToken: refreshToken, options: api.anonymous)
            do {
                try await api.refresh(&session, on: connection)
                return session
            } catch let error as RPCError where error.code == .unauthenticated || error.code == .notFound {
                // The session ended (revoked, expired, or its token was spent by an interrupted run): log in anew.
            }
        }
        return try await api.login(email: seeded.email, password: seeded.password, device: device, on: connection)
    }

    public func perform(operation: Int, user: inout User, connection: HabitFlowConnection) async throws {
        let operation = operations[operation]
        guard let ledger else { return try await perform(operation, user: &user, connection: connection, note: nil) }
        let note = LedgerNote()
        do {
            try await perform(operation, user: &user, connection: connection, note: note)
        } catch {
            ledger.record(
                .init(
                    operation: operation.rawValue, status: failureCode(of: error).code,
                    userID: user.session.userID.lowercasedString, clientID: note.clientID, detail: note.detail))
            throw error
        }
        let userID = note.userID ?? user.session.userID.lowercasedString
        ledger.record(
            .init(operation: operation.rawValue, status: "OK", userID: userID, clientID: note.clientID, detail: note.detail))
    }

    /// What an operation tells the ledger beyond its status: the id it chose for what it writes, the account it made,
    /// what a response lacked. One per call, filled by the task making it.
    final class LedgerNote {
        var clientID: String?
        var userID: String?
        var detail: String?
    }

    private func perform(
        _ operation: Operation, user: inout User, connection: HabitFlowConnection, note: LedgerNote?
    ) async throws {
        let habits = Habitflow_Habits_V1_HabitsService.Client(transport: connection.habits)
        let options = user.session.options
        switch operation {
        case .markDone:
            let habit = user.habitIDs[Int.random(in: 0..<user.habitIDs.count, using: &user.random)]
            let day = LocalDay.today(minus: Int.random(in: 0..<7, using: &user.random))
            let entryID = UUID.random().lowercasedString
            note?.clientID = entryID
            try await api.markDone(habit: habit, on: day, entryID: entryID, for: user.session, connection: connection)
        case .markNotDone:
            let habit = user.habitIDs[Int.random(in: 0..<user.habitIDs.count, using: &user.random)]
            let day = LocalDay.today(minus: Int.random(in: 0..<7, using: &user.random))
            _ = try await habits.markHabitNotDone(
                .with {
                    $0.habitID = habit
                    $0.date = day.proto
                }, options: options)
        case .weekView:
            let week = try await habits.getWeek(Habitflow_Habits_V1_GetWeekRequest(), options: options)
            guard week.habits.count >= user.habitIDs.count else {
                throw ResponseCheckFailure("the week view shows \(week.habits.count) habits, the user has \(user.habitIDs.count)")
            }
        case .listHabits:
            let list = try await habits.listHabits(.with { $0.pageSize = 50 }, options: options)
            guard !list.habits.isEmpty else { throw ResponseCheckFailure("ListHabits returned no habit") }
        case .listCategories:
            _ = try await habits.listCategories(Habitflow_Habits_V1_ListCategoriesRequest(), options: options)
        case .scoreHistory:
            let history = try await habits.getScoreHistory(Habitflow_Habits_V1_GetScoreHistoryRequest(), options: options)
            guard !history.weeks.isEmpty else { throw ResponseCheckFailure("GetScoreHistory returned no week") }
        case .refreshToken:
            try await api.refresh(&user.session, on: connection)
        case .dashboard:
            let dashboard = try await Habitflow_Gateway_V1_GatewayService.Client(transport: connection.habits).getDashboard(
                Habitflow_Gateway_V1_GetDashboardRequest(), options: options)
            // The gateway answers with the parts it got in time and marks the others missing. Goals and the
            // leaderboard may be absent where those services do not run; the habits part is this scenario's own.
            if !dashboard.missingParts.isEmpty {
                note?.detail = "missing=" + dashboard.missingParts.map { "\($0.part)" }.joined(separator: ",")
            }
            if let missing = dashboard.missingParts.first(where: { $0.part == .habits }) {
                let code = RPCStatusCode(rawValue: Int(missing.code)).map { "\($0)" } ?? "code \(missing.code)"
                throw ResponseCheckFailure("the dashboard came without its habits part (\(code): \(missing.message))")
            }
            guard !dashboard.weekName.isEmpty else { throw ResponseCheckFailure("the dashboard has no week") }
        case .getProfile:
            let profile = try await Habitflow_Auth_V1_AuthService.Client(transport: connection.auth).getProfile(
                Habitflow_Auth_V1_GetProfileRequest(), options: options)
            guard UUID(canonical: profile.id) == user.session.userID else {
                throw ResponseCheckFailure("GetProfile returned user \(profile.id)")
            }
        case .signUp:
            let tag = UUID.random().lowercasedString.replacingOccurrences(of: "-", with: "").prefix(16)
            note?.clientID = "load_\(tag)"
            let session = try await api.register(
                email: "load-\(tag)@example.com", username: "load_\(tag)", password: "load-\(tag)-password",
                device: UUID.random().lowercasedString, on: connection)
            note?.userID = session.userID.lowercasedString
        }
    }

    /// Saves each resumed account's current refresh token, so the next run resumes it without a Login.
    public func finish(users: [User]) async throws {
        guard let accountsFile else { return }
        var updated = accounts
        for user in users {
            guard let account = user.account else { continue }
            updated[account].refreshToken = user.session.refreshToken
        }
        try SeededAccountsFile.write(updated, to: accountsFile)
    }
}
