internal import Foundation
internal import HabitFlowArchive
internal import HabitFlowAuthProtos
internal import HabitFlowGatewayProtos
internal import HabitFlowGoalsProtos
internal import HabitFlowHabitsProtos
internal import HabitFlowRPC
internal import HabitFlowServiceKit
internal import HabitFlowSocialProtos
internal import Logging

/// `GatewayService/ExportMyData`: everything the caller has in every service as a ZIP of CSV files (seed 004
/// BACKUP-003), streamed as it is built.
///
/// Each service hands over its part through its internal `ExportUser`: auth, goals and social in one answer each
/// (bounded: a profile, sessions, at most a few thousand goals, tasks and reviews, at most 100 friends), habits as a
/// stream (categories and habits first, then entries a page at a time, since five years of daily entries are the one
/// part that grows without bound). Every part but the entries is in hand before the first byte goes out, so a service
/// that is down fails the call with `UNAVAILABLE` naming it and nothing sent; after that, memory holds one page of
/// entries and one chunk of archive, whatever the user's history.
struct DataExport: Sendable {
    /// The internal export APIs, called signed as `gateway-export` (internal APIs refuse calls signed as the
    /// gateway itself: those are clients' forwarded calls).
    struct Sources: Sendable {
        let auth: Habitflow_Auth_V1_AuthInternal.Client
        let habits: Habitflow_Habits_V1_HabitsInternal.Client
        let goals: Habitflow_Goals_V1_GoalsInternal.Client
        let social: Habitflow_Social_V1_SocialInternal.Client
    }

    /// The identity the export's internal calls are signed with.
    static let caller = "gateway-export"
    /// Parts are larger than any client message: a heavy user's goals with their links and history.
    static let maxPartBytes = 64 << 20
    /// The archive goes out in messages of this size.
    static let chunkSize = 64 << 10

    let sources: Sources
    /// One export per account per `interval` (``GatewayConfiguration/exportInterval``).
    let interval: Duration
    let limiter: RateLimiter<UUID>
    /// Each service's part must arrive within this (or the call's deadline, when shorter); the habits stream is
    /// bounded by the call's deadline, or `streamTimeout` without one.
    let partTimeout: Duration
    let streamTimeout: Duration
    let logger: Logger

    func exportMyData(
        responses: ResponseWriter<Habitflow_Gateway_V1_ExportMyDataChunk>, context: ServerContext
    ) async throws {
        guard let caller = GatewayCallInfo.current?.caller else {
            throw RPCError.unauthenticated(reason: "TOKEN_MISSING", "the export needs a signed-in user")
        }
        if case .limited(let retryAfter) = limiter.acquire(caller.userID) {
            throw RPCError.resourceExhausted(
                "an account may export its data once every \(interval.wholeSecondsRoundedUp) s; retry in "
                    + "\(retryAfter.wholeSecondsRoundedUp) s",
                retryAfter: retryAfter)
        }
        var parts: Parts
        do {
            parts = try await gather(for: caller.userIDString, context: context)
        } catch {
            // Nothing was sent and little was spent: the client may retry as soon as the service is back.
            limiter.giveBack(caller.userID)
            throw error
        }
        let exportTime = Date()
        var archive = ArchiveStream(
            writer: ZipStreamWriter(chunkSize: Self.chunkSize), responses: responses, modified: exportTime,
            fileName: "habitflow-export-\(parts.auth.user.username)-\(ExportFormat.utcDate(exportTime)).zip")
        var names = ExportNames()
        names.categories = Dictionary(parts.habitsHead.categories.map { ($0.id, $0.name) }) { first, _ in first }
        names.habits = Dictionary(parts.habitsHead.habits.map { ($0.id, $0.name) }) { first, _ in first }
        names.goals = Dictionary(parts.goals.goals.map { ($0.id, $0.title) }) { first, _ in first }

        try await archive.write(ExportTables.profile, [parts.auth.user], names: names)
        try await archive.write(ExportTables.sessions, parts.auth.sessions, names: names)
        try await archive.write(ExportTables.linkedAccounts, parts.auth.linkedIdentities, names: names)
        try await archive.write(ExportTables.categories, parts.habitsHead.categories, names: names)
        try await archive.write(ExportTables.habits, parts.habitsHead.habits, names: names)
        try await archive.write(
            ExportTables.habitTargets,
            parts.habitsHead.habits.flatMap { habit in
                habit.targetHistory.map { ExportTables.HabitTarget(habit: habit, period: $0) }
            },
            names: names)
        try await archive.startTable(ExportTables.entries)
        try await archive.writeRows(ExportTables.entries, parts.habitsHead.entries, names: names)
        do {
            while let page = try await parts.entryPages.next() {
                try await archive.writeRows(ExportTables.entries, page.entries, names: names)
            }
        } catch let error as RPCError where error.code != .cancelled {
            throw Self.partFailure("habits", error, logger: logger)
        }
        try archive.finishTable()
        try await archive.write(ExportTables.goals, parts.goals.goals, names: names)
        try await archive.write(
            ExportTables.goalLinks,
            parts.goals.goals.flatMap { goal in goal.links.map { ExportTables.GoalLink(goal: goal, link: $0) } },
            names: names)
        try await archive.write(
            ExportTables.goalTargets,
            parts.goals.goals.flatMap { goal in
                goal.targetHistory.map { ExportTables.GoalTarget(goal: goal, period: $0) }
            },
            names: names)
        try await archive.write(ExportTables.assessments, parts.goals.assessments, names: names)
        try await archive.write(ExportTables.tasks, parts.goals.tasks, names: names)
        try await archive.write(ExportTables.reviews, parts.goals.reviews, names: names)
        try await archive.write(
            ExportTables.reviewRatings,
            parts.goals.reviews.flatMap { review in
                review.ratings.map { ExportTables.ReviewRating(review: review, rating: $0) }
            },
            names: names)
        try await archive.write(ExportTables.friends, parts.social.friends, names: names)
        try await archive.write(ExportTables.friendRequests, parts.social.requests, names: names)
        try await archive.write(ExportTables.blockedUsers, parts.social.blocked, names: names)
        try await archive.write(
            ExportTables.partner, parts.social.hasPartnership ? [parts.social.partnership] : [], names: names)
        try await archive.write(ExportTables.sharingSettings, [parts.social.settings], names: names)
        try await archive.writeFile(
            named: "README.txt", ExportReadme.text(exportTime: exportTime, userID: caller.userIDString))
        try await archive.finish()
    }

    // MARK: Gathering

    private struct Parts {
        var auth: Habitflow_Auth_V1_ExportUserResponse
        /// Categories and habits, and the first entries.
        var habitsHead: Habitflow_Habits_V1_ExportUserResponse
        var entryPages: ResponseStream<Habitflow_Habits_V1_ExportUserResponse>.AsyncIterator
        var goals: Habitflow_Goals_V1_ExportUserResponse
        var social: Habitflow_Social_V1_ExportUserResponse
    }

    /// Every service's part, fetched concurrently; the first failure ends the call before anything is sent.
    private func gather(for userID: String, context: ServerContext) async throws -> Parts {
        let options = callOptions(timeout: partTimeout, context: context)
        // The entries stream runs as long as the client reads: under the call's deadline, or the stream timeout.
        let streamOptions = callOptions(timeout: context.deadline == nil ? streamTimeout : nil, context: context)
        let sources = self.sources
        let logger = self.logger

        async let auth = Self.part("auth", logger: logger) {
            try await sources.auth.exportUser(.with { $0.userID = userID }, options: options)
        }
        async let goals = Self.part("goals", logger: logger) {
            try await sources.goals.exportUser(.with { $0.userID = userID }, options: options)
        }
        async let social = Self.part("social", logger: logger) {
            try await sources.social.exportUser(.with { $0.userID = userID }, options: options)
        }
        let (head, pages) = try await Self.part("habits", logger: logger) {
            let stream = try await sources.habits.exportUser(.with { $0.userID = userID }, options: streamOptions)
            var pages = stream.makeAsyncIterator()
            guard let head = try await pages.next() else {
                throw RPCError(.internal, "the habits export ended before its first message")
            }
            return (head, pages)
        }
        return Parts(
            auth: try await auth, habitsHead: head, entryPages: pages, goals: try await goals,
            social: try await social)
    }

    private func callOptions(timeout: Duration?, context: ServerContext) -> CallOptions {
        var options = CallOptions(timeout: timeout)
        options.maxReceiveMessageSize = Self.maxPartBytes
        if let requestID = GatewayCallInfo.current?.requestID { options.metadata.addRequestID(requestID) }
        return options.propagating(from: context)
    }

    private static func part<Value>(
        _ service: String, logger: Logger, _ body: () async throws -> Value
    ) async throws -> Value {
        do {
            return try await body()
        } catch {
            throw partFailure(service, error, logger: logger)
        }
    }

    /// What the client learns when a service's part fails: which service, and whether to retry; the cause (an
    /// address, an errno) goes to the log only.
    static func partFailure(_ service: String, _ error: any Error, logger: Logger) -> RPCError {
        let status = error as? RPCError ?? RPCError(.unknown, "\(error)")
        logger.warning(
            "export part failed",
            metadata: ["service": "\(service)", "code": "\(status.code)", "error": "\(status.message)"])
        switch status.code {
        case .unavailable, .deadlineExceeded, .resourceExhausted, .cancelled:
            return RPCError(
                status.code == .cancelled ? .cancelled : .unavailable,
                "the \(service) service is unavailable; the export was not made, retry later")
        default:
            return RPCError(.internal, "the \(service) service could not export your data; retry later")
        }
    }
}

/// The archive being written and sent: full chunks go out as they fill, the first carrying the file name.
private struct ArchiveStream: ~Copyable {
    var writer: ZipStreamWriter
    let responses: ResponseWriter<Habitflow_Gateway_V1_ExportMyDataChunk>
    let modified: Date
    var fileName: String?

    init(
        writer: consuming ZipStreamWriter, responses: ResponseWriter<Habitflow_Gateway_V1_ExportMyDataChunk>, modified: Date,
        fileName: String
    ) {
        self.writer = writer
        self.responses = responses
        self.modified = modified
        self.fileName = fileName
    }

    mutating func write<Record>(_ table: ExportTable<Record>, _ records: [Record], names: ExportNames) async throws {
        try await startTable(table)
        try await writeRows(table, records, names: names)
        try finishTable()
    }

    mutating func startTable<Record>(_ table: ExportTable<Record>) async throws {
        try writer.startFile(named: table.fileName, modified: modified)
        try writer.write(CSVWriter.record(table.header))
    }

    /// Rows of the current file (the one `startTable` began).
    mutating func writeRows<Record>(
        _ table: ExportTable<Record>, _ records: some Sequence<Record>, names: ExportNames
    ) async throws {
        for record in records {
            try writer.write(CSVWriter.record(table.row(record, names: names)))
            try await sendReadyChunks()
        }
    }

    mutating func finishTable() throws {
        try writer.finishFile()
    }

    mutating func writeFile(named name: String, _ text: String) async throws {
        try writer.addFile(named: name, modified: modified, contents: text)
        try await sendReadyChunks()
    }

    mutating func finish() async throws {
        try writer.finish()
        try await sendReadyChunks()
    }

    private mutating func sendReadyChunks() async throws {
        for chunk in writer.takeChunks() {
            var message = Habitflow_Gateway_V1_ExportMyDataChunk()
            if let name = fileName {
                message.fileName = name
                fileName = nil
            }
            message.data = Data(chunk.readableBytesView)
            try await responses.write(message)
        }
    }
}

extension Duration {
    fileprivate var wholeSecondsRoundedUp: Int64 {
        let (seconds, attoseconds) = components
        return seconds + (attoseconds > 0 ? 1 : 0)
    }
}
