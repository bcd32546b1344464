internal import HabitFlowAuthProtos
internal import HabitFlowGoalsProtos
internal import HabitFlowHabitsProtos
internal import HabitFlowSocialProtos

private typealias F = ExportFormat

extension Habitflow_Auth_V1_User: CreatedRecord, UpdatedRecord {}
extension Habitflow_Habits_V1_Category: CreatedRecord, UpdatedRecord, DeletableRecord {}
extension Habitflow_Habits_V1_Habit: CreatedRecord, UpdatedRecord, DeletableRecord {}
extension Habitflow_Habits_V1_Entry: CreatedRecord, DeletableRecord {}
extension Habitflow_Goals_V1_Goal: CreatedRecord, UpdatedRecord, DeletableRecord {}
extension Habitflow_Goals_V1_Assessment: CreatedRecord, DeletableRecord {}
extension Habitflow_Goals_V1_Task: CreatedRecord, UpdatedRecord, DeletableRecord {}
extension Habitflow_Goals_V1_Review: CreatedRecord, UpdatedRecord, DeletableRecord {}
extension Habitflow_Social_V1_Request: CreatedRecord, UpdatedRecord {}
extension Habitflow_Social_V1_SharingSettings: UpdatedRecord {}

/// The files of the data export, in archive order, with their columns (seed 004 BACKUP-003). A row type that is
/// not a service's own message pairs one with what it belongs to (a habit's target period with the habit).
enum ExportTables {
    // MARK: auth

    static let profile = ExportTable<Habitflow_Auth_V1_User>(
        "profile.csv", about: "Your account: one row.",
        [
            .init(name: "user_id", about: "Your user id.") { user, _ in user.id },
            .init(name: "email", about: "Your sign-in email address.") { user, _ in user.email },
            .init(name: "email_verified", about: "Whether the address was confirmed.") { user, _ in
                F.bool(user.emailVerified)
            },
            .init(name: "username", about: "Your unique username.") { user, _ in user.username },
            .init(name: "display_name", about: "The name friends see.") { user, _ in user.displayName },
            .init(name: "time_zone", about: "Your IANA time zone; your days and weeks are counted in it.") { user, _ in
                user.timeZone
            },
            .init(name: "password_set", about: "Whether you can sign in with a password.") { user, _ in
                F.bool(user.passwordSet)
            },
            .init(name: "linked_providers", about: "Social sign-in providers linked to the account.") { user, _ in
                F.list(user.linkedProviders.map(F.enumName))
            },
            .createTime("When the account was created."),
            .updateTime("When the profile last changed."),
        ])

    static let sessions = ExportTable<Habitflow_Auth_V1_ExportedSession>(
        "sessions.csv", about: "A signed-in device: one row per session, ended ones of the last 30 days included.",
        [
            .init(name: "session_id", about: "The session's id.") { session, _ in session.session.id },
            .init(name: "device_id", about: "The id the app gave the device.") { session, _ in
                session.session.deviceID
            },
            .init(name: "device_name", about: "The device's name.") { session, _ in session.session.deviceName },
            .init(name: "client_address", about: "The address it signed in from.") { session, _ in
                session.session.clientAddress
            },
            .init(name: "create_time", about: "When it signed in.") { session, _ in
                F.time(session.session.createTime, isSet: session.session.hasCreateTime)
            },
            .init(name: "last_use_time", about: "When it was last used.") { session, _ in
                F.time(session.session.lastUseTime, isSet: session.session.hasLastUseTime)
            },
            .init(name: "expire_time", about: "When it ends unless used again.") { session, _ in
                F.time(session.session.expireTime, isSet: session.session.hasExpireTime)
            },
            .init(name: "state", about: "active, revoked or expired at the time of the export.") { session, _ in
                F.enumName(session.state)
            },
            .init(name: "revoke_time", about: "When it was ended; empty if not.") { session, _ in
                F.time(session.revokeTime, isSet: session.hasRevokeTime)
            },
            .init(
                name: "revoke_reason",
                about: "Why: logout, logout_everywhere, revoked, replaced, refresh_token_reuse, password_changed, "
                    + "password_reset or social_link; empty if not ended."
            ) { session, _ in session.revokeReason == .unspecified ? "" : F.enumName(session.revokeReason) },
        ])

    static let linkedAccounts = ExportTable<Habitflow_Auth_V1_LinkedIdentity>(
        "linked_accounts.csv", about: "A Google or Apple identity that signs in to your account: one row each.",
        [
            .init(name: "provider", about: "google or apple.") { identity, _ in F.enumName(identity.provider) },
            .init(name: "subject", about: "The provider's id of you (not a credential).") { identity, _ in
                identity.subject
            },
            .init(name: "email", about: "The email the provider gave when it was linked.") { identity, _ in
                identity.email
            },
            .init(name: "link_time", about: "When it was linked.") { identity, _ in
                F.time(identity.linkTime, isSet: identity.hasLinkTime)
            },
        ])

    // MARK: habits

    static let categories = ExportTable<Habitflow_Habits_V1_Category>(
        "categories.csv", about: "One row per category, deleted ones included.",
        [
            .init(name: "category_id", about: "The category's id.") { category, _ in category.id },
            .init(name: "name", about: "Its name.") { category, _ in category.name },
            .init(name: "position", about: "Its place in your list, 0 first.") { category, _ in
                String(category.position)
            },
            .init(name: "is_default", about: "One of the categories every account starts with.") { category, _ in
                F.bool(category.isDefault)
            },
            .createTime(),
            .updateTime(),
            .deleted(),
            .deleteTime(),
        ])

    static let habits = ExportTable<Habitflow_Habits_V1_Habit>(
        "habits.csv", about: "One row per habit, deleted ones included.",
        [
            .init(name: "habit_id", about: "The habit's id.") { habit, _ in habit.id },
            .init(name: "name", about: "Its name.") { habit, _ in habit.name },
            .init(name: "category_id", about: "Its category's id; empty: Uncategorized.") { habit, _ in
                habit.categoryID
            },
            .init(name: "category_name", about: "Its category's name.") { habit, names in
                names.category(habit.categoryID)
            },
            .init(name: "weekly_target", about: "Check-ins a week it aims for now (see habit_targets.csv).") {
                habit, _ in String(habit.weeklyTarget)
            },
            .init(name: "unit", about: "The unit of an entry's value; empty: a plain check-in.") { habit, _ in
                habit.unit
            },
            .init(name: "live_from", about: "The first day it counts.") { habit, _ in
                F.date(year: habit.liveFrom.year, month: habit.liveFrom.month, day: habit.liveFrom.day)
            },
            .init(name: "deleted_on", about: "The day it was deleted, in your time zone; empty if not.") { habit, _ in
                F.date(year: habit.deletedOn.year, month: habit.deletedOn.month, day: habit.deletedOn.day)
            },
            .createTime(),
            .updateTime(),
            .deleted(),
            .deleteTime(),
        ])

    struct HabitTarget: Sendable {
        var habit: Habitflow_Habits_V1_Habit
        var period: Habitflow_Habits_V1_WeeklyTargetPeriod
    }

    static let habitTargets = ExportTable<HabitTarget>(
        "habit_targets.csv", about: "A habit's weekly target from a week on: one row per change, oldest first.",
        [
            .init(name: "habit_id", about: "The habit's id.") { target, _ in target.habit.id },
            .init(name: "habit_name", about: "The habit's name.") { target, _ in target.habit.name },
            .init(name: "from_week", about: "The ISO week the target applies from.") { target, _ in
                F.week(year: target.period.fromWeek.year, week: target.period.fromWeek.week)
            },
            .init(name: "weekly_target", about: "Check-ins a week from then on.") { target, _ in
                String(target.period.weeklyTarget)
            },
        ])

    static let entries = ExportTable<Habitflow_Habits_V1_Entry>(
        "entries.csv",
        about: "One row per check-in, by date; entries removed (marked not done) are included with deleted = true.",
        [
            .init(name: "entry_id", about: "The entry's id.") { entry, _ in entry.id },
            .init(name: "habit_id", about: "The habit checked in.") { entry, _ in entry.habitID },
            .init(name: "habit_name", about: "The habit's name.") { entry, names in names.habit(entry.habitID) },
            .init(name: "date", about: "The day it counts for, in your time zone.") { entry, _ in
                F.date(year: entry.date.year, month: entry.date.month, day: entry.date.day)
            },
            .init(name: "value", about: "The amount, in the habit's unit (1 for a plain check-in).") { entry, _ in
                F.number(entry.value)
            },
            .createTime("When it was recorded."),
            .deleted("Whether it was removed."),
            .deleteTime("When it was removed; empty if not."),
        ])

    // MARK: goals

    static let goals = ExportTable<Habitflow_Goals_V1_Goal>(
        "goals.csv", about: "One row per goal you created, deleted ones included.",
        [
            .init(name: "goal_id", about: "The goal's id.") { goal, _ in goal.id },
            .init(name: "title", about: "Its title.") { goal, _ in goal.title },
            .init(name: "description", about: "Its description.") { goal, _ in goal.description_p },
            .init(name: "icon", about: "Its emoji; empty: none.") { goal, _ in goal.icon },
            .init(name: "category_id", about: "Its category's id; empty: Uncategorized.") { goal, _ in
                goal.categoryID
            },
            .init(name: "category_name", about: "Its category's name.") { goal, names in
                names.category(goal.categoryID)
            },
            .init(
                name: "type",
                about: "weekly_habit, recurring_task, count, quantity, level or rating (how progress is counted)."
            ) { goal, _ in F.enumName(goal.type) },
            .init(name: "target_value", about: "The target now (count, quantity, weekly number).") { goal, _ in
                F.number(goal.target.value)
            },
            .init(name: "target_unit", about: "The unit of a quantity goal.") { goal, _ in goal.target.unit },
            .init(name: "target_levels", about: "A level goal's levels, in order, joined by ';'.") { goal, _ in
                F.list(goal.target.levels)
            },
            .init(name: "rating_scale", about: "A rating goal's scale (ratings go from 1 to it).") { goal, _ in
                goal.target.ratingScale == 0 ? "" : String(goal.target.ratingScale)
            },
            .init(name: "horizon", about: "How long it runs (one_week … ten_years, ongoing).") { goal, _ in
                F.enumName(goal.horizon)
            },
            .init(name: "parent_goal_id", about: "The goal it belongs to; empty: none.") { goal, _ in
                goal.parentGoalID
            },
            .init(name: "start_date", about: "The Monday it starts.") { goal, _ in
                F.date(year: goal.startDate.year, month: goal.startDate.month, day: goal.startDate.day)
            },
            .init(name: "end_date", about: "The Sunday it ends; empty: ongoing.") { goal, _ in
                F.date(year: goal.endDate.year, month: goal.endDate.month, day: goal.endDate.day)
            },
            .init(name: "target_date", about: "The date you gave it (informational); empty: none.") { goal, _ in
                F.date(year: goal.targetDate.year, month: goal.targetDate.month, day: goal.targetDate.day)
            },
            .init(name: "shared", about: "Shared with your partner.") { goal, _ in F.bool(goal.shared) },
            .init(name: "partner_id", about: "The partner it is shared with; empty: none.") { goal, _ in
                goal.partnerID
            },
            .init(name: "state", about: "active, paused, archived or completed (what you set).") { goal, _ in
                F.enumName(goal.state)
            },
            .init(
                name: "status",
                about: "not_started, in_progress, paused, completed, expired or archived (what it is now)."
            ) { goal, _ in F.enumName(goal.status) },
            .init(name: "progress", about: "Its progress when exported, as the app shows it.") { goal, _ in
                goal.progress.display
            },
            .init(name: "progress_percent", about: "The same, 0 to 100.") { goal, _ in
                String(goal.progress.percent)
            },
            .createTime(),
            .updateTime(),
            .deleted(),
            .deleteTime(),
        ])

    struct GoalLink: Sendable {
        var goal: Habitflow_Goals_V1_Goal
        var link: Habitflow_Goals_V1_GoalLink
    }

    static let goalLinks = ExportTable<GoalLink>(
        "goal_links.csv",
        about: "A habit linked to a goal, for the weeks from linked_from through linked_until: one row per link.",
        [
            .init(name: "goal_id", about: "The goal.") { link, _ in link.goal.id },
            .init(name: "goal_title", about: "Its title.") { link, _ in link.goal.title },
            .init(name: "habit_id", about: "The habit linked.") { link, _ in link.link.habitID },
            .init(name: "habit_name", about: "The habit's name.") { link, _ in link.link.habitName },
            .init(name: "habit_owner_id", about: "Whose habit it is (your partner's on a shared goal).") { link, _ in
                link.link.userID
            },
            .init(name: "linked_from", about: "The Monday of the first week it counts.") { link, _ in
                F.date(year: link.link.linkedFrom.year, month: link.link.linkedFrom.month, day: link.link.linkedFrom.day)
            },
            .init(name: "linked_until", about: "The Sunday of the last week it counts; empty: still linked.") {
                link, _ in
                F.date(
                    year: link.link.linkedUntil.year, month: link.link.linkedUntil.month,
                    day: link.link.linkedUntil.day)
            },
            .init(name: "habit_deleted", about: "Whether the habit was deleted since.") { link, _ in
                F.bool(link.link.habitDeleted)
            },
        ])

    struct GoalTarget: Sendable {
        var goal: Habitflow_Goals_V1_Goal
        var period: Habitflow_Goals_V1_TargetPeriod
    }

    static let goalTargets = ExportTable<GoalTarget>(
        "goal_targets.csv", about: "A goal's target from a week on: one row per change, oldest first.",
        [
            .init(name: "goal_id", about: "The goal.") { target, _ in target.goal.id },
            .init(name: "goal_title", about: "Its title.") { target, _ in target.goal.title },
            .init(name: "from_week", about: "The ISO week the target applies from.") { target, _ in
                F.week(year: target.period.fromWeek.year, week: target.period.fromWeek.week)
            },
            .init(name: "target_value", about: "The target from then on.") { target, _ in
                F.number(target.period.value)
            },
        ])

    static let assessments = ExportTable<Habitflow_Goals_V1_Assessment>(
        "assessments.csv", about: "A level or rating you gave a goal on a day: one row each, deleted ones included.",
        [
            .init(name: "assessment_id", about: "The assessment's id.") { assessment, _ in assessment.id },
            .init(name: "goal_id", about: "The goal.") { assessment, _ in assessment.goalID },
            .init(name: "goal_title", about: "Its title.") { assessment, names in names.goal(assessment.goalID) },
            .init(name: "date", about: "The day it is for.") { assessment, _ in
                F.date(year: assessment.date.year, month: assessment.date.month, day: assessment.date.day)
            },
            .init(name: "value", about: "The level (1 = the first) or the rating.") { assessment, _ in
                String(assessment.value)
            },
            .init(name: "note", about: "Your note.") { assessment, _ in assessment.note },
            .createTime("When it was recorded."),
            .deleted(),
            .deleteTime(),
        ])

    static let tasks = ExportTable<Habitflow_Goals_V1_Task>(
        "tasks.csv", about: "A planning task of a week: one row each, by week, deleted ones included.",
        [
            .init(name: "task_id", about: "The task's id.") { task, _ in task.id },
            .init(name: "title", about: "Its title.") { task, _ in task.title },
            .init(name: "week", about: "The ISO week it is planned for.") { task, _ in
                F.week(year: task.week.year, week: task.week.week)
            },
            .init(name: "goal_id", about: "The goal it is linked to; empty: none.") { task, _ in task.goalID },
            .init(name: "goal_title", about: "That goal's title.") { task, names in names.goal(task.goalID) },
            .init(name: "completed", about: "Whether it is done.") { task, _ in F.bool(task.completed) },
            .init(name: "completed_on", about: "The day it was done; empty if not.") { task, _ in
                F.date(year: task.completedOn.year, month: task.completedOn.month, day: task.completedOn.day)
            },
            .createTime(),
            .updateTime(),
            .deleted(),
            .deleteTime(),
        ])

    static let reviews = ExportTable<Habitflow_Goals_V1_Review>(
        "reviews.csv", about: "A 12-week or annual review: one row each, oldest first, deleted ones included.",
        [
            .init(name: "review_id", about: "The review's id.") { review, _ in review.id },
            .init(name: "type", about: "twelve_week or annual.") { review, _ in F.enumName(review.type) },
            .init(name: "date", about: "The day of the review.") { review, _ in
                F.date(year: review.date.year, month: review.date.month, day: review.date.day)
            },
            .init(name: "next_review_date", about: "When the next one is due.") { review, _ in
                F.date(
                    year: review.nextReviewDate.year, month: review.nextReviewDate.month,
                    day: review.nextReviewDate.day)
            },
            .init(name: "note", about: "Your notes.") { review, _ in review.note },
            .createTime(),
            .updateTime(),
            .deleted(),
            .deleteTime(),
        ])

    struct ReviewRating: Sendable {
        var review: Habitflow_Goals_V1_Review
        var rating: Habitflow_Goals_V1_CategoryRating
    }

    static let reviewRatings = ExportTable<ReviewRating>(
        "review_ratings.csv", about: "The rating a review gave a category: one row per category rated.",
        [
            .init(name: "review_id", about: "The review.") { rating, _ in rating.review.id },
            .init(name: "review_date", about: "Its day.") { rating, _ in
                F.date(year: rating.review.date.year, month: rating.review.date.month, day: rating.review.date.day)
            },
            .init(name: "category_id", about: "The category rated.") { rating, _ in rating.rating.categoryID },
            .init(name: "category_name", about: "Its name.") { rating, names in
                names.category(rating.rating.categoryID)
            },
            .init(name: "rating", about: "1 to 10.") { rating, _ in String(rating.rating.rating) },
        ])

    // MARK: social

    static let friends = ExportTable<Habitflow_Social_V1_Friend>(
        "friends.csv", about: "One row per friend.",
        [
            .init(name: "user_id", about: "Your friend's user id.") { friend, _ in friend.person.userID },
            .init(name: "username", about: "Their username.") { friend, _ in friend.person.username },
            .init(name: "display_name", about: "Their display name.") { friend, _ in friend.person.displayName },
            .init(name: "since", about: "When you became friends.") { friend, _ in
                F.time(friend.since, isSet: friend.hasSince)
            },
            .init(name: "partner", about: "Whether they are your partner.") { friend, _ in F.bool(friend.partner) },
        ])

    static let friendRequests = ExportTable<Habitflow_Social_V1_Request>(
        "friend_requests.csv", about: "Friend and partner requests you sent or received (canceled ones are gone).",
        [
            .init(name: "request_id", about: "The request's id.") { request, _ in request.id },
            .init(name: "kind", about: "friend or partner.") { request, _ in F.enumName(request.kind) },
            .init(name: "state", about: "pending, accepted or declined.") { request, _ in F.enumName(request.state) },
            .init(name: "direction", about: "outgoing (you sent it) or incoming.") { request, _ in
                request.outgoing ? "outgoing" : "incoming"
            },
            .init(name: "other_user_id", about: "The other person's user id.") { request, _ in request.other.userID },
            .init(name: "other_username", about: "Their username.") { request, _ in request.other.username },
            .init(name: "other_display_name", about: "Their display name.") { request, _ in
                request.other.displayName
            },
            .init(name: "addressed_to", about: "The email or username an outgoing request was sent to.") {
                request, _ in request.addressedTo
            },
            .createTime("When it was sent."),
            .updateTime("When it was last answered."),
        ])

    static let blockedUsers = ExportTable<Habitflow_Social_V1_BlockedUser>(
        "blocked_users.csv", about: "One row per person you blocked.",
        [
            .init(name: "user_id", about: "Their user id.") { blocked, _ in blocked.person.userID },
            .init(name: "username", about: "Their username.") { blocked, _ in blocked.person.username },
            .init(name: "display_name", about: "Their display name.") { blocked, _ in blocked.person.displayName },
            .init(name: "block_time", about: "When you blocked them.") { blocked, _ in
                F.time(blocked.blockTime, isSet: blocked.hasBlockTime)
            },
        ])

    static let partner = ExportTable<Habitflow_Social_V1_Partnership>(
        "partner.csv", about: "Your current partner: one row, or none.",
        [
            .init(name: "partnership_id", about: "The partnership's id.") { partnership, _ in partnership.id },
            .init(name: "partner_user_id", about: "Your partner's user id.") { partnership, _ in
                partnership.partner.userID
            },
            .init(name: "partner_username", about: "Their username.") { partnership, _ in
                partnership.partner.username
            },
            .init(name: "partner_display_name", about: "Their display name.") { partnership, _ in
                partnership.partner.displayName
            },
            .init(name: "start_time", about: "When the partnership began.") { partnership, _ in
                F.time(partnership.startTime, isSet: partnership.hasStartTime)
            },
        ])

    static let sharingSettings = ExportTable<Habitflow_Social_V1_SharingSettings>(
        "sharing_settings.csv", about: "What your friends see of you: one row.",
        [
            .init(name: "share_weekly_score", about: "Your weekly score is on your friends' leaderboards.") {
                settings, _ in F.bool(settings.shareWeeklyScore)
            },
            .init(name: "private_mode", about: "Private mode: nothing is shared, whatever else is set.") {
                settings, _ in F.bool(settings.privateMode)
            },
            .init(name: "shared_category_ids", about: "Categories whose scores you share, joined by ';'.") {
                settings, _ in F.list(settings.sharedCategoryIds)
            },
            .init(name: "shared_category_names", about: "Their names, in the same order, joined by ';'.") {
                settings, names in F.list(settings.sharedCategoryIds.map(names.category))
            },
            .updateTime("When you last changed them; empty: never."),
        ])
}
