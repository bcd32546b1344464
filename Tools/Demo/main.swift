// habitflow-demo: the whole product in one walkthrough, through the SDK against a running stack (`scripts/demo`).
//
// Two people sign up, become friends and partners, each create a habit, share a goal and check in; the dashboard
// and the leaderboard show both; one of them exports their data and deletes their account, and the other is shown
// what is left: no friend, no partner, the shared goal theirs alone.
//
//   habitflow-demo [--gateway HOST:PORT] [--out FOLDER]     (defaults 127.0.0.1:7070 and the current folder)
import Foundation
import HabitFlowArchive
import HabitFlowSDK

struct DemoFailure: Error, CustomStringConvertible {
    let description: String
}

func option(_ name: String, default value: String) -> String {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return value }
    return arguments[index + 1]
}

func step(_ title: String) { print("\n== \(title)") }
func line(_ text: String) { print("   \(text)") }

/// Polls `body` until it returns a value (events between services take a moment), for at most 10 s.
func eventually<Value>(_ what: String, _ body: () async throws -> Value?) async throws -> Value {
    let deadline = ContinuousClock.now + .seconds(10)
    while true {
        if let value = try await body() { return value }
        guard ContinuousClock.now < deadline else { throw DemoFailure(description: "timed out waiting for \(what)") }
        try await Task.sleep(for: .milliseconds(200))
    }
}

let gateway = option("--gateway", default: "127.0.0.1:7070")
let outputFolder = URL(fileURLWithPath: option("--out", default: FileManager.default.currentDirectoryPath))
guard let colon = gateway.lastIndex(of: ":"), let port = Int(gateway[gateway.index(after: colon)...]) else {
    print("habitflow-demo: --gateway must be HOST:PORT, got \(gateway)")
    exit(64)
}
let host = String(gateway[..<colon])
// Fresh names each run, so the demo can run again against the same stack.
let suffix = String(UUID().uuidString.prefix(6)).lowercased()
let password = "demo-password-\(suffix)"

func client(_ device: String) throws -> HabitFlowClient {
    var configuration = HabitFlowClient.Configuration(host: host, port: port)
    configuration.deviceName = device
    return try HabitFlowClient(configuration: configuration)
}

do {
    let ana = try client("Ana's phone")
    let ben = try client("Ben's laptop")

    step("Ana and Ben sign up")
    let anaUser = try await ana.signUp(
        email: "ana-\(suffix)@example.com", username: "ana_\(suffix)", password: password, displayName: "Ana",
        timeZone: "Europe/Berlin")
    let benUser = try await ben.signUp(
        email: "ben-\(suffix)@example.com", username: "ben_\(suffix)", password: password, displayName: "Ben",
        timeZone: "Europe/Berlin")
    line("ana: \(anaUser.username) (\(anaUser.id))")
    line("ben: \(benUser.username) (\(benUser.id))")

    step("They become friends, then partners")
    let friendRequest = try await ana.social.sendFriendRequest(.with { $0.username = benUser.username })
    _ = try await ben.social.acceptRequest(.with { $0.requestID = friendRequest.id })
    let partnerRequest = try await ana.social.sendPartnerRequest(.with { $0.userID = benUser.id })
    _ = try await ben.social.acceptRequest(.with { $0.requestID = partnerRequest.id })
    let partner = try await ana.social.getPartner(.init())
    line("ana's friends: \(try await ana.social.listFriends(.init()).friends.map(\.person.displayName).joined(separator: ", "))")
    line("ana's partner: \(partner.partner.displayName)")

    step("Each creates a habit; Ben shares a goal with Ana and both link their habit")
    let anaHabit = try await ana.habits.createHabit(.with { $0.name = "Yoga, 20 minutes"; $0.weeklyTarget = 3 })
    let benHabit = try await ben.habits.createHabit(.with { $0.name = "Run, 5 km"; $0.weeklyTarget = 3 })
    let goal = try await ben.goals.createGoal(
        .with {
            $0.title = "Move 6 times a week, together"
            $0.type = .weeklyHabit
            $0.target.value = 6
            $0.horizon = .twelveWeeks
            $0.shared = true
            $0.habitIds = [benHabit.id]
        })
    _ = try await ana.goals.linkHabit(.with { $0.goalID = goal.id; $0.habitID = anaHabit.id })
    line("goal: \(goal.title) (shared with \(goal.partnerID == anaUser.id ? "Ana" : goal.partnerID))")

    step("Check-ins from both")
    _ = try await ana.habits.markHabitDone(.with { $0.habitID = anaHabit.id })
    _ = try await ben.habits.markHabitDone(.with { $0.habitID = benHabit.id })
    line("Ana did her yoga, Ben ran")

    step("Ana's dashboard")
    let dashboard = try await ana.dashboard()
    line("week \(dashboard.weekName): \(dashboard.weeklyScore.display)")
    for habit in dashboard.habits { line("habit \(habit.name): \(habit.progress)") }
    for goal in dashboard.goals { line("goal \(goal.title): \(goal.display)\(goal.shared ? " (shared)" : "")") }
    step("The leaderboard")
    for entry in dashboard.leaderboard.top {
        line("#\(entry.rank) \(entry.displayName): \(entry.display)\(entry.me ? " (me)" : "")")
    }

    step("Ana exports her data")
    let file = outputFolder.appendingPathComponent("habitflow-export-ana-\(suffix).zip")
    let archive = try await ana.exportMyData(to: file)
    line("\(archive.byteCount) bytes written to \(file.path) (suggested name \(archive.suggestedFileName))")
    for entry in try ZipDirectory.entries(of: Data(contentsOf: file)) {
        let size = String(entry.uncompressedSize)
        line(entry.name.padding(toLength: 22, withPad: " ", startingAt: 0) + String(repeating: " ", count: max(0, 7 - size.count)) + size + " bytes")
    }

    step("Ana deletes her account")
    _ = try await ana.auth.deleteAccount(.with { $0.password = password })
    line("deleted")

    step("What Ben sees now")
    let friends = try await eventually("Ana to leave Ben's friends") {
        let friends = try await ben.social.listFriends(.init()).friends
        return friends.isEmpty ? friends : nil
    }
    line("friends: \(friends.count)")
    do {
        _ = try await ben.social.getPartner(.init())
        line("partner: still there?")
    } catch let error as HabitFlowError where error.kind == .notFound {
        line("partner: none")
    }
    let benGoal = try await eventually("the goal to be Ben's own") {
        let seen = try await ben.goals.getGoal(.with { $0.goalID = goal.id })
        return seen.shared ? nil : seen
    }
    line("goal \(benGoal.title): \(benGoal.progress.display), shared: \(benGoal.shared)")
    let board = try await ben.social.getLeaderboard(.init())
    line("leaderboard: \(board.entries.map { "#\($0.rank) \($0.person.displayName)" }.joined(separator: ", "))")
    await ana.close()
    await ben.close()
    print("\nDone.")
} catch {
    print("habitflow-demo failed: \(error)")
    exit(1)
}
