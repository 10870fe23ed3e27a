import LaminaNode
import LaminaWireFuzzChecks

extension NodeFuzzChecks {
    /// The Client API WebSocket's packet decoder: `input`, as the text message the transport
    /// delivers (valid UTF-8; other input is skipped, the transport closes with 1007 first),
    /// decodes to a request of a known method with a `request_id` of at most
    /// ``WebSocketInboundPacket/maxRequestIDBytes`` bytes or a typing signal, or is refused
    /// with Layer's error (`invalid_request`, `missing_property`, `invalid_property`) and a
    /// reason, never anything else.
    public static func checkWebSocketPacket(_ input: [UInt8]) throws(PropertyViolation) {
        guard let text = String(validating: input, as: UTF8.self) else { return }
        func violation(_ detail: String) -> PropertyViolation {
            PropertyViolation(property: "websocket-packet", detail: detail, input: input)
        }
        do {
            switch try WebSocketInboundPacket.decode(text) {
            case .request(let request):
                guard request.requestID.utf8.count <= WebSocketInboundPacket.maxRequestIDBytes,
                    WebSocketRequest.Method.allCases.contains(request.method)
                else { throw violation("accepted request \(request.requestID.prefix(200)) \(request.method)") }
            case .typing(let conversation, _):
                guard !conversation.isEmpty || text.contains("\"\"") else {
                    throw violation("accepted a typing signal without a conversation")
                }
            }
        } catch let error as WebSocketPacketError {
            let layer = error.errorID
            guard ["invalid_request", "missing_property", "invalid_property"].contains(layer), !error.message.isEmpty
            else { throw violation("refused with \(layer): \(error.message)") }
            if let id = error.requestID, id.utf8.count > WebSocketInboundPacket.maxRequestIDBytes {
                throw violation("refused with a request_id of \(id.utf8.count) bytes to answer")
            }
        } catch let violation as PropertyViolation {
            throw violation
        } catch {
            throw violation("threw \(error)")
        }
    }
}
