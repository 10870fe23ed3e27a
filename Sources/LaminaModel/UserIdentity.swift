import Foundation

/// A user's identity as an app backend set it through the Server API (Layer's identity
/// object), as devices learn it (SPEC §6.4 `identity-changed`): the string properties by
/// their Platform API names (`display_name`, `avatar_url`, `first_name`, `last_name`,
/// `email_address`, `phone_number`, `public_key`) and a flat string metadata map.
public struct UserIdentity: Hashable, Sendable {
    public var userID: UserID
    public var values: [String: String]
    public var metadata: [String: String]
    /// The user's presence and when they were last seen, as a device last learned it (SPEC
    /// §6.6; Layer's `identity.presence`); nil when none arrived. Not part of what the Server
    /// API sets: the SDK fills it in when it shows an identity.
    public var presence: Presence?

    public init(
        userID: UserID, values: [String: String] = [:], metadata: [String: String] = [:], presence: Presence? = nil
    ) {
        self.userID = userID
        self.values = values
        self.metadata = metadata
        self.presence = presence
    }

    public var displayName: String? { values["display_name"] }
    public var avatarURL: String? { values["avatar_url"] }
    public var firstName: String? { values["first_name"] }
    public var lastName: String? { values["last_name"] }
    public var emailAddress: String? { values["email_address"] }
    public var phoneNumber: String? { values["phone_number"] }
    /// When the user was last seen connected and visible (with ``presence``).
    public var lastSeenAt: Timestamp? { presence?.lastSeenAt }
}
