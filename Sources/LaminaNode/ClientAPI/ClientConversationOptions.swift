import LaminaModel

/// The `distinct` (default true) and `metadata` of a conversation-creation body: REST's
/// `POST /conversations` and the WebSocket's `Conversation.create` read them alike. `prefix`
/// goes before property names in errors (`data.` for a WebSocket request's data).
struct ClientConversationOptions {
    var distinct = true
    var metadata = Metadata()

    init(_ body: [String: JSONValue], prefix: String = "") throws {
        if let value = body["distinct"], !value.isNull {
            guard let flag = value.bool else {
                throw ServerAPIError.invalidProperty("\(prefix)distinct", "distinct must be true or false")
            }
            distinct = flag
        }
        if let value = body["metadata"], !value.isNull {
            guard let object = value.object else {
                throw ServerAPIError.invalidProperty(
                    "\(prefix)metadata", "metadata must be an object of strings and objects")
            }
            for (key, v) in object {
                metadata.values[key] = try ServerAPIRepresentation.metadataValue(
                    v, property: "\(prefix)metadata.\(key)")
            }
        }
    }
}
