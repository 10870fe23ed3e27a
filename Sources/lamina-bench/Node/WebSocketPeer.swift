import Foundation
import LaminaModel
import LaminaNode
import LaminaTransport
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Session tokens of the Client API for load users, over REST on one HTTP/1.1 connection:
/// `POST /nonces`, a dev identity token for the nonce, `POST /sessions` (set-up, never measured).
final class ClientAPILogin {
    let node: NodeProcess
    private let connection: HTTP1Connection
    private static let headers: HeaderFields = [
        ("accept", "application/vnd.layer+json; version=3.0"), ("content-type", "application/json"),
    ]

    private init(node: NodeProcess, connection: HTTP1Connection) {
        self.node = node
        self.connection = connection
    }

    static func open(_ node: NodeProcess, group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws
        -> ClientAPILogin
    {
        var tls = TLSConfiguration.client(trust: .caFile(node.caFile))
        tls.offersHTTP1 = true
        let connection = try await HTTP1Connection.connect(
            host: "127.0.0.1", port: node.port, tls: try TLSContext(tls), group: group, connectTimeout: .seconds(10))
        return ClientAPILogin(node: node, connection: connection)
    }

    /// A new session of `user`: its token. The identity token comes from the node's dev
    /// provider endpoint (`POST /dev/identity_tokens`), which also names the app id to sign in to.
    func sessionToken(for user: UserID) async throws -> String {
        let nonce = try await post("/nonces", [:], expecting: "nonce")
        let identity = try await post(
            "/dev/identity_tokens", ["user_id": user.rawValue, "nonce": nonce[0]], expecting: "identity_token", "app_id"
        )
        return try await post(
            "/sessions", ["identity_token": identity[0], "app_id": identity[1]], expecting: "session_token")[0]
    }

    private func post(_ path: String, _ body: [String: String], expecting keys: String...) async throws -> [String] {
        let data = try JSONSerialization.data(withJSONObject: body)
        let response = try await connection.request(
            method: .POST, path: path, headers: Self.headers, body: ByteBuffer(bytes: data), timeout: .seconds(30))
        let object =
            (try? JSONSerialization.jsonObject(with: Data(response.body.readableBytesView))) as? [String: Any] ?? [:]
        let values = keys.compactMap { object[$0] as? String }
        guard response.status == 201, values.count == keys.count else {
            throw BenchFailure(
                "POST \(path) answered \(response.status): \(String(buffer: response.body).prefix(300))")
        }
        return values
    }

    func close() async { await connection.close() }
}

/// One user on its own Client API WebSocket (TLS, HTTP/1.1 Upgrade, subprotocol `layer-3.0`)
/// with what the write-path modes need: `Message.create` and `Conversation.create` requests
/// answered by request id, and the messages of others as their `change` packets arrive.
///
/// Packets are scanned, not decoded: a load generator must not be the bottleneck, and the
/// fields it needs (`request_id`, `success`, the timed text of a created message) are found
/// by their JSON spelling (the node writes compact JSON).
final class WebSocketPeer: @unchecked Sendable {
    let user: UserID
    let socket: WebSocketClient
    /// Why the socket failed (it closed before `close()`), for load loops to stop on.
    let failure = NIOLockedValueBox<String?>(nil)
    private let closing = NIOLockedValueBox(false)
    // Event loop only.
    private var waiting: [String: EventLoopPromise<Bool>] = [:]
    private var nextRequest = 0

    private init(user: UserID, socket: WebSocketClient) {
        self.user = user
        self.socket = socket
    }

    /// Signs in through `login` and opens the WebSocket. `onMessage` is called on the event
    /// loop with the send time carried by each message-created `change` packet (messages of
    /// others only when `othersOnly`; nil: such packets are ignored).
    static func connect(
        _ login: ClientAPILogin, user: UserID, group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        onMessage: (@Sendable (UInt64) -> Void)? = nil
    ) async throws -> WebSocketPeer {
        let token = try await login.sessionToken(for: user)
        return try await open(login.node, token: token, user: user, group: group, onMessage: onMessage)
    }

    /// Opens a WebSocket on an existing session token.
    static func open(
        _ node: NodeProcess, token: String, user: UserID, group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        onMessage: (@Sendable (UInt64) -> Void)? = nil
    ) async throws -> WebSocketPeer {
        var tls = TLSConfiguration.client(trust: .caFile(node.caFile))
        tls.offersHTTP1 = true
        let box = NIOLockedValueBox<WebSocketPeer?>(nil)
        let socket = try await WebSocketClient.connect(
            host: "127.0.0.1", port: node.port, path: "\(WebSocketEndpoint.path)?session_token=\(token)",
            subprotocols: ["layer-3.0"], tls: try TLSContext(tls), group: group,
            onText: { text in box.withLockedValue { $0 }?.handle(text, onMessage: onMessage) },
            onClose: { code in box.withLockedValue { $0 }?.closed(String(describing: code)) })
        let peer = WebSocketPeer(user: user, socket: socket)
        box.withLockedValue { $0 = peer }
        return peer
    }

    private static let responseMark = Array(#""type":"response""#.utf8)
    private static let changeMark = Array(#""type":"change""#.utf8)
    private static let createMark = Array(#""operation":"create""#.utf8)
    private static let requestIDMark = Array(#""request_id":""#.utf8)
    private static let successMark = Array(#""success":true"#.utf8)
    private static let bodyMark = Array(#""body":""#.utf8)

    private func handle(_ text: ByteBuffer, onMessage: (@Sendable (UInt64) -> Void)?) {
        let bytes = text.readableBytesView
        if Scan.find(Self.responseMark, in: bytes) != nil {
            guard let start = Scan.find(Self.requestIDMark, in: bytes).map({ $0 + Self.requestIDMark.count }),
                let end = bytes[start...].firstIndex(of: UInt8(ascii: "\""))
            else { return }
            let id = String(decoding: bytes[start..<end], as: UTF8.self)
            waiting.removeValue(forKey: id)?.succeed(Scan.find(Self.successMark, in: bytes) != nil)
            return
        }
        guard let onMessage, Scan.find(Self.changeMark, in: bytes) != nil, Scan.find(Self.createMark, in: bytes) != nil,
            let body = Scan.find(Self.bodyMark, in: bytes)
        else { return }
        let digits = bytes[(body + Self.bodyMark.count)...].prefix(20)
        guard digits.count == 20 else { return }
        var sentAt: UInt64 = 0
        for b in digits {
            guard b >= 48, b <= 57 else { return }
            sentAt = sentAt * 10 + UInt64(b - 48)
        }
        onMessage(sentAt)
    }

    private func closed(_ code: String) {
        if !closing.withLockedValue({ $0 }) {
            failure.withLockedValue { if $0 == nil { $0 = "the WebSocket closed (\(code))" } }
        }
        let pending = waiting
        waiting = [:]
        for promise in pending.values { promise.fail(BenchFailure("the WebSocket closed")) }
    }

    /// Sends a `request` packet with `method`, `objectID` and `data` (JSON text); completes
    /// with the response's `success`.
    func request(method: String, objectID: String? = nil, data: String) -> EventLoopFuture<Bool> {
        let loop = socket.eventLoop
        let promise = loop.makePromise(of: Bool.self)
        loop.execute {
            self.nextRequest += 1
            let id = "r\(self.nextRequest)"
            self.waiting[id] = promise
            var packet = #"{"type":"request","body":{"request_id":""# + id + #"","method":""# + method + "\""
            if let objectID { packet += #","object_id":""# + objectID + "\"" }
            packet += #","data":"# + data + "}}"
            self.socket.send(text: packet)
        }
        return promise.futureResult
    }

    /// Creates a non-distinct conversation with `others` (`Conversation.create`).
    func createConversation(with others: [UserID]) async throws -> ConversationID {
        let id = ConversationID.random()
        let participants = others.map { "\"\($0.rawValue)\"" }.joined(separator: ",")
        let data =
            #"{"id":""# + ClientAPIRepresentation.conversationID(id) + #"","distinct":false,"participants":["#
            + participants + "]}"
        guard try await request(method: "Conversation.create", data: data).get() else {
            throw BenchFailure("Conversation.create refused for \(user)")
        }
        return id
    }

    /// Sends a `Message.create` of one text part (`text` needs no JSON escaping) with a
    /// time-ordered id, as the sync load's senders make them; completes with its success.
    func sendMessage(_ text: String, in conversation: ConversationID) -> EventLoopFuture<Bool> {
        let data =
            #"{"id":""# + ClientAPIRepresentation.messageID(.timeOrdered())
            + #"","parts":[{"mime_type":"text/plain","body":""# + text + #""}]}"#
        return request(
            method: "Message.create", objectID: ClientAPIRepresentation.conversationID(conversation), data: data)
    }

    func close() async {
        closing.withLockedValue { $0 = true }
        await socket.close()
    }
}

/// Byte-pattern search in a packet.
enum Scan {
    static func find(_ pattern: [UInt8], in bytes: ByteBufferView) -> Int? {
        guard let first = pattern.first, bytes.count >= pattern.count else { return nil }
        var i = bytes.startIndex
        let last = bytes.endIndex - pattern.count
        while i <= last {
            guard let hit = bytes[i...last].firstIndex(of: first) else { return nil }
            var matched = true
            for k in 1..<pattern.count where bytes[hit + k] != pattern[k] {
                matched = false
                break
            }
            if matched { return hit }
            i = hit + 1
        }
        return nil
    }
}
