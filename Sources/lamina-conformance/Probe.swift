import Foundation
import LaminaModel
import LaminaWire

/// The session states of SPEC §5.7's table.
enum SessionState: String, CaseIterable, Sendable {
    case beforeHello = "before HELLO"
    case beforeAuthentication = "before authentication"
    case authenticated = "authenticated"
}

/// What a node answered one frame with, in a form that can be printed and compared.
enum Outcome: Hashable, CustomStringConvertible, Sendable {
    case frame(String)  // WELCOME, NONCE, AUTHENTICATED, PONG, ACK
    case error(String, fatal: Bool)
    case nothing  // no answer: the PING sent behind it was answered first
    case streamEnded  // the node ended the stream without a frame
    // Before HELLO, `.error(code, fatal: true)` also means that the stream ended right after it.

    var description: String {
        switch self {
        case .frame(let name): name
        case .error(let code, let fatal): "ERROR \(code) (\(fatal ? "fatal" : "not fatal"))"
        case .nothing: "no answer"
        case .streamEnded: "stream ended"
        }
    }
}

/// One row of the table: a frame sent in a state, and what the text says it gets.
struct Probe: Sendable {
    var state: SessionState
    var name: String
    var frame: @Sendable (ProbeContext) -> Frame
    /// The id the answer carries (nil: the answer is WELCOME/PONG/a stream ERROR, or none).
    var answerID: @Sendable (Frame) -> UUID?
    var expected: Outcome
    /// The features the stream's HELLO offers (SPEC §5.1): all but for the rows of a frame
    /// behind a feature the session did not agree.
    var features: FeatureSet = .all
    /// A read sent right behind `frame` without waiting for its answer (SPEC §5.7, order of
    /// effects): the row's outcome is then whether the read's answer shows the frame's effect.
    var pipelined: (@Sendable (ProbeContext, Frame) -> Frame)? = nil
}

/// What the authenticated probes address: a conversation and a message of the user's.
struct ProbeContext: Sendable {
    var conversation: ConversationID
    var message: MessageID
    var position: MessagePosition
    var other: UserID
    /// A valid identity token for the stream's fresh nonce (before authentication).
    var token = ""
}
