/// The rules of a reaction's key (SPEC §6.9): the short string a user reacts with, such as an
/// emoji. Keys are compared as bytes: no normalization.
public enum ReactionKey {
    /// The longest key, in UTF-8 bytes (SPEC §3.15).
    public static let maxBytes = 64
    /// The most tags one remove names: a reaction holds at most one live tag per node, and a
    /// cluster has at most 1,024 nodes (a version vector's entries, SPEC §6.5).
    public static let maxRemovedTags = 1_024

    /// Checks `key`: 1 to ``maxBytes`` UTF-8 bytes, no control characters; else
    /// `invalid-reaction-key`.
    public static func validate(_ key: String) throws(ModelError) {
        let bytes = key.utf8.count
        guard bytes > 0 else { throw ModelError(.invalidReactionKey, "a reaction key must not be empty") }
        guard bytes <= maxBytes else {
            throw ModelError(
                .invalidReactionKey, "a reaction key is at most \(maxBytes) UTF-8 bytes, this one has \(bytes)")
        }
        guard !key.unicodeScalars.contains(where: UserID.isControl) else {
            throw ModelError(.invalidReactionKey, "a reaction key must not contain control characters")
        }
    }
}

extension ModelError.Code {
    /// A reaction key that is empty, too long or holds a control character (SPEC §6.9).
    public static let invalidReactionKey = ModelError.Code(rawValue: "invalid-reaction-key")
}
