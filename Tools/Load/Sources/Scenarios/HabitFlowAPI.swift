public import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowHabitsProtos
internal import HabitFlowRPC
internal import HabitFlowCrypto

/// A signed-in account as the driver holds it.
public struct HabitFlowSession: Sendable {
    public var userID: UUID
    public var accessToken: String
    public var refreshToken: String
    /// Calls as this user (a bearer token or the signed user id, by route).
    var options: CallOptions
}

/// The calls the scenarios and the seeder make, over one ``HabitFlowConnection``, by route.
struct HabitFlowAPI: Sendable {
    let connector: HabitFlowConnector
    let callTimeout: Duration

    /// Options for calls that act for nobody yet (Register, Login, Refresh).
    var anonymous: CallOptions { CallOptions(timeout: callTimeout) }

    func session(userID: String, tokens: Habitflow_Auth_V1_AuthTokens) throws -> HabitFlowSession {
        guard let id = UUID(canonical: userID) else {
            throw ResponseCheckFailure("auth returned user id '\(userID)', not a UUID")
        }
        guard !tokens.accessToken.isEmpty, !tokens.refreshToken.isEmpty else {
            throw ResponseCheckFailure("auth returned no tokens")
        }
        return HabitFlowSession(
            userID: id, accessToken: tokens.accessToken, refreshToken: tokens.refreshToken,
            options: connector.options(userID: id, accessToken: tokens.accessToken, timeout: callTimeout))
    }

    /// Signs up a new account in UTC with a random email and username.
    func register(email: String, username: String, password: String, device: String, on connection: HabitFlowConnection)
        async throws -> HabitFlowSession
    {
        let response = try await Habitflow_Auth_V1_AuthService.Client(transport: connection.auth).register(
            .with {
                $0.email = email
                $0.username = username
                $0.password = password
                $0.timeZone = "UTC"
                $0.displayName = "Load \(username)"
                $0.device = .with { $0.deviceID = device; $0.deviceName = "habitflow-load" }
            }, options: anonymous)
        return try session(userID: response.user.id, tokens: response.tokens)
    }

    func login(email: String, password: String, device: String, on connection: HabitFlowConnection)
        async throws -> HabitFlowSession
    {
        let response = try await Habitflow_Auth_V1_AuthService.Client(transport: connection.auth).login(
            .with {
                $0.email = email
                $0.password = password
                $0.device = .with { $0.deviceID = device; $0.deviceName = "habitflow-load" }
            }, options: anonymous)
        return try session(userID: response.user.id, tokens: response.tokens)
    }

    /// Rotates the session's refresh token (the old one is spent).
    func refresh(_ session: inout HabitFlowSession, on connection: HabitFlowConnection) async throws {
        let response = try await Habitflow_Auth_V1_AuthService.Client(transport: connection.auth).refresh(
            .with { $0.refreshToken = session.refreshToken }, options: anonymous)
        session = try self.session(userID: session.userID.lowercasedString, tokens: response.tokens)
    }

    func habitIDs(of session: HabitFlowSession, on connection: HabitFlowConnection) async throws -> [String] {
        let response = try await Habitflow_Habits_V1_HabitsService.Client(transport: connection.habits).listHabits(
            .with { $0.pageSize = 100 }, options: session.options)
        return response.habits.map(\.id)
    }

    /// Creates `count` habits named `Habit 1`... with targets cycling through 3 to 7 a week (ids chosen here, so a
    /// retry never makes a second one).
    func createHabits(_ count: Int, for session: HabitFlowSession, on connection: HabitFlowConnection) async throws
        -> [String]
    {
        let client = Habitflow_Habits_V1_HabitsService.Client(transport: connection.habits)
        var ids: [String] = []
        for number in stride(from: 1, through: count, by: 1) {
            let habit = try await client.createHabit(
                .with {
                    $0.habitID = UUID.random().lowercasedString
                    $0.name = "Habit \(number)"
                    $0.weeklyTarget = Int32(3 + (number - 1) % 5)
                }, options: session.options)
            ids.append(habit.id)
        }
        return ids
    }

    /// Marks `habit` done on `day` as entry `entryID` (chosen by the caller, so a retry never adds a second entry).
    func markDone(
        habit: String, on day: LocalDay, entryID: String = UUID.random().lowercasedString,
        for session: HabitFlowSession, connection: HabitFlowConnection
    ) async throws {
        _ = try await Habitflow_Habits_V1_HabitsService.Client(transport: connection.habits).markHabitDone(
            .with {
                $0.habitID = habit
                $0.date = day.proto
                $0.entryID = entryID
            }, options: session.options)
    }
}

/// A calendar day in UTC (the driver's accounts live in UTC).
struct LocalDay: Sendable, Hashable {
    var year: Int
    var month: Int
    var day: Int

    private static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        return calendar
    }()

    /// Today minus `daysAgo` days, in UTC.
    static func today(minus daysAgo: Int, now: Date = Date()) -> LocalDay {
        let date = calendar.date(byAdding: .day, value: -daysAgo, to: now) ?? now
        let parts = calendar.dateComponents([.year, .month, .day], from: date)
        return LocalDay(year: parts.year ?? 1970, month: parts.month ?? 1, day: parts.day ?? 1)
    }

    var proto: Habitflow_Habits_V1_LocalDate {
        .with {
            $0.year = Int32(year)
            $0.month = Int32(month)
            $0.day = Int32(day)
        }
    }
}
