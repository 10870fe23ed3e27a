import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire

/// Part updates (version 3.0): a backend adds, replaces or removes parts of a sent message.
/// Each is one UPDATE_MESSAGE_PARTS command on behalf of the message's sender carrying the
/// whole new list, so every device gets the message's parts as they now are
/// (`message-parts-changed`). Two updates of one message at the same moment on one node: the
/// later command's list wins whole; on two nodes, each part keeps its latest write (the node
/// replicates only the parts a command changed, SPEC §6.2 Per-part edits).
extension ServerAPI {
    /// POST …/messages/:message_id/parts: appends one part (`mime_type`, `body`, optional
    /// `encoding: base64`); 201 with the part. With `If-None-Match`, the part id follows from
    /// it, so a repeated request finds the part it added.
    func addPart(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        try requireAddressableParts(r)
        let stored = try await storedMessage(r)
        let requestID = try r.requestID()
        let id =
            requestID.map { Self.derivedUUID(Array("part-add".utf8) + withUnsafeBytes(of: $0.uuid) { Array($0) }) }
            ?? UUID()
        let part = try Self.part(.object(try ServerAPIJSON.object(r.http.body)), id: id, name: "part")
        if stored.message.parts.contains(where: { $0.id == id }) {
            return try partCreated(r, part: part, of: stored.message)  // the repeated request's part
        }
        try await update(stored.message, parts: stored.message.parts + [part], requestID: requestID)
        return try partCreated(r, part: part, of: stored.message)
    }

    /// PUT …/messages/:message_id/parts/:part_id: the part (same id) gets a new body; 204.
    func replacePart(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        try requireAddressableParts(r)
        let stored = try await storedMessage(r)
        let id = try r.partID()
        guard let index = stored.message.parts.firstIndex(where: { $0.id == id }) else {
            throw ServerAPIError.notFound("no part \(id.uuidString.lowercased())")
        }
        var parts = stored.message.parts
        parts[index] = try Self.part(.object(try ServerAPIJSON.object(r.http.body)), id: id, name: "part")
        if parts != stored.message.parts { try await update(stored.message, parts: parts, requestID: nil) }
        return HTTPResponse(status: 204)
    }

    /// DELETE …/messages/:message_id/parts/:part_id: removes the part; 204. A message keeps
    /// at least one part (422 for its last one).
    func deletePart(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        try requireAddressableParts(r)
        let stored = try await storedMessage(r)
        let id = try r.partID()
        guard stored.message.parts.contains(where: { $0.id == id }) else {
            throw ServerAPIError.notFound("no part \(id.uuidString.lowercased())")
        }
        let parts = stored.message.parts.filter { $0.id != id }
        guard !parts.isEmpty else {
            throw ServerAPIError.invalidProperty(
                "parts", "a message keeps at least one part; delete the message instead")
        }
        try await update(stored.message, parts: parts, requestID: nil)
        return HTTPResponse(status: 204)
    }

    func requireAddressableParts(_ r: ServerAPIRequest) throws(ServerAPIError) {
        guard r.representation.version.hasAddressableParts else {
            throw .invalidEndpoint(
                "message parts are addressable in version 3.0 (Accept: application/vnd.layer+json; version=3.0)")
        }
    }

    /// Runs UPDATE_MESSAGE_PARTS as the message's sender.
    func update(_ message: Message, parts: [MessagePart], requestID: UUID?) async throws {
        _ = try await liveConversation(message.conversationID)
        let frame = Frame.updateMessageParts(
            UpdateMessageParts(
                requestID: requestID ?? UUID(), conversationID: message.conversationID, messageID: message.id,
                parts: parts))
        _ = try await engine.runServerAPICommand(frame, as: message.sender)
    }

    private func partCreated(_ r: ServerAPIRequest, part: MessagePart, of message: Message) throws -> HTTPResponse {
        guard let object = r.representation.parts([part], of: message.id).first else {
            throw ServerAPIError.internalError("no part representation")
        }
        let conversation = message.conversationID.uuid.uuidString.lowercased()
        let uuid = message.id.uuid.uuidString.lowercased()
        let location =
            "\(r.representation.base)/conversations/\(conversation)/messages/\(uuid)/parts/\(part.id.uuidString.lowercased())"
        return ServerAPIJSON.response(201, object, extraHeaders: [("location", location)])
    }
}
