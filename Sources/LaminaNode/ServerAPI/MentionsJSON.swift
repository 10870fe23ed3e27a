import LaminaModel

/// A message's mentions over HTTP (a Lamina extension of Layer's APIs, SPEC §3.17): a send's
/// optional `mentions`, an array of at most 250 user ids (or, as elsewhere, identity ids);
/// a message's representation has `mentions` only when it mentions someone.
enum MentionsJSON {
    /// The users a send's body mentions (none when the property is absent or null).
    static func mentions(_ body: [String: JSONValue]) throws(ServerAPIError) -> Set<UserID> {
        guard let raw = body["mentions"], !raw.isNull else { return [] }
        guard let array = raw.array, array.count <= Limits.maxParticipants else {
            throw .invalidProperty(
                "mentions", "mentions must be an array of at most \(Limits.maxParticipants) user ids")
        }
        var users = Set<UserID>()
        for value in array { users.insert(try ServerAPIRepresentation.user(value, property: "mentions")) }
        return users
    }

    /// A representation's `mentions`: nil (left out) when the message mentions no one.
    static func representation(_ mentions: Set<UserID>, _ name: (UserID) -> String) -> [String]? {
        mentions.isEmpty ? nil : mentions.sorted().map(name)
    }
}
