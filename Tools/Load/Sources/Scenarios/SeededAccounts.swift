internal import Foundation

/// One account made by `habitflow-load seed`, with the refresh token of its last session, so a later run can resume
/// it with a cheap Refresh instead of a Login (bcrypt, about a quarter second of CPU each).
public struct SeededAccount: Codable, Sendable, Hashable {
    public var email: String
    public var password: String
    public var userID: String
    /// The session's current refresh token; `nil` when unknown (the run logs in).
    public var refreshToken: String?

    public init(email: String, password: String, userID: String, refreshToken: String?) {
        self.email = email
        self.password = password
        self.userID = userID
        self.refreshToken = refreshToken
    }
}

/// The accounts file: JSON Lines, one ``SeededAccount`` per line.
public enum SeededAccountsFile {
    public struct Malformed: Error, CustomStringConvertible {
        public var path: String
        public var line: Int
        public var reason: String
        public var description: String { "\(path):\(line): not an account line (\(reason))" }
    }

    public static func read(_ path: String) throws -> [SeededAccount] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let decoder = JSONDecoder()
        var accounts: [SeededAccount] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
        where !line.allSatisfy(\.isWhitespace) {
            do {
                accounts.append(try decoder.decode(SeededAccount.self, from: Data(line.utf8)))
            } catch {
                throw Malformed(path: path, line: index + 1, reason: "\(error)")
            }
        }
        return accounts
    }

    /// Replaces the file at once (written beside it, then renamed), so an interrupted write loses nothing.
    public static func write(_ accounts: [SeededAccount], to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var data = Data()
        for account in accounts {
            data.append(try encoder.encode(account))
            data.append(0x0A)
        }
        try data.write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}
