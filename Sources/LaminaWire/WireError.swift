import LaminaModel

/// The one error type of `LaminaWire`: a failure with a code from the error-code table of
/// `Protocol/SPEC.md` §9, a human-readable reason and the place in the source that raised it.
///
/// The same codes travel in ERROR frames (`ErrorFrame.code`), so a node maps every failure,
/// wire or not, to one of them (see `WireError.init(_: ModelError)`).
public struct WireError: LaminaError {
    /// A stable error code: a 16-bit value on the wire and a kebab-case name (SPEC §9).
    /// Values not in the table are kept as they are (a newer peer may send them).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's value in ERROR frames.
        public let wireValue: UInt16

        public init(wireValue: UInt16) { self.wireValue = wireValue }

        // SPEC §9.1 Wire (frame and field encoding).
        /// The bytes do not follow the grammar (bad enum value, bad bool, varint over 64 bits, ...).
        public static let malformed = Code(wireValue: 100)
        /// A frame's declared payload length exceeds the frame size limit (for its type).
        public static let frameTooLarge = Code(wireValue: 101)
        /// A frame type this receiver does not know, not marked skippable.
        public static let unknownFrameType = Code(wireValue: 102)
        /// A valid value in a non-canonical encoding (non-minimal varint, unsorted or duplicate set entries).
        public static let nonCanonical = Code(wireValue: 103)
        /// Bytes left over after a frame's payload or after the one frame expected.
        public static let trailingBytes = Code(wireValue: 104)
        /// A count, length or depth over its limit.
        public static let limitExceeded = Code(wireValue: 105)
        /// No protocol version in common.
        public static let unsupportedVersion = Code(wireValue: 106)
        /// The input ends inside a frame or a field runs past its frame's payload.
        public static let truncated = Code(wireValue: 107)
        /// A string field is not valid UTF-8.
        public static let invalidUTF8 = Code(wireValue: 108)
        /// Reserved header flag bits set, or flags not allowed for the frame type.
        public static let badFlags = Code(wireValue: 109)
        /// A well-formed frame that is not allowed here (wrong direction or session state).
        public static let unexpectedFrame = Code(wireValue: 110)

        // SPEC §9.2 Authentication.
        /// The command needs an authenticated session.
        public static let authenticationRequired = Code(wireValue: 200)
        public static let unknownNonce = Code(wireValue: 201)
        public static let nonceReused = Code(wireValue: 202)
        public static let nonceExpired = Code(wireValue: 203)
        public static let badSignature = Code(wireValue: 204)
        public static let algorithmNotAllowed = Code(wireValue: 205)
        public static let tokenExpired = Code(wireValue: 206)
        public static let tokenNotYetValid = Code(wireValue: 207)
        public static let unknownProvider = Code(wireValue: 208)
        public static let malformedToken = Code(wireValue: 209)
        public static let sessionExpired = Code(wireValue: 210)
        public static let sessionRevoked = Code(wireValue: 211)
        /// The token's nonce was issued to another connection (a nonce is good on the
        /// connection that asked for it only).
        public static let nonceOtherConnection = Code(wireValue: 212)

        // SPEC §9.3 Authorization.
        public static let notAParticipant = Code(wireValue: 300)
        public static let removedParticipant = Code(wireValue: 301)
        /// The peer or user may never do this (e.g. peer frames on a client session).
        public static let forbidden = Code(wireValue: 302)

        // SPEC §9.4 Validation.
        public static let invalidArgument = Code(wireValue: 400)
        public static let invalidIdentifier = Code(wireValue: 401)
        public static let invalidUserID = Code(wireValue: 402)
        public static let invalidMIMEType = Code(wireValue: 403)
        public static let noParts = Code(wireValue: 404)
        public static let tooManyParts = Code(wireValue: 405)
        public static let partTooLarge = Code(wireValue: 406)
        public static let inlineTooLarge = Code(wireValue: 407)
        public static let invalidContentReference = Code(wireValue: 408)
        public static let noParticipants = Code(wireValue: 409)
        public static let tooManyParticipants = Code(wireValue: 410)
        public static let invalidMetadata = Code(wireValue: 411)
        public static let invalidPushConfiguration = Code(wireValue: 412)
        public static let duplicatePart = Code(wireValue: 413)
        /// The conversation or message named does not exist (for this user).
        public static let notFound = Code(wireValue: 414)
        /// A client-chosen id is already in use by a different object or command.
        public static let idInUse = Code(wireValue: 415)
        /// A push token of the wrong size or kind, or of a kind the node does not deliver to.
        public static let invalidPushToken = Code(wireValue: 416)
        /// A REACT key that is empty or holds a control character (SPEC §6.9).
        public static let invalidReactionKey = Code(wireValue: 417)
        /// A reply names a message that is not in the conversation (or is deleted for everyone),
        /// or a thread fetch names a root that is not (replies feature, SPEC §6.2).
        public static let replyTargetNotFound = Code(wireValue: 420)
        /// A reply names a message that is itself a reply: threads are one level deep (§6.2).
        public static let nestedReply = Code(wireValue: 421)

        // SPEC §9.5 Conflict.
        /// A distinct conversation with these participants exists with different metadata.
        public static let existingDistinctConversation = Code(wireValue: 500)

        // SPEC §9.6 Content.
        /// A content reference names content that is not (yet) completely uploaded.
        public static let contentNotReady = Code(wireValue: 600)
        /// No such content, or it was collected (CONTENT.md).
        public static let contentNotFound = Code(wireValue: 601)
        /// The uploaded bytes do not hash to the declared SHA-256; the upload is deleted.
        public static let contentDigestMismatch = Code(wireValue: 602)
        /// An upload continues at an offset other than the bytes the node holds.
        public static let uploadOffsetMismatch = Code(wireValue: 603)
        /// An upload's size or digest differs from what it first declared.
        public static let uploadMismatch = Code(wireValue: 604)
        /// An upload's body runs past its declared size.
        public static let uploadTooLong = Code(wireValue: 605)
        /// An upload's stream delivered no byte for the node's stall timeout; what it holds is kept.
        public static let uploadStalled = Code(wireValue: 606)

        // SPEC §9.7 Resources.
        public static let quotaExceeded = Code(wireValue: 700)
        /// The node sheds load; retry after the given delay.
        public static let overloaded = Code(wireValue: 701)
        /// The receiver does not read fast enough; the stream is closed.
        public static let slowConsumer = Code(wireValue: 702)

        // SPEC §9.8 Internal.
        public static let internalError = Code(wireValue: 900)
        /// The node is shutting down; reconnect elsewhere or later.
        public static let shuttingDown = Code(wireValue: 901)

        /// Every code of the table, in table order.
        public static let all: [Code] = [
            .malformed, .frameTooLarge, .unknownFrameType, .nonCanonical, .trailingBytes, .limitExceeded,
            .unsupportedVersion, .truncated, .invalidUTF8, .badFlags, .unexpectedFrame,
            .authenticationRequired, .unknownNonce, .nonceReused, .nonceExpired, .badSignature,
            .algorithmNotAllowed, .tokenExpired, .tokenNotYetValid, .unknownProvider, .malformedToken,
            .sessionExpired, .sessionRevoked, .nonceOtherConnection,
            .notAParticipant, .removedParticipant, .forbidden,
            .invalidArgument, .invalidIdentifier, .invalidUserID, .invalidMIMEType, .noParts, .tooManyParts,
            .partTooLarge, .inlineTooLarge, .invalidContentReference, .noParticipants, .tooManyParticipants,
            .invalidMetadata, .invalidPushConfiguration, .duplicatePart, .notFound, .idInUse, .invalidPushToken,
            .invalidReactionKey,
            .replyTargetNotFound, .nestedReply,
            .existingDistinctConversation, .contentNotReady, .contentNotFound, .contentDigestMismatch,
            .uploadOffsetMismatch, .uploadMismatch, .uploadTooLong, .uploadStalled, .quotaExceeded, .overloaded,
            .slowConsumer,
            .internalError, .shuttingDown,
        ]

        /// The code's name in the spec and in the vectors' `"error"` field; `unassigned-<n>` for
        /// values not in the table.
        public var name: String {
            switch wireValue {
            case 100: "malformed"
            case 101: "frame-too-large"
            case 102: "unknown-frame-type"
            case 103: "non-canonical"
            case 104: "trailing-bytes"
            case 105: "limit-exceeded"
            case 106: "unsupported-version"
            case 107: "truncated"
            case 108: "invalid-utf8"
            case 109: "bad-flags"
            case 110: "unexpected-frame"
            case 200: "authentication-required"
            case 201: "unknown-nonce"
            case 202: "nonce-reused"
            case 203: "nonce-expired"
            case 204: "bad-signature"
            case 205: "algorithm-not-allowed"
            case 206: "token-expired"
            case 207: "token-not-yet-valid"
            case 208: "unknown-provider"
            case 209: "malformed-token"
            case 210: "session-expired"
            case 211: "session-revoked"
            case 212: "nonce-other-connection"
            case 300: "not-a-participant"
            case 301: "removed-participant"
            case 302: "forbidden"
            case 400: "invalid-argument"
            case 401: "invalid-identifier"
            case 402: "invalid-user-id"
            case 403: "invalid-mime-type"
            case 404: "no-parts"
            case 405: "too-many-parts"
            case 406: "part-too-large"
            case 407: "inline-too-large"
            case 408: "invalid-content-reference"
            case 409: "no-participants"
            case 410: "too-many-participants"
            case 411: "invalid-metadata"
            case 412: "invalid-push-configuration"
            case 413: "duplicate-part"
            case 414: "not-found"
            case 415: "id-in-use"
            case 416: "invalid-push-token"
            case 417: "invalid-reaction-key"
            case 420: "reply-target-not-found"
            case 421: "nested-reply"
            case 500: "existing-distinct-conversation"
            case 600: "content-not-ready"
            case 601: "content-not-found"
            case 602: "content-digest-mismatch"
            case 603: "upload-offset-mismatch"
            case 604: "upload-mismatch"
            case 605: "upload-too-long"
            case 606: "upload-stalled"
            case 700: "quota-exceeded"
            case 701: "overloaded"
            case 702: "slow-consumer"
            case 900: "internal-error"
            case 901: "shutting-down"
            default: "unassigned-\(wireValue)"
            }
        }

        /// The code with this spec name, if it is in the table.
        public init?(name: String) {
            guard let code = Code.all.first(where: { $0.name == name }) else { return nil }
            self = code
        }

        /// Whether the stream must be closed after an ERROR frame with this code (SPEC §8):
        /// every wire error (the byte stream can no longer be trusted) and the session-ending ones.
        public var closesStream: Bool {
            (100..<200).contains(wireValue) || wireValue == 211 || wireValue == 702 || wireValue == 901
        }

        public var description: String { name }
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
