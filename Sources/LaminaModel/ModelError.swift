/// The one error type of `LaminaModel`: a validation failure with a stable code,
/// a human-readable reason and the place in the source that raised it.
public struct ModelError: LaminaError {
    /// A stable, machine-readable code. Extensible: new codes may be added.
    public struct Code: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let invalidIdentifier = Code(rawValue: "invalid-identifier")
        public static let invalidUserID = Code(rawValue: "invalid-user-id")
        public static let invalidMIMEType = Code(rawValue: "invalid-mime-type")
        public static let noParts = Code(rawValue: "no-parts")
        public static let tooManyParts = Code(rawValue: "too-many-parts")
        public static let partTooLarge = Code(rawValue: "part-too-large")
        public static let inlineTooLarge = Code(rawValue: "inline-too-large")
        public static let invalidContentReference = Code(rawValue: "invalid-content-reference")
        public static let noParticipants = Code(rawValue: "no-participants")
        public static let tooManyParticipants = Code(rawValue: "too-many-participants")
        public static let invalidMetadata = Code(rawValue: "invalid-metadata")
        public static let invalidPushConfiguration = Code(rawValue: "invalid-push-configuration")
        public static let duplicatePart = Code(rawValue: "duplicate-part")
        public static let invalidPushToken = Code(rawValue: "invalid-push-token")
        public static let invalidSearch = Code(rawValue: "invalid-search")
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
