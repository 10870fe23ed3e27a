import LaminaModel

// The one place where `ModelError` codes become wire error codes (SPEC §9.4).

extension WireError.Code {
    /// The wire code for a model validation code; `invalid-argument` for codes the table
    /// does not name one-to-one.
    public init(_ model: ModelError.Code) {
        switch model {
        case .invalidIdentifier: self = .invalidIdentifier
        case .invalidUserID: self = .invalidUserID
        case .invalidMIMEType: self = .invalidMIMEType
        case .noParts: self = .noParts
        case .tooManyParts: self = .tooManyParts
        case .partTooLarge: self = .partTooLarge
        case .inlineTooLarge: self = .inlineTooLarge
        case .invalidContentReference: self = .invalidContentReference
        case .noParticipants: self = .noParticipants
        case .tooManyParticipants: self = .tooManyParticipants
        case .invalidMetadata: self = .invalidMetadata
        case .invalidPushConfiguration: self = .invalidPushConfiguration
        case .duplicatePart: self = .duplicatePart
        case .invalidPushToken: self = .invalidPushToken
        case .invalidReactionKey: self = .invalidReactionKey
        default: self = .invalidArgument
        }
    }
}

extension WireError {
    /// A model validation failure as a wire error: same reason and source location.
    public init(_ model: ModelError) {
        self.init(Code(model.code), model.reason, file: model.file, line: model.line)
    }
}
