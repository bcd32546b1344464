internal import Foundation
internal import HabitFlowCrypto
internal import HabitFlowSocialProtos
internal import SwiftProtobuf

// Records as the caller sees them. Never an email: a person is an id, a username and a display name.

extension PersonRecord {
    var proto: Habitflow_Social_V1_Person {
        .with {
            $0.userID = id.lowercasedString
            $0.username = username
            // Names arrive with auth's events; until then (or if auth never set one) the username stands in.
            $0.displayName = displayName.isEmpty ? username : displayName
        }
    }
}

extension RequestKind {
    var proto: Habitflow_Social_V1_RequestKind {
        switch self {
        case .friend: .friend
        case .partner: .partner
        }
    }

    init?(_ proto: Habitflow_Social_V1_RequestKind) {
        switch proto {
        case .friend: self = .friend
        case .partner: self = .partner
        default: return nil
        }
    }
}

extension RequestState {
    var proto: Habitflow_Social_V1_RequestState {
        switch self {
        case .pending: .pending
        case .accepted: .accepted
        case .declined: .declined
        case .canceled: .canceled
        }
    }
}

extension RequestRecord {
    /// The request as `userID` sees it. Its sender sees a declined request as pending, unchanged since it was sent,
    /// and learns who received a friend request only once it is accepted (no account enumeration).
    func proto(for userID: UUID) -> Habitflow_Social_V1_Request {
        let outgoing = sender.id == userID
        let silentlyDeclined = outgoing && state == .declined
        return .with {
            $0.id = id.lowercasedString
            $0.kind = kind.proto
            $0.state = (outgoing ? state.seenBySender : state).proto
            $0.outgoing = outgoing
            if !outgoing {
                $0.other = sender.proto
            } else if let recipient, kind == .partner || state == .accepted {
                $0.other = recipient.proto
            }
            if outgoing && kind == .friend { $0.addressedTo = addressedTo }
            $0.createTime = Google_Protobuf_Timestamp(date: createdAt)
            $0.updateTime = Google_Protobuf_Timestamp(date: silentlyDeclined ? createdAt : updatedAt)
        }
    }
}

extension FriendRecord {
    var proto: Habitflow_Social_V1_Friend {
        .with {
            $0.person = person.proto
            $0.since = Google_Protobuf_Timestamp(date: since)
            $0.partner = partner && deletedAt == nil
        }
    }
}

extension BlockRecord {
    var proto: Habitflow_Social_V1_BlockedUser {
        .with {
            $0.person = person.proto
            $0.blockTime = Google_Protobuf_Timestamp(date: createdAt)
        }
    }
}

extension PartnershipRecord {
    var proto: Habitflow_Social_V1_Partnership {
        .with {
            $0.id = id.lowercasedString
            $0.partner = partner.proto
            $0.startTime = Google_Protobuf_Timestamp(date: startedAt)
        }
    }
}

extension ChangedResource.Settings {
    var proto: Habitflow_Social_V1_SharingSettings {
        .with {
            $0.shareWeeklyScore = shareWeeklyScore
            $0.privateMode = privateMode
            $0.sharedCategoryIds = sharedCategoryIDs.map(\.lowercasedString)
            if let updatedAt { $0.updateTime = Google_Protobuf_Timestamp(date: updatedAt) }
        }
    }
}
