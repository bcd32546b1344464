import Foundation
import HabitFlowBase64
import HabitFlowCalendar
import HabitFlowRPC
import HabitFlowServiceAPI
import Testing

@Suite("The handlers' toolkit: page tokens, page sizes, request validation")
struct ServiceAPITests {
    @Test("a page token gives back its fields, also with separators, empty fields and non-ASCII text")
    func pageTokenRoundTrip() throws {
        let fields = ["42", "", "a|b|c", "Großmutter 🏃", String(repeating: "x", count: 200)]
        let token = PageToken.encode(list: "habits", fields)
        #expect(token.utf8.allSatisfy { $0.isBase64URLCharacter })
        #expect(PageToken.decode(token, list: "habits") == fields)
        #expect(PageToken.decode(PageToken.encode(list: "habits", []), list: "habits") == [])
    }

    @Test("a token of another list, an altered, truncated or extended token, and garbage are refused")
    func pageTokenRejections() throws {
        let token = PageToken.encode(list: "entries", ["20466", "3f2b8c1e-6d4a-4e1f-9c7b-2a5d8e9f0b1c"])
        #expect(PageToken.decode(token, list: "habits") == nil)
        let bytes = try #require(Base64URL.decode(token))
        // Every single changed byte (a client editing the position by hand) is noticed.
        for index in bytes.indices {
            var altered = bytes
            altered[index] ^= 0x01
            #expect(PageToken.decode(Base64URL.encode(altered), list: "entries") == nil, "byte \(index)")
        }
        #expect(PageToken.decode(Base64URL.encode(bytes.dropLast()), list: "entries") == nil)
        #expect(PageToken.decode(Base64URL.encode(bytes + [0]), list: "entries") == nil)
        for garbage in ["", "garbage!", "bogus", "AAAA", String(repeating: "A", count: 2_000)] {
            #expect(PageToken.decode(garbage, list: "entries") == nil, "\(garbage.prefix(20))")
        }
    }

    @Test("a token of an older format version is refused, not misread")
    func pageTokenVersion() throws {
        var bytes = try #require(Base64URL.decode(PageToken.encode(list: "changes", ["1"])))
        bytes[0] = 0
        #expect(PageToken.decode(Base64URL.encode(bytes), list: "changes") == nil)
    }

    @Test("a cursor made by hand with a negative sequence is refused; the lowest real one bounds every kind (fuzz)")
    func changeCursorSequenceRange() throws {
        let id = "3f2b8c1e-6d4a-4e1f-9c7b-2a5d8e9f0b1c"
        // The page-token fuzz target's reproducer: a valid token (the checksum is no secret) for sequence Int64.min,
        // whose bound for a later kind overflowed (`sequence - 1`).
        for sequence in ["-9223372036854775808", "-1"] {
            var validator = RequestValidator()
            let token = PageToken.encode(list: "changes", [sequence, "1", id])
            let cursor: ChangeCursor<Kind> = validator.changeCursor(token)
            #expect(cursor == .beginning)
            #expect(
                validator.violations == [
                    FieldViolation(field: "cursor", description: "is not a cursor ListChanges returned")
                ])
        }
        var validator = RequestValidator()
        let first: ChangeCursor<Kind> = validator.changeCursor(PageToken.encode(list: "changes", ["0", "1", id]))
        try validator.check()
        #expect(first.bound(for: .later).sequence == -1)
        #expect(first.bound(for: .earlier).sequence == 0)
    }

    @Test("a date in a page token reads back only within years 1 to 9999 (fuzz: a day number near Int.max trapped)")
    func pageTokenDates() throws {
        let dates = [
            LocalDate(year: 1, month: 1, day: 1), LocalDate(year: 2026, month: 2, day: 28),
            LocalDate(year: 9999, month: 12, day: 31),
        ]
        for date in dates {
            let date = try #require(date)
            #expect(PageToken.date(String(date.daysSinceEpoch)) == date)
        }
        let refused = [
            "9223372036854775807", "-9223372036854775808", "2932897", "-719163", "", "1e3", " 5",
            "99999999999999999999",
        ]
        for text in refused {
            #expect(PageToken.date(text) == nil, "\(text)")
        }
    }

    /// A change feed's kinds of rows, as a service declares them.
    private enum Kind: Int, ChangeKind {
        case start = 0
        case earlier = 1
        case later = 2
    }

    @Test("page sizes: the default for 0, capped at the maximum, negative refused")
    func pageSizes() throws {
        let rule = PageSizeRule(defaultSize: 20, maximum: 50)
        var validator = RequestValidator()
        #expect(validator.pageSize(0, rule: rule) == 20)
        #expect(validator.pageSize(7, rule: rule) == 7)
        #expect(validator.pageSize(5_000, rule: rule) == 50)
        try validator.check()
        _ = validator.pageSize(-1, rule: .standard)
        #expect(validator.violations == [FieldViolation(field: "page_size", description: "must not be negative")])
    }

    @Test("one INVALID_ARGUMENT lists every bad field of a request")
    func validatorCollectsEveryViolation() throws {
        var validator = RequestValidator()
        _ = validator.id("", field: "habit_id")
        _ = validator.optionalID("not-a-uuid", field: "category_id")
        _ = validator.clientID("00000000-0000-0000-0000-000000000000", field: "client_id")
        _ = validator.name("  ", field: "name", maximumLength: 10)
        _ = validator.name("12345678901", field: "title", maximumLength: 10)
        _ = validator.name("tab\u{7}bell", field: "note", maximumLength: 50)
        _ = validator.date(year: 2026, month: 2, day: 30, field: "date")
        _ = validator.week(year: 2026, week: 54, field: "week")
        _ = validator.ids(["3f2b8c1e-6d4a-4e1f-9c7b-2a5d8e9f0b1c", "3f2b8c1e-6d4a-4e1f-9c7b-2a5d8e9f0b1c"], field: "ids", maximum: 5)
        _ = validator.pageToken("bogus", list: "habits", fieldCount: 1)
        #expect(
            validator.violations.map(\.field) == [
                "habit_id", "category_id", "client_id", "name", "title", "note", "date", "week", "ids[1]", "page_token",
            ])
        let error = try #require(throws: RPCError.self) { try validator.check() }
        #expect(error.code == .invalidArgument)
        #expect(error.fieldViolations.map(\.field) == validator.violations.map(\.field))
    }

    @Test("valid input passes and comes back parsed")
    func validatorParses() throws {
        var validator = RequestValidator()
        #expect(validator.name("  Read  ", field: "name", maximumLength: 10) == "Read")
        #expect(validator.optionalName(" ", field: "unit", maximumLength: 10) == nil)
        #expect(validator.date(year: 2024, month: 2, day: 29, field: "date") == LocalDate(year: 2024, month: 2, day: 29))
        #expect(validator.week(year: 2026, week: 53, field: "week").description == "2026-W53")
        let first = try #require(LocalDate(year: 2026, month: 1, day: 1))
        validator.range(first, first.adding(days: 6), field: "range", maximumDays: 7)
        #expect(validator.pageToken("", list: "habits", fieldCount: 1) == nil)
        try validator.check()
        validator.range(first, first.adding(days: 7), field: "range", maximumDays: 7)
        #expect(validator.violations.map(\.field) == ["range"])
    }
}

extension UInt8 {
    fileprivate var isBase64URLCharacter: Bool {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || self == UInt8(ascii: "-")
            || self == UInt8(ascii: "_")
    }
}
