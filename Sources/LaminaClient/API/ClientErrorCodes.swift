import LaminaModel
import LaminaWire

// Codes of the app-facing API and the sync engine. Validation failures keep the model's
// code name (which is also the wire name, SPEC §9.4), so an app sees the same code whether
// the SDK or the node refused the value.

extension ClientError.Code {
    public static let invalidIdentifier = ClientError.Code(rawValue: ModelError.Code.invalidIdentifier.rawValue)
    public static let invalidUserID = ClientError.Code(rawValue: ModelError.Code.invalidUserID.rawValue)
    public static let invalidMIMEType = ClientError.Code(rawValue: ModelError.Code.invalidMIMEType.rawValue)
    public static let noParts = ClientError.Code(rawValue: ModelError.Code.noParts.rawValue)
    public static let tooManyParts = ClientError.Code(rawValue: ModelError.Code.tooManyParts.rawValue)
    public static let partTooLarge = ClientError.Code(rawValue: ModelError.Code.partTooLarge.rawValue)
    public static let inlineTooLarge = ClientError.Code(rawValue: ModelError.Code.inlineTooLarge.rawValue)
    public static let invalidContentReference = ClientError.Code(
        rawValue: ModelError.Code.invalidContentReference.rawValue)
    public static let noParticipants = ClientError.Code(rawValue: ModelError.Code.noParticipants.rawValue)
    public static let tooManyParticipants = ClientError.Code(rawValue: ModelError.Code.tooManyParticipants.rawValue)
    public static let invalidMetadata = ClientError.Code(rawValue: ModelError.Code.invalidMetadata.rawValue)
    public static let invalidPushConfiguration = ClientError.Code(
        rawValue: ModelError.Code.invalidPushConfiguration.rawValue)
    public static let invalidPushToken = ClientError.Code(rawValue: ModelError.Code.invalidPushToken.rawValue)
    public static let duplicatePart = ClientError.Code(rawValue: ModelError.Code.duplicatePart.rawValue)
    /// An argument breaks a rule of the API not covered by a model code.
    public static let invalidArgument = ClientError.Code(rawValue: "invalid-argument")
    /// The local user may not do this to the object (e.g. mark their own message read).
    public static let notAllowed = ClientError.Code(rawValue: "not-allowed")
    /// The node refused the identity token or session (the reason carries the node's code).
    public static let authenticationFailed = ClientError.Code(rawValue: "authentication-failed")
    /// The node broke the protocol, or closed the stream with a fatal error.
    public static let protocolError = ClientError.Code(rawValue: "protocol-error")
    /// The frame channel is closed.
    public static let disconnected = ClientError.Code(rawValue: "disconnected")
    /// The node refused to sync this device from its cursor (e.g. the store is from a node whose
    /// data was reset). Retrying cannot help: the engine stops; the app decides (deauthenticate
    /// to start over with an empty store).
    public static let syncRefused = ClientError.Code(rawValue: "sync-refused")
    /// The client has no sync engine running (not connected).
    public static let notConnected = ClientError.Code(rawValue: "not-connected")
}

extension ClientError {
    /// A model validation failure under its own code.
    public init(_ model: ModelError) {
        self.init(Code(rawValue: model.code.rawValue), model.reason, file: model.file, line: model.line)
    }

    /// A wire error under the wire code's name.
    public init(wire: WireError) {
        self.init(Code(rawValue: wire.code.name), wire.reason, file: wire.file, line: wire.line)
    }
}
