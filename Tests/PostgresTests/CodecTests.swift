import HabitFlowCalendar
import HabitFlowTestSupport
import Foundation
import HabitFlowPostgres
import Testing

/// Sends `value` as a parameter cast to `sqlType`, reads it back, and also reads its server-side text.
private func roundTrip<Value: PostgresCodable & Equatable>(
    _ pool: PostgresPool, _ value: Value, as sqlType: StaticString, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> Value {
    // The cast is fixed per call site; the value always travels as a parameter.
    let query: PostgresQuery
    switch sqlType.description {
    case "uuid": query = "SELECT \(value)::uuid"
    case "text": query = "SELECT \(value)::text"
    case "int2": query = "SELECT \(value)::int2"
    case "int4": query = "SELECT \(value)::int4"
    case "int8": query = "SELECT \(value)::int8"
    case "numeric": query = "SELECT \(value)::numeric"
    case "bool": query = "SELECT \(value)::bool"
    case "date": query = "SELECT \(value)::date"
    case "timestamptz": query = "SELECT \(value)::timestamptz"
    case "jsonb": query = "SELECT \(value)::jsonb"
    case "bytea": query = "SELECT \(value)::bytea"
    case "text[]": query = "SELECT \(value)::text[]"
    case "uuid[]": query = "SELECT \(value)::uuid[]"
    case "int8[]": query = "SELECT \(value)::int8[]"
    case "int4[]": query = "SELECT \(value)::int4[]"
    default: fatalError("add \(sqlType) to roundTrip")
    }
    let row = try #require(try await pool.queryRow(query), sourceLocation: sourceLocation)
    let decoded = try row.decode(0, as: Value.self)
    #expect(decoded == value, sourceLocation: sourceLocation)
    return decoded
}

extension PostgresIntegrationTests {
    @Suite("typed binds and row decoding")
    struct CodecTests {
        @Test("integers, booleans and text, with edge values")
        func scalars() async throws {
            try await withPool(try TestEnvironment.superuserURL()) { pool in
                for value in [Int64.min, -1, 0, 1, Int64.max] { _ = try await roundTrip(pool, value, as: "int8") }
                for value in [Int32.min, 0, Int32.max] { _ = try await roundTrip(pool, value, as: "int4") }
                for value in [Int16.min, 0, Int16.max] { _ = try await roundTrip(pool, value, as: "int2") }
                _ = try await roundTrip(pool, Int.max, as: "int8")
                _ = try await roundTrip(pool, true, as: "bool")
                _ = try await roundTrip(pool, false, as: "bool")
                for text in ["", "plain", "quote ' and \" and \\ backslash", "ünïcödé ✓ 日本語 🏃‍♀️", "line\nbreak\ttab",
                    "{\"not\":\"json\"}", "NULL"]
                {
                    _ = try await roundTrip(pool, text, as: "text")
                }
                // A value too wide for the column type is a decoding error, not a wrong number.
                await #expect {
                    try await pool.queryRow("SELECT \(Int64.max)::int8")?.decode(0, as: Int16.self)
                } throws: { ($0 as? PostgresError)?.kind == .decodingFailed }
            }
        }

        @Test("uuid, numeric and jsonb")
        func structured() async throws {
            try await withPool(try TestEnvironment.superuserURL()) { pool in
                _ = try await roundTrip(pool, UUID(), as: "uuid")
                _ = try await roundTrip(pool, UUID(uuidString: "00000000-0000-0000-0000-000000000000")!, as: "uuid")
                for text in ["ffffffff-ffff-ffff-ffff-ffffffffffff", "0123ABCD-4567-89ef-aBcD-0123456789AB"] {
                    let id = UUID(uuidString: text)!
                    #expect(try await roundTrip(pool, id, as: "uuid") == id)
                }
                for text in ["0", "-1.5", "12345678901234567890.123456789012345678", "-0.00000000000000000000000000000001",
                    "99999999999999999999999999999999999999", "1000000000000000000000000000000000000000000000"]
                {
                    _ = try await roundTrip(pool, Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))!, as: "numeric")
                }
                // numeric(16, 6) as habits stores amounts, and values around the 19 digits that the fast parser takes:
                // the same Decimal as Foundation's parser gives for the text, digit for digit.
                for text in ["0.000000", "1.000000", "-123.450000", "1000000000.000000", "0.000001", "9999999999.999999",
                    "9999999999999999999", "99999999999999999999", "-0.1234567890123456789", "1234567890123456789.5"]
                {
                    let row = try #require(try await pool.queryRow("SELECT \(PostgresNumeric(text))::numeric"))
                    let expected = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))!
                    let decoded = try row.decode(0, as: Decimal.self)
                    #expect(decoded == expected && decoded.description == expected.description, "\(text)")
                }
                // Past Decimal's 38 digits: exact as PostgresNumeric, an error (not silent rounding) as Decimal.
                let long = "123456789012345678901234567890123456789012345678901234567890.000000000000000000000000000001"
                _ = try await roundTrip(pool, PostgresNumeric(long), as: "numeric")
                await #expect {
                    try await pool.queryRow("SELECT \(PostgresNumeric(long))::numeric")?.decode(0, as: Decimal.self)
                } throws: { ($0 as? PostgresError)?.kind == .decodingFailed }

                struct Settings: Codable, Equatable { var name: String; var tags: [String]; var limit: Int }
                let settings = Settings(name: "ünï \"q\"", tags: ["a", "b"], limit: 21)
                let row = try #require(try await pool.queryRow("SELECT \(try PostgresJSONB(encoding: settings))::jsonb"))
                #expect(try row.decode(0, as: PostgresJSONB.self).decode(as: Settings.self) == settings)
                let path = try #require(
                    try await pool.queryRow("SELECT \(try PostgresJSONB(encoding: settings)) ->> 'name'"))
                #expect(try path.decode(0, as: String.self) == settings.name)
            }
        }

        @Test("bytea in binary, including NUL bytes and empty")
        func bytes() async throws {
            try await withPool(try TestEnvironment.superuserURL()) { pool in
                _ = try await roundTrip(pool, Data([0, 1, 2, 0, 255, 92, 120]), as: "bytea")
                _ = try await roundTrip(pool, Data(), as: "bytea")
                _ = try await roundTrip(pool, Data((0..<100_000).map { UInt8($0 % 256) }), as: "bytea")
            }
        }

        @Test("dates far in the past and future, leap days, BC")
        func dates() async throws {
            try await withPool(try TestEnvironment.superuserURL()) { pool in
                let dates = [
                    LocalDate(year: 2026, month: 1, day: 15)!, LocalDate(year: 2024, month: 2, day: 29)!,
                    LocalDate(year: 1970, month: 1, day: 1)!, LocalDate(year: 1, month: 1, day: 1)!,
                    LocalDate(year: 0, month: 12, day: 31)!,  // 1 BC
                    LocalDate(year: -4712, month: 1, day: 1)!,  // 4713 BC, the earliest Postgres date
                    LocalDate(year: 9999, month: 12, day: 31)!, LocalDate(year: 10000, month: 1, day: 1)!,
                    LocalDate(year: 5_874_897, month: 12, day: 31)!,  // the latest Postgres date
                ]
                for date in dates { _ = try await roundTrip(pool, date, as: "date") }
                let text = try await pool.queryRow("SELECT \(LocalDate(year: 0, month: 12, day: 31)!)::date::text")
                #expect(try text?.decode(0, as: String.self) == "0001-12-31 BC")
                #expect(LocalDate(year: 2025, month: 2, day: 29) == nil)
                #expect(LocalDate(daysSinceEpoch: 0).description == "1970-01-01")
            }
        }

        @Test("timestamptz keeps microseconds, in UTC, far from now too")
        func timestamps() async throws {
            try await withPool(try TestEnvironment.superuserURL()) { pool in
                let microsecondInstants: [Int64] = [
                    0, 1, -1, 1_768_470_030_123_456, -2_208_988_800_000_001,  // 1899-12-31 23:59:59.999999
                    4_102_444_800_999_999,  // 2100-01-01 00:00:00.999999
                ]
                for micros in microsecondInstants {
                    let date = Date(timeIntervalSince1970: Double(micros) / 1_000_000)
                    let decoded = try await pool.queryRow("SELECT \(date)::timestamptz")?.decode(0, as: Date.self)
                    let decodedMicros = decoded.map { Int64(($0.timeIntervalSince1970 * 1_000_000).rounded()) }
                    #expect(decodedMicros == micros)
                    let epochMicros = try await pool.queryRow(
                        "SELECT (extract(epoch FROM \(date)::timestamptz) * 1000000)::int8")?.decode(0, as: Int64.self)
                    #expect(epochMicros == micros)
                }
                // Far past and future (BC, year 200000): as exact as a Double is there.
                for seconds in [-70_000_000_000.0, 6_000_000_000_000.0] {
                    let date = Date(timeIntervalSince1970: seconds)
                    let decoded = try #require(try await pool.queryRow("SELECT \(date)::timestamptz")?.decode(0, as: Date.self))
                    #expect(abs(decoded.timeIntervalSince(date)) < 0.01)
                }
                // The server's own clock decodes too.
                let now = try #require(try await pool.queryRow("SELECT now()")?.decode(0, as: Date.self))
                #expect(abs(now.timeIntervalSinceNow) < 60)
            }
        }

        @Test("arrays: text[], uuid[], int8[], int4[], empty and awkward elements")
        func arrays() async throws {
            try await withPool(try TestEnvironment.superuserURL()) { pool in
                _ = try await roundTrip(pool, [String](), as: "text[]")
                _ = try await roundTrip(
                    pool, ["a", "", "with space", "comma,brace}{", "quote\"back\\slash", "NULL", "ünï 🏃"], as: "text[]")
                _ = try await roundTrip(pool, [UUID(), UUID()], as: "uuid[]")
                _ = try await roundTrip(pool, [UUID](), as: "uuid[]")
                _ = try await roundTrip(pool, [Int64.min, 0, Int64.max], as: "int8[]")
                _ = try await roundTrip(pool, [Int32(1), -2], as: "int4[]")
                let ids = [UUID(), UUID()]
                let matched = try await pool.queryRow("SELECT \(ids[1]) = ANY(\(ids))")?.decode(0, as: Bool.self)
                #expect(matched == true)
                // A NULL element cannot become a non-optional Swift element.
                await #expect {
                    try await pool.queryRow("SELECT ARRAY['a', NULL]::text[]")?.decode(0, as: [String].self)
                } throws: { ($0 as? PostgresError)?.kind == .decodingFailed }
            }
        }

        @Test("NULL: optionals of every type, and a clear error for non-optionals")
        func nulls() async throws {
            try await withPool(try TestEnvironment.superuserURL()) { pool in
                let row = try #require(
                    try await pool.queryRow(
                        """
                        SELECT \(nil as UUID?)::uuid, \(nil as String?)::text, \(nil as Int64?)::int8, \
                        \(nil as Decimal?)::numeric, \(nil as Bool?)::bool, \(nil as LocalDate?)::date, \
                        \(nil as Date?)::timestamptz, \(nil as PostgresJSONB?)::jsonb, \(nil as [String]?)::text[], \
                        \(nil as Data?)::bytea, \(Int32(5) as Int32?)::int4 AS five
                        """))
                #expect(try row.decode(0, as: UUID?.self) == nil)
                #expect(try row.decode(1, as: String?.self) == nil)
                #expect(try row.decode(2, as: Int64?.self) == nil)
                #expect(try row.decode(3, as: Decimal?.self) == nil)
                #expect(try row.decode(4, as: Bool?.self) == nil)
                #expect(try row.decode(5, as: LocalDate?.self) == nil)
                #expect(try row.decode(6, as: Date?.self) == nil)
                #expect(try row.decode(7, as: PostgresJSONB?.self) == nil)
                #expect(try row.decode(8, as: [String]?.self) == nil)
                #expect(try row.decode(9, as: Data?.self) == nil)
                #expect(try row.decode("five", as: Int32?.self) == 5)
                #expect(row.isNull(0))
                #expect(throws: PostgresError.self) { try row.decode(0, as: UUID.self) }
            }
        }
    }
}
