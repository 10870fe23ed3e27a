import GRDB
import LaminaModel

/// The one error type of the node's storage: a stable code, a human-readable reason and
/// the place in the source that raised it.
package struct StorageError: LaminaError {
    /// A stable, machine-readable code. Extensible: new codes may be added.
    package struct Code: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
        package let rawValue: String
        package init(rawValue: String) { self.rawValue = rawValue }
        package var description: String { rawValue }

        /// The writer's queue holds as many commands as it may; try again later.
        package static let writeQueueFull = Code(rawValue: "write-queue-full")
        /// The store is closed (or closing) and takes no more commands.
        package static let closed = Code(rawValue: "storage-closed")
        /// An argument is out of range or malformed (checked before any work is done).
        package static let invalidArgument = Code(rawValue: "invalid-argument")
        /// The object referred to does not exist.
        package static let notFound = Code(rawValue: "not-found")
        /// An object with this identifier already exists.
        package static let alreadyExists = Code(rawValue: "already-exists")
        /// Another message of the conversation already holds this position.
        package static let positionTaken = Code(rawValue: "position-taken")
        /// The conversation was retired by a distinct merge (or deleted) and takes no more writes.
        package static let conversationRetired = Code(rawValue: "conversation-retired")
        /// The user is not, and never was, a participant of the conversation.
        package static let notAParticipant = Code(rawValue: "not-a-participant")
        /// The nonce was never issued (or was pruned long ago).
        package static let nonceUnknown = Code(rawValue: "nonce-unknown")
        /// The nonce was already used once.
        package static let nonceReused = Code(rawValue: "nonce-reused")
        /// The nonce's lifetime is over.
        package static let nonceExpired = Code(rawValue: "nonce-expired")
        /// No session has this token.
        package static let sessionUnknown = Code(rawValue: "session-unknown")
        /// The session was revoked.
        package static let sessionRevoked = Code(rawValue: "session-revoked")
        /// The session's lifetime is over.
        package static let sessionExpired = Code(rawValue: "session-expired")
        /// A stored row could not be decoded into the model: the database is damaged.
        package static let corrupt = Code(rawValue: "storage-corrupt")
        /// A write conflicts with a uniqueness (or other) constraint of the schema.
        package static let constraintViolation = Code(rawValue: "constraint-violation")
        /// SQLite reported an error (I/O, disk full, constraint, ...).
        package static let database = Code(rawValue: "database-error")
        /// The transaction of a group commit failed: nothing of the group was written.
        package static let commitFailed = Code(rawValue: "commit-failed")
        /// Opening the database or migrating its schema failed.
        package static let openFailed = Code(rawValue: "open-failed")
        /// The database server cannot be reached (refused, down, connection lost).
        package static let databaseUnavailable = Code(rawValue: "database-unavailable")
        /// The database server refused the node's credentials.
        package static let authenticationFailed = Code(rawValue: "authentication-failed")
        /// The write collided with another node's on the same database (PostgreSQL found a
        /// deadlock or a serialization failure and undid this command); retrying succeeds.
        package static let writeConflict = Code(rawValue: "write-conflict")
        /// The database's schema was made by a newer node than this one.
        package static let schemaTooNew = Code(rawValue: "schema-too-new")
    }

    package var code: Code
    package var reason: String
    package var file: String
    package var line: Int

    package init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    /// Wraps any error into a storage error: storage errors pass through, SQLite errors
    /// become `.database` with SQLite's code and message.
    static func wrapping(_ error: any Error, as code: Code = .database, file: String = #fileID, line: Int = #line)
        -> StorageError
    {
        if let error = error as? StorageError { return error }
        if let error = error as? GRDB.DatabaseError {
            return StorageError(
                code, "SQLite error \(error.extendedResultCode.rawValue): \(error.message ?? "no message")", file: file,
                line: line)
        }
        return StorageError(code, String(describing: error), file: file, line: line)
    }
}
