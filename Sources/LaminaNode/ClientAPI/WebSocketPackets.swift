import Foundation
import LaminaModel

/// The JSON a Client API WebSocket sends (Layer's Web SDK packets): `{type, counter,
/// timestamp, body}`. `counter` counts this connection's packets from 0; `timestamp` is the
/// feed position of the connection (see ``WebSocketSession``) written as an ISO 8601 time.
struct WebSocketOutboundPacket<Body> {
    var type: String
    var counter: Int
    var timestamp: String
    var body: Body
}

extension WebSocketOutboundPacket: Encodable where Body: Encodable {}

/// A `change` packet's body: `operation` create, update or delete of `object`.
struct WebSocketChangeBody<Data: Encodable>: Encodable {
    var operation: String
    var object: WebSocketObjectReference
    var data: Data
}

/// `{type, id, url}` of a changed object.
struct WebSocketObjectReference: Encodable {
    var type: String
    var id: String
    var url: String
}

/// One layer-patch operation (`application/vnd.layer-patch+json`): `set`, `delete`, `add`, `remove`.
struct WebSocketPatchOperation: Encodable {
    var operation: String
    var property: String
    var value: JSONValue?
}

/// A `response` packet's body.
struct WebSocketResponseBody<Data: Encodable>: Encodable {
    var request_id: String?
    var success: Bool
    var data: Data
}

/// A `signal` packet's body (typing indicators).
struct WebSocketSignalBody: Encodable {
    struct Object: Encodable {
        var type = "Conversation"
        var id: String
    }
    struct TypingData: Encodable {
        var action: String
        /// Who types: their identity object.
        var sender: ClientIdentityObject
    }
    var type = "typing_indicator"
    var object: Object
    var data: TypingData
}

/// `Counter.read`'s answer.
struct WebSocketCounterData: Encodable { var counter: Int }

/// A deletion's data: how it was deleted (Layer's `mode`), and the position below which
/// messages went for a conversation trimmed rather than deleted.
struct WebSocketDeletionData: Encodable {
    var mode: String
    var from_position: Int64?
}

enum WebSocketTimestamp {
    /// The packet timestamp for feed position `seq`: `seq` milliseconds after 1970-01-01. The
    /// Web SDK keeps the last packet's timestamp and asks `Event.replay` from it after a
    /// reconnect; written this way it names an exact feed position (no clock skew, no two
    /// entries in one millisecond, the same on every node of a cluster), so the replay
    /// misses nothing and repeats nothing.
    static func string(for seq: UInt64) -> String {
        ClientAPIDate.string(millisecondsSince1970: Int64(clamping: seq))
    }

    /// The feed position a `from_timestamp` names (nil: not an ISO 8601 time at or after 1970).
    static func seq(from text: String) -> UInt64? {
        let styles = [
            Date.ISO8601FormatStyle(includingFractionalSeconds: true), Date.ISO8601FormatStyle(),
        ]
        for style in styles {
            if let date = try? style.parse(text) {
                let ms = (date.timeIntervalSince1970 * 1000).rounded()
                return ms >= 0 && ms < 1e15 ? UInt64(ms) : nil
            }
        }
        return nil
    }
}
