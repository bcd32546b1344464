/// A ``ZipStreamWriter`` call that was refused (a call out of order, a bad name, or an archive past the limits of ZIP
/// without ZIP64), or an archive ``ZipDirectory`` cannot read.
public struct ZipError: Error, CustomStringConvertible, Sendable {
    /// What kind of failure this is; new codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String, Hashable, Sendable {
            case noOpenFile
            case fileStillOpen
            case finished
            case failed
            case invalidName
            case duplicateName
            case tooManyEntries
            case entryTooLarge
            case archiveTooLarge
            case invalidArchive
        }

        private let value: Value
        private init(_ value: Value) { self.value = value }

        public var description: String { value.rawValue }

        /// `write` or `finishFile()` without a file started by `startFile`. The writer is unchanged.
        public static let noOpenFile = Code(.noOpenFile)
        /// `startFile` or `finish()` while a file is open (finish it with `finishFile()` first). The writer is
        /// unchanged.
        public static let fileStillOpen = Code(.fileStillOpen)
        /// Any call but `takeChunks()` after `finish()`.
        public static let finished = Code(.finished)
        /// Any call but `takeChunks()` after an ``entryTooLarge`` or ``archiveTooLarge`` error (the `cause`). The
        /// chunks handed out are no valid archive: abandon it.
        public static let failed = Code(.failed)
        /// A file name that is empty, longer than 65,535 bytes of UTF-8, contains NUL or a backslash, or has an empty
        /// (`/a`, `a//b`, `a/`), `.` or `..` component, judged on its UTF-8 bytes as unzip tools see them (a `\` or
        /// `/` followed by a combining mark counts too). The writer is unchanged.
        public static let invalidName = Code(.invalidName)
        /// A file name the archive already has (compared as Swift compares strings: canonically equivalent Unicode is
        /// the same name, as it is on macOS file systems). The writer is unchanged.
        public static let duplicateName = Code(.duplicateName)
        /// A file past the 65,535 files an archive without ZIP64 can hold. The writer is unchanged: it can still finish
        /// the archive with the files it has.
        public static let tooManyEntries = Code(.tooManyEntries)
        /// A file of more than ``ZipStreamWriter/maximumSize`` bytes, before or after compression. The writer has
        /// failed.
        public static let entryTooLarge = Code(.entryTooLarge)
        /// An archive of more than ``ZipStreamWriter/maximumSize`` bytes. The writer has failed.
        public static let archiveTooLarge = Code(.archiveTooLarge)
        /// ``ZipDirectory`` could not read an archive's table of contents.
        public static let invalidArchive = Code(.invalidArchive)
    }

    public var code: Code
    /// What was refused, in words.
    public var message: String
    /// For ``Code/failed``: the error that made the writer fail.
    public var cause: (any Error)?

    public init(code: Code, message: String, cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String {
        var text = "\(code): \(message)"
        if let cause { text += ", caused by: \(cause)" }
        return text
    }
}
