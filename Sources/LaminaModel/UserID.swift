/// A user's identifier: the app backend's own id for that user, as carried in the
/// identity token. 1 to 256 UTF-8 bytes, no control characters.
public struct UserID: Hashable, Comparable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String

    /// Validates and wraps a user id.
    public init(_ rawValue: String) throws(ModelError) {
        let bytes = rawValue.utf8.count
        guard bytes > 0 else { throw ModelError(.invalidUserID, "a user id must not be empty") }
        guard bytes <= Limits.maxUserIDBytes else {
            throw ModelError(
                .invalidUserID, "a user id is at most \(Limits.maxUserIDBytes) UTF-8 bytes, this one has \(bytes)")
        }
        guard !rawValue.unicodeScalars.contains(where: UserID.isControl) else {
            throw ModelError(.invalidUserID, "a user id must not contain control characters")
        }
        self.rawValue = rawValue
    }

    /// For literals in code and tests; traps on an invalid literal. Note that `UserID("…")`
    /// with a literal argument is literal coercion and lands here too: validate input with a
    /// `String` value.
    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("invalid UserID literal: \(error)") }
    }

    /// Unicode general category Cc; ASCII is decided without a property lookup.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x80
            ? (scalar.value < 0x20 || scalar.value == 0x7F) : scalar.properties.generalCategory == .control
    }

    public var description: String { rawValue }
    /// Byte order of the UTF-8 forms (SPEC §3.9), over the strings' contiguous bytes: sorting a
    /// conversation's participants for every encoding of a message is on the hot path.
    public static func < (lhs: UserID, rhs: UserID) -> Bool {
        let ordered = lhs.rawValue.utf8.withContiguousStorageIfAvailable { a in
            rhs.rawValue.utf8.withContiguousStorageIfAvailable { b in
                for i in 0..<min(a.count, b.count) where a[i] != b[i] { return a[i] < b[i] }
                return a.count < b.count
            }
        }
        return (ordered ?? nil) ?? lhs.rawValue.utf8.lexicographicallyPrecedes(rhs.rawValue.utf8)
    }
}

extension UserID {
    /// The reserved form of a system sender's id: this prefix, then the sender's name. A
    /// message from a named system sender (Layer's `sender.name`, sent by the app's backend)
    /// carries such an id as its sender; no user may have one (the node refuses it in
    /// identity tokens and as a participant).
    public static let systemSenderPrefix = "layer:///system/"

    /// The id of the system sender named `name` (1 to ``Limits/maxSystemSenderNameBytes``
    /// UTF-8 bytes, no control characters).
    public static func systemSender(named name: String) throws(ModelError) -> UserID {
        guard !name.isEmpty, name.utf8.count <= Limits.maxSystemSenderNameBytes else {
            throw ModelError(
                .invalidUserID, "a system sender's name is 1 to \(Limits.maxSystemSenderNameBytes) UTF-8 bytes")
        }
        return try UserID(systemSenderPrefix + name)
    }

    /// The name of the system sender this id stands for; nil for a user.
    public var systemSenderName: String? {
        guard isSystemSender else { return nil }
        return String(decoding: rawValue.utf8.dropFirst(Self.systemSenderPrefix.utf8.count), as: UTF8.self)
    }

    /// Whether this id is the reserved form of a system sender (not a user).
    public var isSystemSender: Bool {
        rawValue.utf8.starts(with: Self.systemSenderPrefix.utf8)
            && rawValue.utf8.count > Self.systemSenderPrefix.utf8.count
    }

    /// Refuses the reserved form where a user's id is expected (a token's subject, a participant).
    public func checkIsUser() throws(ModelError) {
        guard !isSystemSender else {
            throw ModelError(
                .invalidUserID, "\(rawValue) is a system sender's id (prefix \(Self.systemSenderPrefix)), not a user's")
        }
    }
}

/// Who a user is, as the identity token describes them.
public struct Identity: Hashable, Sendable {
    public var userID: UserID
    public var displayName: String?
    public var avatarURL: String?

    public init(userID: UserID, displayName: String? = nil, avatarURL: String? = nil) {
        self.userID = userID
        self.displayName = displayName
        self.avatarURL = avatarURL
    }

    /// Checks the optional strings' lengths.
    public func validate() throws(ModelError) {
        for (name, value) in [("display name", displayName), ("avatar URL", avatarURL)] {
            if let value, value.utf8.count > Limits.maxIdentityStringBytes {
                throw ModelError(.invalidUserID, "the \(name) is at most \(Limits.maxIdentityStringBytes) UTF-8 bytes")
            }
        }
    }
}
