import Foundation
import LaminaWire

/// A packet a Client API WebSocket client sends (Layer's Web SDK: `{type, body}`), decoded
/// and checked before any work: ``decode(_:)`` is the only way in.
public enum WebSocketInboundPacket: Hashable, Sendable {
    /// `{type: "request", body: {request_id, method, object_id?, data?}}`.
    case request(WebSocketRequest)
    /// `{type: "signal", body: {type: "typing_indicator", object: {id}, data: {action}}}`.
    case typing(conversation: String, action: TypingState)

    /// The largest packet accepted, in UTF-8 bytes (the transport's message limit is the hard one).
    public static let maxBytes = 1024 * 1024
    /// The longest `request_id` echoed back.
    public static let maxRequestIDBytes = 128

    /// Decodes one text message. Errors carry Layer's error id, code and a reason naming the
    /// bad property, and the `request_id` when one could be read (the answer goes to it).
    public static func decode(_ text: String) throws(WebSocketPacketError) -> WebSocketInboundPacket {
        guard text.utf8.count <= maxBytes else {
            throw WebSocketPacketError(.invalidRequest, "a packet is at most \(maxBytes) bytes")
        }
        let value: JSONValue
        do {
            value = try JSONTextParser.parse(text)
        } catch {
            throw WebSocketPacketError(.invalidRequest, "the packet is not JSON (at byte \(error.offset))")
        }
        guard let packet = value.object else {
            throw WebSocketPacketError(.invalidRequest, "a packet is a JSON object")
        }
        guard let type = packet["type"]?.string else {
            throw WebSocketPacketError(.missingProperty, "the packet needs a string type", property: "type")
        }
        guard let body = packet["body"]?.object else {
            throw WebSocketPacketError(.missingProperty, "the packet needs an object body", property: "body")
        }
        switch type {
        case "request": return .request(try WebSocketRequest(body))
        case "signal": return try signal(body)
        default:
            throw WebSocketPacketError(
                .invalidProperty, "unknown packet type \(type.prefix(64)) (request and signal are accepted)",
                property: "type")
        }
    }

    private static func signal(_ body: [String: JSONValue]) throws(WebSocketPacketError) -> WebSocketInboundPacket {
        guard body["type"]?.string == "typing_indicator" else {
            throw WebSocketPacketError(
                .invalidProperty, "the only signal is typing_indicator", property: "body.type")
        }
        guard let id = body["object"]?.object?["id"]?.string else {
            throw WebSocketPacketError(
                .missingProperty, "a typing signal names its conversation", property: "body.object.id")
        }
        let action: TypingState
        switch body["data"]?.object?["action"]?.string {
        case "started": action = .started
        case "paused": action = .paused
        case "finished": action = .finished
        default:
            throw WebSocketPacketError(
                .invalidProperty, "action is started, paused or finished", property: "body.data.action")
        }
        return .typing(conversation: id, action: action)
    }
}

/// A `request` packet's body.
public struct WebSocketRequest: Hashable, Sendable {
    public enum Method: String, Hashable, Sendable, CaseIterable {
        case conversationCreate = "Conversation.create"
        case messageCreate = "Message.create"
        case counterRead = "Counter.read"
        case eventReplay = "Event.replay"
        case presenceSubscribe = "Presence.subscribe"
        case presenceUpdate = "Presence.update"
        case presenceSync = "Presence.sync"
    }

    public var requestID: String
    public var method: Method
    /// `object_id` (Message.create: the conversation).
    public var objectID: String?
    public var data: JSONValue?

    init(_ body: [String: JSONValue]) throws(WebSocketPacketError) {
        guard let id = body["request_id"]?.string else {
            throw WebSocketPacketError(.missingProperty, "a request needs a string request_id", property: "request_id")
        }
        guard id.utf8.count <= WebSocketInboundPacket.maxRequestIDBytes else {
            throw WebSocketPacketError(
                .invalidProperty, "request_id is at most \(WebSocketInboundPacket.maxRequestIDBytes) bytes",
                property: "request_id")
        }
        guard let name = body["method"]?.string else {
            throw WebSocketPacketError(.missingProperty, "a request needs a method", property: "method", requestID: id)
        }
        guard let method = Method(rawValue: name) else {
            let known = Method.allCases.map(\.rawValue).joined(separator: ", ")
            throw WebSocketPacketError(
                .invalidProperty, "unknown method \(name.prefix(64)) (known: \(known))", property: "method",
                requestID: id)
        }
        if let object = body["object_id"], object.string == nil, !object.isNull {
            throw WebSocketPacketError(.invalidProperty, "object_id is a string", property: "object_id", requestID: id)
        }
        requestID = id
        self.method = method
        objectID = body["object_id"]?.string
        data = body["data"]
    }
}

/// Why a packet was refused: Layer's error id and code, a reason, the bad property.
public struct WebSocketPacketError: Error, Hashable, Sendable {
    public enum Kind: Hashable, Sendable {
        case invalidRequest, missingProperty, invalidProperty
    }

    public var kind: Kind
    public var message: String
    public var property: String?
    public var requestID: String?

    public init(_ kind: Kind, _ message: String, property: String? = nil, requestID: String? = nil) {
        self.kind = kind
        self.message = message
        self.property = property
        self.requestID = requestID
    }

    /// Layer's error id for it.
    public var errorID: String { layerError.id }

    /// Layer's error object for it (`invalid_request` 10, `missing_property` 104, `invalid_property` 105).
    var layerError: ServerAPIError {
        switch kind {
        case .invalidRequest: .invalidRequest(message)
        case .missingProperty:
            ServerAPIError(422, "missing_property", 104, message, data: property.map { ["property": .string($0)] })
        case .invalidProperty:
            ServerAPIError(422, "invalid_property", 105, message, data: property.map { ["property": .string($0)] })
        }
    }
}
