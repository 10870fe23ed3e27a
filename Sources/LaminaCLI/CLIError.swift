import LaminaClient
import LaminaModel

/// The one error type of the `lamina` command-line client: a stable code and a reason a
/// person can act on, and where it was raised (`LaminaError`, like every module's error). Printed as
/// `error [code]: reason`.
public struct CLIError: LaminaError {
    /// A stable, machine-readable code.
    public struct Code: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The CA (or pinned certificate) file to trust the node with does not exist.
        public static let caFileMissing = Code(rawValue: "ca-file-missing")
        /// The node's dev identity key is not in the node data directory.
        public static let devKeyMissing = Code(rawValue: "dev-key-missing")
        /// No connection to the node could be made.
        public static let nodeUnreachable = Code(rawValue: "node-unreachable")
        /// The node refused the identity token or the session.
        public static let authenticationFailed = Code(rawValue: "authentication-failed")
        /// A user id is empty, too long or holds control characters.
        public static let invalidUserID = Code(rawValue: "invalid-user-id")
        /// An argument is malformed or out of range.
        public static let invalidArgument = Code(rawValue: "invalid-argument")
        /// Something did not happen within its time limit.
        public static let timedOut = Code(rawValue: "timed-out")
        /// The node refused to sync this device (e.g. its cursor is beyond the node's feed).
        public static let syncRefused = Code(rawValue: "sync-refused")
        /// Another `lamina` process is using this user's local store.
        public static let storeInUse = Code(rawValue: "store-in-use")
        /// The object named is not in the local store.
        public static let notFound = Code(rawValue: "not-found")
        /// The node refused a command for good.
        public static let sendFailed = Code(rawValue: "send-failed")
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

    /// An SDK error under its own code.
    public init(_ error: ClientError) {
        self.init(Code(rawValue: error.code.rawValue), error.reason, file: error.file, line: error.line)
    }

    /// A model validation error under its own code.
    public init(_ error: ModelError) {
        self.init(Code(rawValue: error.code.rawValue), error.reason, file: error.file, line: error.line)
    }

    public var description: String { "error [\(code)]: \(reason)" }
}
