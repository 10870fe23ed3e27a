import LaminaModel
import GRDB

/// The one error type of the node's storage: a stable code, a human-readable reason and
/// the place in the source that raised it.
public struct StorageError: LaminaError {
    /// A stable, machine-readable code. Extensible: new codes may be added.
    public struct Code: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The writer's queue holds as many commands as it may; try again later.
        public static let writeQueueFull = Code(rawValue: "write-queue-full")
        /// The store is closed (or closing) and takes no more commands.
        public static let closed = Code(rawValue: "storage-closed")
        /// An argument is out of range or malformed (checked before any work is done).
        public static let invalidArgument = Code(rawValue: "invalid-argument")
        /// The object referred to does not exist.
        public static let notFound = Code(rawValue: "not-found")
        /// An object with this identifier already exists.
        public static let alreadyExists = Code(rawValue: "already-exists")
        /// Another message of the conversation already holds this position.
        public static let positionTaken = Code(rawValue: "position-taken")
        /// The conversation was retired by a distinct merge (or deleted) and takes no more writes.
        public static let conversationRetired = Code(rawValue: "conversation-retired")
        /// The user is not, and never was, a participant of the conversation.
        public static let notAParticipant = Code(rawValue: "not-a-participant")
        /// The nonce was never issued (or was pruned long ago).
        public static let nonceUnknown = Code(rawValue: "nonce-unknown")
        /// The nonce was already used once.
        public static let nonceReused = Code(rawValue: "nonce-reused")
        /// The nonce's lifetime is over.
        public static let nonceExpired = Code(rawValue: "nonce-expired")
        /// No session has this token.
        public static let sessionUnknown = Code(rawValue: "session-unknown")
        /// The session was revoked.
        public static let sessionRevoked = Code(rawValue: "session-revoked")
        /// The session's lifetime is over.
        public static let sessionExpired = Code(rawValue: "session-expired")
        /// A stored row could not be decoded into the model: the database is damaged.
        public static let corrupt = Code(rawValue: "storage-corrupt")
        /// A write conflicts with a uniqueness (or other) constraint of the schema.
        public static let constraintViolation = Code(rawValue: "constraint-violation")
        /// SQLite reported an error (I/O, disk full, constraint, ...).
        public static let database = Code(rawValue: "database-error")
        /// The transaction of a group commit failed: nothing of the group was written.
        public static let commitFailed = Code(rawValue: "commit-failed")
        /// Opening the database or migrating its schema failed.
        public static let openFailed = Code(rawValue: "open-failed")
        /// The database server cannot be reached (refused, down, connection lost).
        public static let databaseUnavailable = Code(rawValue: "database-unavailable")
        /// The database server refused the node's credentials.
        public static let authenticationFailed = Code(rawValue: "authentication-failed")
        /// The write collided with another node's on the same database (PostgreSQL found a
        /// deadlock or a serialization failure and undid this command); retrying succeeds.
        public static let writeConflict = Code(rawValue: "write-conflict")
        /// The database's schema was made by a newer node than this one.
        public static let schemaTooNew = Code(rawValue: "schema-too-new")
    }

    public var code: Code
    public var reason: String
    public var file: String
    public var line: Int

    public init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    /// Wraps any error into a storage error: storage errors pass through, SQLite errors
    /// become `.database` with SQLite's code and message.
    static func wrapping(_ error: any Error, as code: Code = .database, file: String = #fileID, line: Int = #line) -> StorageError {
        if let error = error as? StorageError { return error }
        if let error = error as? GRDB.DatabaseError {
            return StorageError(code, "SQLite error \(error.extendedResultCode.rawValue): \(error.message ?? "no message")", file: file, line: line)
        }
        return StorageError(code, String(describing: error), file: file, line: line)
    }
}
