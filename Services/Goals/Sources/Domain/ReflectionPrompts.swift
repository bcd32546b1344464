/// The sections of the Reflect tab (seed 004 REF-001).
public enum PromptSection: String, Sendable, Hashable, CaseIterable {
    case planning
    case review
}

/// A reflection prompt: a question shown as a card (seed 004 REF-004). Nothing of the answers is stored (REF-005).
public struct ReflectionPrompt: Sendable, Hashable {
    /// Stable while the prompt's meaning stays: a rewording keeps it, a new question gets a new one.
    public var id: String
    public var section: PromptSection
    public var text: String
}

/// The static, versioned list of reflection prompts the goals service serves (DESIGN.md section 3a, "Suggestions and
/// prompts"), in our own wording. Change `version` whenever a prompt is added, removed or reworded.
public enum ReflectionPrompts {
    public static let version = "2026-11-1"

    /// Planning first, then Review; each section in the order it is shown.
    public static let all: [ReflectionPrompt] = [
        .init(id: "planning-good-week", section: .planning, text: "What would make this week a good week?"),
        .init(
            id: "planning-one-step", section: .planning,
            text: "Which goal needs one small step from you this week, and what is that step?"),
        .init(
            id: "planning-calendar", section: .planning,
            text: "When in your calendar will the habits you are behind on actually happen?"),
        .init(
            id: "planning-say-no", section: .planning,
            text: "What will you say no to this week to protect time for what matters?"),
        .init(
            id: "planning-obstacle", section: .planning,
            text: "What is most likely to get in your way, and how will you handle it?"),
        .init(
            id: "planning-bigger-picture", section: .planning,
            text: "How does this week's plan move your longer-term goals forward?"),
        .init(
            id: "review-moved-most", section: .review,
            text: "Which goal moved most since the last review, and why?"),
        .init(id: "review-stalled", section: .review, text: "Which goal stalled, and what got in the way?"),
        .init(
            id: "review-proud", section: .review,
            text: "What are you proud of from this period, however small?"),
        .init(
            id: "review-keep-doing", section: .review,
            text: "Which habit helped you most, and how can you keep it going?"),
        .init(
            id: "review-change", section: .review,
            text: "What would you do differently if you could run this period again?"),
        .init(
            id: "review-still-matters", section: .review,
            text: "Is each of your goals still worth pursuing, or should one change or end?"),
    ]

    /// The prompts of `section`, or all of them for `nil`.
    public static func prompts(in section: PromptSection?) -> [ReflectionPrompt] {
        guard let section else { return all }
        return all.filter { $0.section == section }
    }
}
