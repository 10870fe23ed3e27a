import GRDB
import LaminaModel

/// The one error type of `LaminaClient`: a stable code, a human-readable reason and the
/// place in the source that raised it.
public struct ClientError: LaminaError {
    /// A stable, machine-readable code. Extensible: new codes may be added.
    public struct Code: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The local database could not be opened, read or written.
        public static let storage = Code(rawValue: "storage")
        /// The store on disk belongs to another user or is from a newer schema.
        public static let storeMismatch = Code(rawValue: "store-mismatch")
        /// A value read from the store is not what the schema allows (a corrupt row).
        public static let corruptRecord = Code(rawValue: "corrupt-record")
        /// The object named does not exist in the local store.
        public static let notFound = Code(rawValue: "not-found")
        /// A value failed model validation.
        public static let invalidObject = Code(rawValue: "invalid-object")
        /// `waitForCreation` did not see the object within its timeout.
        public static let timedOut = Code(rawValue: "timed-out")
        /// A query names a property its object type does not have.
        public static let unknownProperty = Code(rawValue: "unknown-property")
        /// A query compares a property with a value of the wrong type, or uses an
        /// operator the property does not support.
        public static let typeMismatch = Code(rawValue: "type-mismatch")
        /// A query exceeds one of the query limits (depth, list length, sort keys, limit).
        public static let queryTooComplex = Code(rawValue: "query-too-complex")
        /// A content operation was asked of a part that cannot do it (inline, uploading, ...).
        public static let contentUnavailable = Code(rawValue: "content-unavailable")
        /// A setting is out of its allowed range.
        public static let invalidSetting = Code(rawValue: "invalid-setting")
        /// The operation was cancelled.
        public static let cancelled = Code(rawValue: "cancelled")
        /// The node belongs to another cluster than the one the client is configured for
        /// (`LaminaConfiguration.cluster`): the client does not sync with it.
        public static let wrongCluster = Code(rawValue: "wrong-cluster")
        /// A distinct conversation of these participants exists with other metadata or
        /// options: `existingConversation` names it (Layer's "existing distinct conversation").
        public static let existingDistinctConversation = Code(rawValue: "existing-distinct-conversation")
    }

    public var code: Code
    public var reason: String
    /// For `.existingDistinctConversation`: the conversation that exists.
    public var existingConversation: ConversationID? = nil
    public var file: String
    public var line: Int

    public init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    /// Wraps any error thrown by storage code: a `ClientError` passes through, a
    /// `ModelError` becomes `.invalidObject`, anything else `.storage`.
    static func wrap(_ error: any Error, file: String = #fileID, line: Int = #line) -> ClientError {
        switch error {
        case let e as ClientError: return e
        case let e as ModelError: return ClientError(.invalidObject, e.description, file: file, line: line)
        case let e as DatabaseError:
            return ClientError(.storage, "SQLite: \(e.message ?? e.description)", file: file, line: line)
        default: return ClientError(.storage, String(describing: error), file: file, line: line)
        }
    }
}
