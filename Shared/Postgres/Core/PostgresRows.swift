/// A result column: its name and type.
public struct PostgresColumn: Sendable, Hashable {
    public var name: String
    public var type: PostgresType
}

/// The rows of one statement's result, copied out of libpq (text format).
public struct PostgresRows: Sendable, RandomAccessCollection {
    public let columns: [PostgresColumn]
    /// For INSERT/UPDATE/DELETE (and SELECT): how many rows the statement touched.
    public let affectedRows: Int
    @usableFromInline let storage: Storage

    /// All cells' bytes back to back, and per cell its range (`nil` for NULL), row-major.
    @usableFromInline final class Storage: Sendable {
        @usableFromInline let bytes: [UInt8]
        @usableFromInline let cells: [Range<Int>?]
        init(bytes: [UInt8], cells: [Range<Int>?]) {
            self.bytes = bytes
            self.cells = cells
        }
    }

    init(columns: [PostgresColumn], affectedRows: Int, bytes: [UInt8], cells: [Range<Int>?]) {
        self.columns = columns
        self.affectedRows = affectedRows
        self.storage = Storage(bytes: bytes, cells: cells)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { columns.isEmpty ? 0 : storage.cells.count / columns.count }
    public subscript(position: Int) -> PostgresRow { PostgresRow(rows: self, index: position) }

    /// The only row, `nil` if there is none; more than one is an error.
    public func singleRow() throws(PostgresError) -> PostgresRow? {
        guard count <= 1 else {
            throw PostgresError(kind: .decodingFailed, message: "expected at most one row, got \(count)")
        }
        return first
    }

    @usableFromInline func columnIndex(named name: String) -> Int? {
        columns.firstIndex { $0.name == name }
    }
}

/// One result row. Decode columns by position or name:
///
/// ```swift
/// let id = try row.decode(0, as: UUID.self)
/// let note = try row.decode("note", as: String?.self)
/// ```
///
/// `decode` is inlinable: specialized in the caller for each type it decodes, instead of a generic call per column
/// that looks up the type's metadata and witness table at run time (rows are decoded on every read of every service).
public struct PostgresRow: Sendable {
    @usableFromInline let rows: PostgresRows
    @usableFromInline let index: Int

    public var columns: [PostgresColumn] { rows.columns }

    public func isNull(_ column: Int) -> Bool {
        rows.storage.cells[index * rows.columns.count + column] == nil
    }

    @inlinable
    public func decode<Value: PostgresDecodable>(_ column: Int, as type: Value.Type = Value.self) throws(PostgresError)
        -> Value
    {
        guard column >= 0, column < rows.columns.count else {
            throw PostgresError(kind: .decodingFailed, message: "no column \(column) (row has \(rows.columns.count))")
        }
        let description = rows.columns[column]
        guard let range = rows.storage.cells[index * rows.columns.count + column] else {
            guard let null = Value.postgresNull else {
                throw PostgresError(
                    kind: .decodingFailed,
                    message: "column \"\(description.name)\" is NULL; decode it as \(Value.self)? instead")
            }
            return null
        }
        let cell = PostgresCell(bytes: rows.storage.bytes[range], type: description.type, columnName: description.name)
        return try Value(postgresCell: cell)
    }

    @inlinable
    public func decode<Value: PostgresDecodable>(_ column: String, as type: Value.Type = Value.self) throws(PostgresError)
        -> Value
    {
        guard let position = rows.columnIndex(named: column) else {
            throw PostgresError(kind: .decodingFailed, message: "no column named \"\(column)\"")
        }
        return try decode(position, as: Value.self)
    }
}
