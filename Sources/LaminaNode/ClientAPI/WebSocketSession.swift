import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire
import Logging
import NIOConcurrencyHelpers
import NIOWebSocket

/// One Client API WebSocket (Layer's Web SDK protocol) driving an ordinary ``NodeSession``.
///
/// The session is the same one a sync stream drives: this object is its ``SessionOutbound``
/// and feeds it sync frames, so a WebSocket sees exactly what the same user's sync session
/// sees, from the same feed, in the same order. On open it sends the session HELLO,
/// RESUME_SESSION with the socket's session token and SYNC from the feed head read when the
/// upgrade was accepted; from then on:
/// - CHANGE frames become `change` packets (``WebSocketSession+Changes``);
/// - `request` packets become command frames, and their ACK/ERROR `response` packets
///   (``WebSocketSession+Requests``); `Event.replay` is a SYNC from the feed position its
///   timestamp names (``WebSocketTimestamp``);
/// - typing `signal` packets are TYPING frames both ways.
///
/// Every packet carries the connection's `counter` (0, 1, …) and a `timestamp` naming the
/// feed position sent so far. Packets are encoded and written under one lock in the order the
/// session sends its frames.
///
/// Bounds: at most ``maxRequestsInFlight`` requests wait for their answer (the socket stops
/// reading until half are answered); the socket's outbound bytes are bounded by the transport
/// (a slow reader is closed with 1008); a paced answer (a replay's backlog) waits for the
/// socket to drain to a quarter of that bound.
final class WebSocketSession: SessionOutbound, WebSocketConnectionDelegate, @unchecked Sendable {
    /// Who the socket's session token names, and where its feed stood at the upgrade.
    struct Credentials: Sendable {
        var user: UserID
        var device: UUID
        var token: String
        var head: UInt64
    }

    static let maxRequestsInFlight = 32

    /// The most identities a socket keeps to show real names (read at the upgrade from the
    /// users it shares conversations with, then kept current by identity changes); others show
    /// their user id.
    static let maxKnownIdentities = 1_000

    let connection: WebSocketConnection
    let engine: NodeEngine
    let credentials: Credentials
    /// How objects are shown; its identities change with identity changes (under `lock`).
    var representation: ClientAPIRepresentation
    /// The user's announcements conversation: its messages are `Announcement` packets.
    let announcements: ConversationID
    /// The node's `https://host:port` (the representation's base).
    let base: String
    let logger: Logger
    /// Gives the socket's slots back (node sessions, per-session sockets); called once.
    private let released: @Sendable () -> Void

    private let resumeID = UUID()
    private let initialSyncID = UUID()

    // Guarded by `lock`.
    let lock = NIOLock()
    private var session: NodeSession?
    private var counter = 0
    /// The feed entries forwarded are those in (`sentLow`, `sentHigh`]: the initial SYNC
    /// starts at the head, a replay extends the range down to its cursor. An entry a replay
    /// reads again is not sent twice.
    private var sentLow: UInt64
    private var sentHigh: UInt64
    private var replayCursor: UInt64?
    var pending: [UUID: Pending] = [:]
    var receipts = WebSocketReceiptWindow()
    private var inFlight = 0
    private var paused = false
    private var finished = false
    /// `Presence.subscribe` was asked: presence changes are sent as `change` packets.
    var presenceSubscribed = false

    /// A request waiting for its ACK or ERROR.
    enum Pending {
        case replay(requestID: String, cursor: UInt64)
        case message(requestID: String, Message)
        case conversation(requestID: String, ConversationID)
        case presence(requestID: String)
    }

    init(
        connection: WebSocketConnection, engine: NodeEngine, credentials: Credentials,
        representation: ClientAPIRepresentation, logger: Logger, released: @escaping @Sendable () -> Void
    ) {
        self.connection = connection
        self.engine = engine
        self.credentials = credentials
        self.representation = representation
        self.announcements = ServerAPI.announcementsConversation(of: credentials.user)
        self.base = representation.base
        self.logger = logger
        self.released = released
        self.sentLow = credentials.head
        self.sentHigh = credentials.head
    }

    /// Opens the node session and starts it (on the connection's event loop, before any packet).
    func start() {
        connection.delegate = self
        let session = engine.openSession(outbound: self)
        lock.withLock { self.session = session }
        // `.identities`: identity changes (change kind 12) reach the session only with it;
        // `.replies` and `.mentions`: messages keep `reply_to`, `thread` and `mentions`, as REST shows them.
        let features: FeatureSet = [
            .typingIndicators, .deliveryReceipts, .changeBatches, .partUpdates, .presence, .identities, .channels,
            .reactions, .replies, .mentions,
        ]
        session.receive(.hello(Hello(features: features, agent: "lamina-websocket")))
        session.receive(
            .resumeSession(
                ResumeSession(requestID: resumeID, sessionToken: credentials.token, deviceID: credentials.device)))
        session.receive(.sync(SyncRequest(requestID: initialSyncID, cursor: credentials.head)))
    }

    var user: UserID { credentials.user }

    // MARK: WebSocketConnectionDelegate (event loop)

    func webSocket(_ connection: WebSocketConnection, received text: String) {
        let packet: WebSocketInboundPacket
        do {
            packet = try WebSocketInboundPacket.decode(text)
        } catch {
            return respond(to: error.requestID, error: error.layerError)
        }
        switch packet {
        case .typing(let conversation, let action):
            guard let id = Self.conversationID(conversation) else {
                return respond(
                    to: nil,
                    error: ServerAPIError.invalidProperty(
                        "body.object.id", "not a conversation id: \(conversation.prefix(80))"))
            }
            lock.withLock { session }?.receive(.typing(Typing(conversationID: id, state: action)))
        case .request(let request):
            handle(request)
        }
    }

    func webSocketClosed(_ connection: WebSocketConnection, code: WebSocketErrorCode?, reason: String) {
        let session = lock.withLock { () -> NodeSession? in
            finished = true
            defer { self.session = nil }
            return self.session
        }
        session?.closed()
        released()
    }

    // MARK: request accounting

    /// Counts a request that waits for its answer; past the bound the socket stops reading.
    func requestStarted() {
        let pause = lock.withLock { () -> Bool in
            inFlight += 1
            guard inFlight >= Self.maxRequestsInFlight, !paused else { return false }
            paused = true
            return true
        }
        if pause { connection.pauseInbound() }
    }

    /// A request was answered; reading resumes below half the bound.
    func requestAnswered() {
        let resume = lock.withLock { () -> Bool in
            inFlight = max(0, inFlight - 1)
            guard paused, inFlight < Self.maxRequestsInFlight / 2 else { return false }
            paused = false
            return true
        }
        if resume { connection.resumeInbound() }
    }

    /// Feeds the node session a frame (nil once closed).
    func submit(_ frame: Frame) {
        lock.withLock { session }?.receive(frame)
    }

    // MARK: SessionOutbound (any thread)

    var connectionID: UInt64? { nil }

    func send(_ frames: [Frame]) {
        lock.withLock {
            guard !finished else { return }
            for frame in frames { translate(frame) }
        }
    }

    func close(with error: ErrorFrame?) {
        let code: WebSocketErrorCode
        switch error?.code {
        case nil: code = .normalClosure
        case .slowConsumer?: code = .policyViolation
        case .shuttingDown?: code = .goingAway
        case .sessionRevoked?, .sessionExpired?, .authenticationRequired?: code = .init(codeNumber: 4401)
        default: code = .unexpectedServerError
        }
        connection.close(code: code, reason: error.map { "\($0.code.name): \($0.reason)" } ?? "")
    }

    func roomForPacedAnswer() async -> Bool {
        await connection.waitForRoom(below: connection.settings.maxOutboundBytes / 4)
    }

    // MARK: packets (under `lock`)

    /// Writes one packet with the next counter; `seq` is the feed position it carries (nil:
    /// what has been forwarded so far).
    func write<Body: Encodable>(_ type: String, _ body: Body, seq: UInt64? = nil) {
        let timestamp = WebSocketTimestamp.string(for: seq ?? sentHigh)
        if let writable = body as? any JSONTextWritable {
            // Every packet of ours: written by hand (WebSocketPacketText.swift).
            connection.send(utf8: Self.text(type: type, counter: counter, timestamp: timestamp, body: writable))
            counter += 1
            return
        }
        let packet = WebSocketOutboundPacket(type: type, counter: counter, timestamp: timestamp, body: body)
        do {
            let data = try ServerAPIJSON.encode(packet)
            counter += 1
            connection.send(text: String(decoding: data, as: UTF8.self))
        } catch {
            logger.error("cannot encode a WebSocket packet", metadata: ["type": "\(type)", "error": "\(error)"])
        }
    }

    /// A packet's JSON text.
    static func text(type: String, counter: Int, timestamp: String, body: some JSONTextWritable) -> [UInt8] {
        var json = JSONText()
        WebSocketOutboundPacket(type: type, counter: counter, timestamp: timestamp, body: body).write(to: &json)
        return json.bytes
    }

    /// Sends a response packet (any thread).
    func respond<Data: Encodable>(to requestID: String?, success: Bool = true, data: Data) {
        lock.withLock {
            guard !finished else { return }
            write("response", WebSocketResponseBody(request_id: requestID, success: success, data: data))
        }
    }

    /// Sends a failed response packet with Layer's error object (any thread).
    func respond(to requestID: String?, error: ServerAPIError) {
        respond(to: requestID, success: false, data: errorObject(error))
    }

    /// Layer's error object of `error`.
    func errorObject(_ error: ServerAPIError) -> ClientErrorObject {
        ClientErrorObject(
            id: error.id, code: error.code, message: error.message, url: "\(base)/errors#\(error.id)",
            data: error.data)
    }

    private func translate(_ frame: Frame) {
        switch frame {
        case .change(let change): forward(change)
        case .changeBatch(let batch): for change in batch.changes { forward(change) }
        case .ack(let ack): acknowledged(ack)
        case .error(let error): refused(error)
        case .welcome, .authenticated, .nonce, .pong: break
        default: break
        }
    }

    /// Sends a feed entry unless this connection already did (see `sentLow`/`sentHigh`).
    private func forward(_ change: Change) {
        let seq = change.seq
        if seq != 0 {
            guard seq <= sentLow && (replayCursor.map { seq > $0 } ?? false) || seq > sentHigh else { return }
            if seq > sentHigh { sentHigh = seq }
        }
        packets(for: change.event, seq: seq == 0 ? nil : seq)
    }

    private func acknowledged(_ ack: Ack) {
        if ack.requestID == initialSyncID || ack.requestID == resumeID { return }
        guard let waiting = pending.removeValue(forKey: ack.requestID) else { return }
        defer { requestAnsweredLater() }
        switch waiting {
        case .replay(let requestID, let cursor):
            sentLow = min(sentLow, cursor)
            replayCursor = nil
            write("response", WebSocketResponseBody(request_id: requestID, success: true, data: JSONValue.null))
        case .message(let requestID, var message):
            message.position = ack.position
            message.sentAt = ack.timestamp
            receipts.record(message)
            write(
                "response",
                WebSocketResponseBody(request_id: requestID, success: true, data: representation.message(message)))
        case .conversation(let requestID, let requested):
            answerConversation(requestID, id: ack.conversationID ?? requested)
        case .presence(let requestID):
            write("response", WebSocketResponseBody(request_id: requestID, success: true, data: JSONValue.null))
        }
    }

    private func refused(_ error: ErrorFrame) {
        guard let id = error.requestID else { return }
        if id == resumeID {
            // The token died between the upgrade and now.
            connection.close(code: .init(codeNumber: 4401), reason: "session: \(error.reason)")
            return
        }
        guard let waiting = pending.removeValue(forKey: id) else { return }
        defer { requestAnsweredLater() }
        let requestID: String
        switch waiting {
        case .replay(let r, _):
            requestID = r
            replayCursor = nil
        case .message(let r, _), .conversation(let r, _), .presence(let r): requestID = r
        }
        var layer = ServerAPIError.from(WireError(error.code, error.reason))
        if error.code == .existingDistinctConversation {
            // As REST answers it: 409 naming the existing conversation.
            layer = ServerAPIError(
                409, "conflict", 108, error.reason,
                data: error.conversationID.map { ["id": .string(ClientAPIRepresentation.conversationID($0))] })
        }
        write("response", WebSocketResponseBody(request_id: requestID, success: false, data: errorObject(layer)))
    }

    /// Marks a replay as running from `cursor` (its entries up to `sentLow` are new here).
    func replayStarted(_ requestID: String, cursor: UInt64, id: UUID) -> Bool {
        lock.withLock {
            guard replayCursor == nil else { return false }
            replayCursor = cursor
            pending[id] = .replay(requestID: requestID, cursor: cursor)
            return true
        }
    }

    /// The counter of the next packet (Counter.read).
    /// `Presence.subscribe` was asked (any thread).
    func markPresenceSubscribed() { lock.withLock { presenceSubscribed = true } }

    func withLockedCounter<T>(_ body: (Int) -> T) -> T { lock.withLock { body(counter) } }

    /// Registers a request waiting for the frame answering `id`.
    func expect(_ id: UUID, _ waiting: Pending) { lock.withLock { pending[id] = waiting } }

    /// Answers the in-flight count after the lock is released.
    private func requestAnsweredLater() {
        connection.eventLoop.execute { self.requestAnswered() }
    }

    /// The conversation a Conversation.create made or found, read from the store (its
    /// metadata may be an existing distinct conversation's); answered when the read returns.
    private func answerConversation(_ requestID: String, id: ConversationID) {
        let engine = self.engine
        Task {
            do {
                guard let stored = try await engine.store.read({ r in try r.conversation(id) }) else {
                    return self.respond(to: requestID, error: .notFound("no conversation \(id)"))
                }
                let shown = self.lock.withLock { self.representation }
                self.respond(to: requestID, data: shown.conversation(stored.conversation))
            } catch {
                self.respond(to: requestID, error: .internalError("reading the conversation failed"))
            }
        }
    }

    /// A conversation id as the Client API writes it (`layer:///conversations/<uuid>`, the
    /// `lamina:///` form, or the bare UUID).
    static func conversationID(_ text: String) -> ConversationID? {
        ClientAPIRepresentation.conversation(text)
    }

    /// A message id as the Client API writes it.
    static func messageID(_ text: String) -> MessageID? {
        ClientAPIRepresentation.message(text)
    }
}
