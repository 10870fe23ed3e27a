import Foundation
import LaminaCLI
import LaminaClient
import LaminaModel
import LaminaWire

struct ConformanceFailure: Error, CustomStringConvertible {
    var description: String
}

/// One probed row: what was expected and what came.
struct Row: Sendable {
    var state: SessionState
    var name: String
    var expected: Outcome
    var got: Outcome
}

/// Opens one stream per probe, brings it to the probe's state, sends the frame and reads what
/// answers it (waiting on frames, never on time, except a bound on a node that stops
/// answering). After HELLO a PING follows the frame, so that its PONG tells "no answer";
/// before HELLO nothing follows it (a PING is refused there too, SPEC §5.7): the first frame
/// back is the probed frame's own answer, and after a fatal ERROR the stream must end.
struct ConformanceRunner: Sendable {
    let connect: FrameChannelConnector
    let tokens: DevTokens
    let user: UserID
    let other: UserID
    static let barrier: UInt64 = 0xC0FF_EE00
    static let timeout: Duration = .seconds(10)

    init(settings: ConnectionSettings, tokens: DevTokens, user: UserID, other: UserID) throws {
        connect = try TransportSyncConnector.connector(for: settings.configuration)
        self.tokens = tokens
        self.user = user
        self.other = other
    }

    func run(_ probes: [Probe]) async throws -> [Row] {
        let context = try await prepare()
        var rows: [Row] = []
        for probe in probes {
            rows.append(
                Row(
                    state: probe.state, name: probe.name, expected: probe.expected,
                    got: try await self.probe(probe, context)))
        }
        return rows
    }

    /// A conversation with one message, on a stream of its own.
    private func prepare() async throws -> ProbeContext {
        let channel = try await connect()
        defer { Task { await channel.close() } }
        try await open(channel, to: .authenticated)
        let conversation = ConversationID.random()
        try await command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: [other], options: ConversationOptions(isDistinct: false)
                )), on: channel)
        let message = MessageID.random()
        let ack = try await command(
            .sendMessage(
                SendMessage(messageID: message, conversationID: conversation, parts: [try MessagePart(text: "setup")])),
            on: channel)
        guard let position = ack.position else {
            throw ConformanceFailure(description: "the setup message's ACK has no position")
        }
        return ProbeContext(conversation: conversation, message: message, position: position, other: other)
    }

    private func probe(_ probe: Probe, _ base: ProbeContext) async throws -> Outcome {
        let channel = try await connect()
        defer { Task { await channel.close() } }
        var context = base
        try await open(channel, to: probe.state, features: probe.features)
        if probe.state == .beforeAuthentication {
            context.token = try tokens.token(user: user, nonce: try await nonce(on: channel))
        }
        let frame = probe.frame(context)
        try await channel.send(frame)
        if probe.state == .beforeHello { return await firstAnswer(on: channel) }
        if let pipelined = probe.pipelined {
            let read = pipelined(context, frame)
            try await channel.send(read)
            return await pipelinedAnswer(write: frame, read: read, on: channel)
        }
        try? await channel.send(.ping(Ping(payload: Self.barrier)))
        return await answer(to: frame, id: probe.answerID(frame), on: channel)
    }

    /// A SEND_MESSAGE and a FETCH_HISTORY sent behind it at once: whether the history's answer
    /// (seq 0 `message-created` changes, then its ACK) holds the message.
    private func pipelinedAnswer(write: Frame, read: Frame, on channel: any FrameChannel) async -> Outcome {
        let deadline = ContinuousClock.now + Self.timeout
        var seen = false
        func holdsMessage(_ change: Change) -> Bool {
            if change.seq == 0, case .messageCreated(let m) = change.event, m.id.uuid == write.commandID { return true }
            return false
        }
        while ContinuousClock.now < deadline {
            guard let next = await receive(channel, until: deadline) else { return .streamEnded }
            switch next {
            case .error(let e) where e.isFatal || e.requestID == read.commandID || e.requestID == write.commandID:
                return .error(e.code.name, fatal: e.isFatal)
            case .change(let c): seen = seen || holdsMessage(c)
            case .changeBatch(let b): seen = seen || b.changes.contains(where: holdsMessage)
            case .ack(let ack) where ack.requestID == read.commandID:
                return .frame(seen ? "ACK, the message before it" : "ACK, without the message")
            case .ping(let p): try? await channel.send(.pong(p))
            default: continue
            }
        }
        return .error("timed out", fatal: false)
    }

    /// Before HELLO: the first frame the node sends (the answer to the only frame sent), and
    /// for a fatal ERROR whether the stream then ends without a further frame.
    private func firstAnswer(on channel: any FrameChannel) async -> Outcome {
        let deadline = ContinuousClock.now + Self.timeout
        guard let first = await receive(channel, until: deadline) else {
            return ContinuousClock.now < deadline ? .streamEnded : .error("timed out", fatal: false)
        }
        guard case .error(let e) = first else {
            return .frame(first.type.name.uppercased().replacingOccurrences(of: "-", with: "_"))
        }
        guard e.isFatal else { return .error(e.code.name, fatal: false) }
        let end = ContinuousClock.now + Self.timeout
        if let next = await receive(channel, until: end) {
            return .frame("ERROR \(e.code.name) (fatal), then \(next.type.name)")
        }
        return ContinuousClock.now < end
            ? .error(e.code.name, fatal: true) : .frame("ERROR \(e.code.name) (fatal), the stream not ended")
    }

    /// Reads until the frame's answer: a frame carrying `id` (or, without an id, the first
    /// WELCOME, PONG or ERROR), a fatal ERROR, the barrier PONG (no answer), or the end.
    private func answer(to frame: Frame, id: UUID?, on channel: any FrameChannel) async -> Outcome {
        let deadline = ContinuousClock.now + Self.timeout
        while ContinuousClock.now < deadline {
            guard let next = await receive(channel, until: deadline) else { return .streamEnded }
            switch next {
            case .error(let e) where e.isFatal || e.requestID == id:
                return .error(e.code.name, fatal: e.isFatal)
            case .ack(let ack) where ack.requestID == id: return .frame("ACK")
            case .nonce(let n) where n.requestID == id: return .frame("NONCE")
            case .authenticated(let a) where a.requestID == id: return .frame("AUTHENTICATED")
            case .welcome where id == nil: return .frame("WELCOME")
            case .pong(let p) where p.payload == Self.barrier && id == nil:
                return .nothing
            case .pong(let p) where p.payload != Self.barrier && id == nil:
                return .frame("PONG")
            case .ping(let p):
                try? await channel.send(.pong(p))
            default:
                continue  // changes, the barrier's PONG while an answer with an id is due
            }
        }
        return .error("timed out", fatal: false)
    }

    private func receive(_ channel: any FrameChannel, until deadline: ContinuousClock.Instant) async -> Frame? {
        await withTaskGroup(of: Frame?.self) { group in
            group.addTask { try? await channel.receive() }
            group.addTask {
                try? await Task.sleep(until: deadline)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    private func open(_ channel: any FrameChannel, to state: SessionState, features: FeatureSet = .all) async throws {
        guard state != .beforeHello else { return }
        try await channel.send(.hello(Hello(features: features, agent: "lamina-conformance")))
        guard case .welcome = try await expect(channel, "WELCOME") else { return }
        guard state == .authenticated else { return }
        let token = try tokens.token(user: user, nonce: try await nonce(on: channel))
        let id = UUID()
        try await channel.send(.authenticate(Authenticate(requestID: id, identityToken: token, deviceID: UUID())))
        let frame = try await expect(channel, "AUTHENTICATED")
        guard case .authenticated(let a) = frame, a.requestID == id else {
            throw ConformanceFailure(description: "expected AUTHENTICATED, got \(frame)")
        }
    }

    private func nonce(on channel: any FrameChannel) async throws -> String {
        let id = UUID()
        try await channel.send(.nonceRequest(NonceRequest(requestID: id)))
        let frame = try await expect(channel, "NONCE")
        guard case .nonce(let n) = frame, n.requestID == id else {
            throw ConformanceFailure(description: "expected NONCE, got \(frame)")
        }
        return n.nonce
    }

    @discardableResult
    private func command(_ frame: Frame, on channel: any FrameChannel) async throws -> Ack {
        try await channel.send(frame)
        while true {
            let next = try await expect(channel, "the answer to \(frame.type.name)")
            if case .ack(let ack) = next, ack.requestID == frame.commandID { return ack }
            if case .error(let e) = next, e.requestID == frame.commandID || e.isFatal {
                throw ConformanceFailure(description: "\(frame.type.name) failed: \(e.code.name): \(e.reason)")
            }
        }
    }

    /// The next frame that is not a change (those are skipped).
    private func expect(_ channel: any FrameChannel, _ what: String) async throws -> Frame {
        let deadline = ContinuousClock.now + Self.timeout
        while true {
            guard let frame = await receive(channel, until: deadline) else {
                throw ConformanceFailure(description: "no \(what): the stream ended or timed out")
            }
            switch frame {
            case .change, .changeBatch: continue
            default: return frame
            }
        }
    }
}
