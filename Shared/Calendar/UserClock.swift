public import Foundation
internal import HabitFlowLocking

/// The current instant and what it means in a user's time zone: their today and current ISO week.
///
/// The service reads the time only through this, so tests can put "now" on a week boundary or in a DST week.
public struct UserClock: Sendable {
    private let currentInstant: @Sendable () -> Date

    /// The system clock.
    public static let system = UserClock { Date() }

    public init(now: @escaping @Sendable () -> Date) {
        self.currentInstant = now
    }

    public var now: Date { currentInstant() }

    /// The user's today.
    public func today(in zone: UserTimeZone) -> LocalDate { zone.localDate(at: now) }
}

/// A user's IANA time zone with the ISO 8601 calendar that turns instants into their local dates.
public struct UserTimeZone: Sendable, Hashable {
    /// The zone of a user the service has not been told about.
    public static let utc = UserTimeZone(validName: "UTC")

    /// The IANA name, for example `Europe/Berlin`.
    public let name: String
    public let calendar: Calendar

    /// `nil` when the name is unknown or a bare UTC offset ("GMT+2", "+02:00"): DESIGN.md section 3 wants a named
    /// zone, whose offset follows the zone's DST rules.
    public init?(named name: String) {
        guard let calendar = ZoneCache.shared.calendar(named: name) else { return nil }
        self.name = name
        self.calendar = calendar
    }

    private init(validName name: String) {
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = TimeZone(identifier: name) ?? .gmt
        self.name = name
        self.calendar = calendar
    }

    /// A zone name read back from the database (validated when stored); UTC should it no longer resolve.
    public static func stored(_ name: String) -> UserTimeZone { UserTimeZone(named: name) ?? .utc }

    /// The calendar date at `instant` in this zone.
    public func localDate(at instant: Date) -> LocalDate {
        // The zone's UTC offset at that instant gives the local wall-clock day directly; Calendar.dateComponents
        // answers the same for the ISO calendar at several times the cost, and this runs on every check-in and week view.
        let local = instant.timeIntervalSince1970 + Double(calendar.timeZone.secondsFromGMT(for: instant))
        return LocalDate(daysSinceEpoch: Int((local / 86_400).rounded(.down)))
    }

    public static func == (lhs: UserTimeZone, rhs: UserTimeZone) -> Bool { lhs.name == rhs.name }
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }
}

/// One ISO 8601 calendar per zone name, made once: `TimeZone(identifier:)` reads and parses the zone's rules, and a
/// user's zone is needed on every call.
final class ZoneCache: Sendable {
    static let shared = ZoneCache()

    private let calendars = Locked<[String: Calendar]>([:])

    func calendar(named name: String) -> Calendar? {
        if let calendar = calendars.withLock({ $0[name] }) { return calendar }
        guard Self.isZoneName(name), let zone = TimeZone(identifier: name) else { return nil }
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = zone
        calendars.withLock { cache in
            // IANA names are a bounded set; the cap only guards against a surprise.
            if cache.count > 1_000 { cache.removeAll() }
            cache[name] = calendar
        }
        return calendar
    }

    /// Rejects what Foundation would accept as a fixed offset rather than a named zone.
    private static func isZoneName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 64, let first = name.unicodeScalars.first, first != "+", first != "-"
        else { return false }
        let upper = name.uppercased()
        return !["GMT+", "GMT-", "UTC+", "UTC-"].contains { upper.hasPrefix($0) }
    }
}
