import Foundation
import LaminaModel
import LaminaTransport

/// Reading a message's parts and replacing them all (version 3.0, where parts are objects of
/// their own): `GET …/parts`, `GET …/parts/:part_id`, `PUT …/parts`.
extension ServerAPI {
    /// GET …/messages/:message_id/parts: the message's parts in order (200).
    func listParts(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        try requireAddressableParts(r)
        let stored = try await storedMessage(r)
        let parts = r.representation.parts(stored.message.parts, of: stored.message.id)
        return ServerAPIJSON.response(200, parts, extraHeaders: [("layer-count", String(parts.count))])
    }

    /// GET …/messages/:message_id/parts/:part_id: one part (200); 404 when the message has none
    /// of that id.
    func getPart(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        try requireAddressableParts(r)
        let stored = try await storedMessage(r)
        let id = try r.partID()
        guard let part = stored.message.parts.first(where: { $0.id == id }),
            let object = r.representation.parts([part], of: stored.message.id).first
        else { throw ServerAPIError.notFound("no part \(id.uuidString.lowercased())") }
        return ServerAPIJSON.response(200, object)
    }

    /// PUT …/messages/:message_id/parts: a JSON array of parts replaces all of the message's
    /// parts (1 to `Limits.maxPartsPerMessage`); an item whose `id` names one of the message's
    /// parts keeps that id, the others get new ones. 200 with the parts as they now are.
    func replaceParts(_ r: ServerAPIRequest) async throws -> HTTPResponse {
        try requireAddressableParts(r)
        let stored = try await storedMessage(r)
        let items = try ServerAPIJSON.array(r.http.body)
        guard !items.isEmpty else {
            throw ServerAPIError.invalidProperty(
                "parts", "a message keeps at least one part; delete the message instead")
        }
        guard items.count <= Limits.maxPartsPerMessage else {
            throw ServerAPIError.invalidProperty(
                "parts", "a message has at most \(Limits.maxPartsPerMessage) parts, not \(items.count)")
        }
        let existing = Set(stored.message.parts.map(\.id))
        var parts: [MessagePart] = []
        var used = Set<UUID>()
        for (index, item) in items.enumerated() {
            let name = "parts[\(index)]"
            guard var object = item.object else {
                throw ServerAPIError.invalidProperty(name, "\(name) must be an object")
            }
            var id = UUID()
            if let raw = object["id"], !raw.isNull {
                guard let text = raw.string, let named = Self.partUUID(text, of: stored.message.id),
                    existing.contains(named), !used.contains(named)
                else {
                    throw ServerAPIError.invalidProperty(
                        "\(name).id", "\(name).id must name one of the message's parts, once")
                }
                id = named
            }
            used.insert(id)
            object["id"] = nil
            parts.append(try Self.part(.object(object), id: id, name: name))
        }
        if parts != stored.message.parts { try await update(stored.message, parts: parts, requestID: nil) }
        return ServerAPIJSON.response(200, r.representation.parts(parts, of: stored.message.id))
    }

    /// A part id: `layer:///messages/<message>/parts/<uuid>` of this message, or the bare UUID.
    static func partUUID(_ text: String, of message: MessageID) -> UUID? {
        if let uuid = UUID(uuidString: text) { return uuid }
        guard let id = try? MessagePartID(parsing: text), id.message == message else { return nil }
        return id.part
    }
}
