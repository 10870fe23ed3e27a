import LaminaModel

/// The one error type of `LaminaMerge`: a refused operation with a stable code,
/// a human-readable reason and the place in the source that raised it.
public struct MergeError: LaminaError {
    /// A stable, machine-readable code. Extensible: new codes may be added.
    public struct Code: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A remote clock reading is further ahead of the local physical clock than allowed.
        public static let clockDrift = Code(rawValue: "clock-drift")
        /// A physical reading beyond the 48 bits a clock may use.
        public static let clockOutOfRange = Code(rawValue: "clock-out-of-range")
        /// A per-origin counter would pass `UInt64.max`.
        public static let counterOverflow = Code(rawValue: "counter-overflow")
        /// The acting user is not a participant of the conversation.
        public static let notAParticipant = Code(rawValue: "not-a-participant")
        /// The change would leave more participants than the conversation allows.
        public static let tooManyParticipants = Code(rawValue: "too-many-participants")
        /// The change would leave the conversation without participants.
        public static let noParticipants = Code(rawValue: "no-participants")
        /// The change would leave metadata outside `Limits`.
        public static let invalidMetadata = Code(rawValue: "invalid-metadata")
        /// A status an application may not set (apps can only mark read).
        public static let statusNotAllowed = Code(rawValue: "status-not-allowed")
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

}
