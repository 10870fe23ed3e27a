import Foundation

/// A user's identity as an app backend set it through the Server API (Layer's identity
/// object), as devices learn it (SPEC §6.4 `identity-changed`): the string properties by
/// their Platform API names (`display_name`, `avatar_url`, `first_name`, `last_name`,
/// `email_address`, `phone_number`, `public_key`) and a flat string metadata map.
public struct UserIdentity: Hashable, Sendable {
    public var userID: UserID
    public var values: [String: String]
    public var metadata: [String: String]

    public init(userID: UserID, values: [String: String] = [:], metadata: [String: String] = [:]) {
        self.userID = userID
        self.values = values
        self.metadata = metadata
    }

    public var displayName: String? { values["display_name"] }
    public var avatarURL: String? { values["avatar_url"] }
    public var firstName: String? { values["first_name"] }
    public var lastName: String? { values["last_name"] }
    public var emailAddress: String? { values["email_address"] }
    public var phoneNumber: String? { values["phone_number"] }
}
