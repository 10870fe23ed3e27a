import Foundation
import LaminaModel
import LaminaWire

/// Layer's `application/vnd.layer-patch+json` operations on a conversation, as engine
/// commands: `participants` (add, remove, set; the users in `value`, or one in `id` as the
/// Client API's Web SDK sends them) and `metadata` (`set` of the whole object, `set` and
/// `delete` of `metadata.<path>`). Shared by the Server API and the Client API; all or none.
enum ConversationPatch {
    /// The `Content-Type` a PATCH must have (415 otherwise).
    static func checkContentType(_ value: String?) throws(ServerAPIError) {
        let type = value?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
        guard type == "application/vnd.layer-patch+json" else {
            throw .invalidHeader(415, "Content-Type", "PATCH needs Content-Type: application/vnd.layer-patch+json")
        }
    }

    /// The commands that apply `operations` to `conversation`, removals last, and the
    /// participants it has after them (at least one).
    static func frames(_ operations: [JSONValue], on conversation: Conversation) throws(ServerAPIError) -> (
        frames: [Frame], participants: Set<UserID>
    ) {
        let (tagged, participants) = try taggedFrames(operations, on: conversation)
        return (tagged.map(\.frame), participants)
    }

    /// ``frames(_:on:)`` with the index of the operation each command comes from (an operation
    /// may need several: a `set` of participants adds and removes, a `set` of the whole
    /// metadata sets and deletes keys).
    static func taggedFrames(_ operations: [JSONValue], on conversation: Conversation) throws(ServerAPIError) -> (
        frames: [(operation: Int, frame: Frame)], participants: Set<UserID>
    ) {
        let id = conversation.id
        var participants = conversation.participants
        // The top-level metadata keys as the operations so far leave them (a `set` of the
        // whole metadata deletes those it does not name, also ones an earlier operation set).
        var metadataKeys = Set(conversation.metadata.values.keys)
        var frames: [(operation: Int, frame: Frame)] = []
        for (index, raw) in operations.enumerated() {
            guard let op = raw.object else { throw .invalidProperty("[\(index)]", "each operation must be an object") }
            guard let operation = op["operation"]?.string else { throw .missingProperty("[\(index)].operation") }
            guard let property = op["property"]?.string else { throw .missingProperty("[\(index)].property") }
            let value = op["value"] ?? op["id"]
            switch (operation, property) {
            case ("add", "participants"), ("remove", "participants"), ("set", "participants"):
                guard let value else { throw .missingProperty("[\(index)].value") }
                var users = Set<UserID>()
                for item in value.array ?? [value] {
                    users.insert(try ServerAPIRepresentation.user(item, property: "[\(index)].value"))
                }
                var add = Set<UserID>()
                var remove = Set<UserID>()
                switch operation {
                case "add": add = users.subtracting(participants)
                case "remove": remove = users.intersection(participants)
                default:
                    add = users.subtracting(participants)
                    remove = participants.subtracting(users)
                }
                if !add.isEmpty {
                    frames.append(
                        (
                            index,
                            .addParticipants(ParticipantsUpdate(requestID: UUID(), conversationID: id, users: add))
                        ))
                }
                if !remove.isEmpty {
                    frames.append(
                        (
                            index,
                            .removeParticipants(
                                ParticipantsUpdate(requestID: UUID(), conversationID: id, users: remove))
                        ))
                }
                participants.formUnion(add)
                participants.subtract(remove)
            case ("set", let p) where p.hasPrefix("metadata."):
                let path = try keyPath(String(p.dropFirst("metadata.".count)), index)
                if let top = path.components.first { metadataKeys.insert(top) }
                guard let value = op["value"] else { throw .missingProperty("[\(index)].value") }
                let v = try ServerAPIRepresentation.metadataValue(value, property: "[\(index)].value")
                frames.append(
                    (index, .setMetadata(SetMetadata(requestID: UUID(), conversationID: id, keyPath: path, value: v))))
            case ("set", "metadata"):
                guard let object = op["value"]?.object else {
                    throw .invalidProperty("[\(index)].value", "metadata must be set to an object")
                }
                for key in metadataKeys.sorted() where object[key] == nil {
                    frames.append(
                        (
                            index,
                            .deleteMetadata(
                                DeleteMetadata(requestID: UUID(), conversationID: id, keyPath: try keyPath(key, index)))
                        ))
                }
                for (key, item) in object.sorted(by: { $0.key < $1.key }) {
                    let v = try ServerAPIRepresentation.metadataValue(item, property: "[\(index)].value.\(key)")
                    frames.append(
                        (
                            index,
                            .setMetadata(
                                SetMetadata(
                                    requestID: UUID(), conversationID: id, keyPath: try keyPath(key, index), value: v))
                        ))
                }
                metadataKeys = Set(object.keys)
            case ("delete", let p) where p.hasPrefix("metadata."):
                let path = try keyPath(String(p.dropFirst("metadata.".count)), index)
                if path.components.count == 1 { metadataKeys.remove(path.components[0]) }
                frames.append(
                    (index, .deleteMetadata(DeleteMetadata(requestID: UUID(), conversationID: id, keyPath: path))))
            default:
                throw .invalidProperty("[\(index)]", "unknown operation \(operation) on \(property)")
            }
        }
        guard !participants.isEmpty else {
            throw .invalidProperty("participants", "a conversation keeps at least one participant")
        }
        let ordered =
            frames.filter { if case .removeParticipants = $0.frame { false } else { true } }
            + frames.filter { if case .removeParticipants = $0.frame { true } else { false } }
        return (ordered, participants)
    }

    static func keyPath(_ dotted: String, _ index: Int) throws(ServerAPIError) -> MetadataKeyPath {
        do { return try MetadataKeyPath(parsing: dotted) } catch {
            throw .invalidProperty("[\(index)].property", error.reason)
        }
    }
}
