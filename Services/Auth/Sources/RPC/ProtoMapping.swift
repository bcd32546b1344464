internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowCrypto
internal import SwiftProtobuf

// Stored records and domain values as API messages.

extension Habitflow_Auth_V1_User {
    init(_ record: UserRecord) {
        self.init()
        id = record.id.lowercasedString
        email = record.email
        emailVerified = record.emailVerified
        username = record.username
        displayName = record.displayName
        timeZone = record.timeZone
        passwordSet = record.passwordHash != nil
        linkedProviders = record.linkedProviders.compactMap(SocialProviderName.init(rawValue:)).map(\.proto)
        createTime = Google_Protobuf_Timestamp(date: record.createdAt)
        updateTime = Google_Protobuf_Timestamp(date: record.updatedAt)
    }
}

extension Habitflow_Auth_V1_Session {
    init(_ record: SessionRecord, current: Bool) {
        self.init()
        id = record.id.lowercasedString
        deviceID = record.deviceID?.lowercasedString ?? ""
        deviceName = record.deviceName
        clientAddress = record.clientAddress
        createTime = Google_Protobuf_Timestamp(date: record.createdAt)
        lastUseTime = Google_Protobuf_Timestamp(date: record.lastUsedAt)
        expireTime = Google_Protobuf_Timestamp(date: record.expiresAt)
        self.current = current
    }
}

extension Habitflow_Auth_V1_ExportedSession {
    /// A session for the export, with its state at `now`.
    init(_ record: SessionRecord, now: Date) {
        self.init()
        session = Habitflow_Auth_V1_Session(record, current: false)
        if let revokedAt = record.revokedAt { revokeTime = Google_Protobuf_Timestamp(date: revokedAt) }
        revokeReason = record.revokeReason?.proto ?? .unspecified
        state = record.status(at: now).proto
    }
}

extension SessionStatus {
    var proto: Habitflow_Auth_V1_SessionState {
        switch self {
        case .active: .active
        case .revoked: .revoked
        case .expired: .expired
        }
    }
}

extension RevokeReason {
    var proto: Habitflow_Auth_V1_SessionRevokeReason {
        switch self {
        case .logout: .logout
        case .logoutEverywhere: .logoutEverywhere
        case .revoked: .revoked
        case .replaced: .replaced
        case .refreshTokenReuse: .refreshTokenReuse
        case .passwordChanged: .passwordChanged
        case .passwordReset: .passwordReset
        case .socialLink: .socialLink
        }
    }
}

extension Habitflow_Auth_V1_LinkedIdentity {
    init(_ record: LinkedIdentityRecord) {
        self.init()
        provider = record.provider.proto
        subject = record.subject
        email = record.email ?? ""
        linkTime = Google_Protobuf_Timestamp(date: record.linkedAt)
    }
}

extension Habitflow_Auth_V1_AuthTokens {
    init(_ tokens: IssuedTokens) {
        self.init()
        accessToken = tokens.accessToken
        accessTokenExpireTime = Google_Protobuf_Timestamp(date: tokens.accessTokenExpiresAt)
        refreshToken = tokens.refreshToken.value
        refreshTokenExpireTime = Google_Protobuf_Timestamp(date: tokens.refreshTokenExpiresAt)
        sessionID = tokens.sessionID.lowercasedString
        tokenType = "Bearer"
    }
}

extension Habitflow_Auth_V1_VerificationKey {
    init(_ key: StoredSigningKey) {
        self.init()
        keyID = key.keyID
        algorithm = "EdDSA"
        publicKey = Data(key.publicKey.rawRepresentation)
        activateTime = Google_Protobuf_Timestamp(date: key.activateAt)
        if let notAfter = key.notAfter { self.notAfter = Google_Protobuf_Timestamp(date: notAfter) }
    }
}

extension SocialProviderName {
    init?(_ proto: Habitflow_Auth_V1_SocialProvider) {
        switch proto {
        case .google: self = .google
        case .apple: self = .apple
        default: return nil
        }
    }

    var proto: Habitflow_Auth_V1_SocialProvider {
        switch self {
        case .google: .google
        case .apple: .apple
        }
    }
}
