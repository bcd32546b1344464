/// The numbers seed 004 §3.10 and DESIGN.md section 3a set.
public enum SocialRules {
    /// Friends per user (SOC-011).
    public static let maximumFriends = 100
    /// Pending outgoing friend requests per user.
    public static let maximumPendingRequests = 100
    /// Lines on a leaderboard: the user and every friend.
    public static let maximumLeaderboardLines = maximumFriends + 1
    /// Lines on the dashboard's leaderboard top.
    public static let dashboardTop = 5
}
