// The WebSocket packets and the Client API objects they carry as hand-written JSON text
// (``JSONText``): the same members as their `Encodable` forms, keys in sorted order, nil
// optionals left out. ClientAPIWebSocketTextTests decodes both forms and compares them.

extension WebSocketOutboundPacket: JSONTextWritable where Body: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.key("body")
        body.write(to: &json)
        json.key("counter")
        json.integer(counter)
        json.key("timestamp")
        json.string(timestamp)
        json.key("type")
        json.string(type)
        json.close()
    }
}

extension WebSocketChangeBody: JSONTextWritable where Data: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.key("data")
        data.write(to: &json)
        json.key("object")
        object.write(to: &json)
        json.key("operation")
        json.string(operation)
        json.close()
    }
}

extension WebSocketObjectReference: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.key("id")
        json.string(id)
        json.key("type")
        json.string(type)
        json.key("url")
        json.string(url)
        json.close()
    }
}

extension WebSocketPatchOperation: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.key("operation")
        json.string(operation)
        json.key("property")
        json.string(property)
        json.member("value", value)
        json.close()
    }
}

extension WebSocketResponseBody: JSONTextWritable where Data: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.key("data")
        data.write(to: &json)
        json.member("request_id", request_id)
        json.key("success")
        json.bool(success)
        json.close()
    }
}

extension WebSocketSignalBody: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.key("data")
        json.open()
        json.key("action")
        json.string(data.action)
        json.key("sender")
        data.sender.write(to: &json)
        json.close()
        json.key("object")
        json.open()
        json.key("id")
        json.string(object.id)
        json.key("type")
        json.string(object.type)
        json.close()
        json.key("type")
        json.string(type)
        json.close()
    }
}

extension WebSocketCounterData: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.key("counter")
        json.integer(counter)
        json.close()
    }
}

extension WebSocketDeletionData: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.member("from_position", from_position)
        json.key("mode")
        json.string(mode)
        json.close()
    }
}

extension WebSocketPresenceChanges: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.key("changes")
        changes.write(to: &json)
        json.close()
    }
}

extension ClientIdentityObject: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.member("avatar_url", avatar_url)
        json.key("display_name")
        json.string(display_name)
        json.member("email_address", email_address)
        json.member("first_name", first_name)
        json.member("id", id)
        json.member("identity_type", identity_type)
        json.member("last_name", last_name)
        if let metadata {
            json.key("metadata")
            json.object(metadata)
        }
        json.member("name", name)
        json.member("phone_number", phone_number)
        json.member("public_key", public_key)
        json.member("url", url)
        json.member("user_id", user_id)
        json.close()
    }
}

extension ClientReference: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.key("id")
        json.string(id)
        json.key("url")
        json.string(url)
        json.close()
    }
}

extension ClientContentObject: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.member("download_url", download_url)
        json.member("expiration", expiration)
        json.key("id")
        json.string(id)
        json.member("refresh_url", refresh_url)
        json.key("size")
        json.integer(size)
        json.close()
    }
}

extension ClientPartObject: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.member("body", body)
        json.member("content", content)
        json.member("encoding", encoding)
        json.key("id")
        json.string(id)
        json.key("mime_type")
        json.string(mime_type)
        json.member("url", url)
        json.close()
    }
}

/// What a message and an announcement both show (an announcement is a message without its
/// conversation), written in key order.
protocol ClientMessageFields {
    var id: String { get }
    var url: String { get }
    var parts: [ClientPartObject] { get }
    var sent_at: String? { get }
    var received_at: String? { get }
    var sender: ClientIdentityObject { get }
    var is_unread: Bool { get }
    var recipient_status: [String: String] { get }
    var position: Int64 { get }
    // Lamina's extensions (absent when nil; an announcement has none).
    var edited_at: String? { get }
    var mentions: [String]? { get }
    var reactions: [String: ReactionSummaryObject]? { get }
    var reply_to: String? { get }
    var thread: ClientThreadObject? { get }
}

extension ClientMessageFields {
    var edited_at: String? { nil }
    var mentions: [String]? { nil }
    var reactions: [String: ReactionSummaryObject]? { nil }
    var reply_to: String? { nil }
    var thread: ClientThreadObject? { nil }

    func writeFields(to json: inout JSONText, conversation: ClientReference?) {
        json.open()
        if let conversation {
            json.key("conversation")
            conversation.write(to: &json)
        }
        json.member("edited_at", edited_at)
        json.key("id")
        json.string(id)
        json.key("is_unread")
        json.bool(is_unread)
        json.member("mentions", mentions)
        json.key("parts")
        parts.write(to: &json)
        json.key("position")
        json.integer(position)
        json.member("reactions", reactions)
        json.member("received_at", received_at)
        json.key("recipient_status")
        json.object(recipient_status)
        json.member("reply_to", reply_to)
        json.key("sender")
        sender.write(to: &json)
        json.member("sent_at", sent_at)
        json.member("thread", thread)
        json.key("url")
        json.string(url)
        json.close()
    }
}

extension ReactionSummaryObject: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.key("count")
        json.integer(count)
        json.key("user_ids")
        user_ids.write(to: &json)
        json.close()
    }
}

extension ClientThreadObject: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.key("last_reply")
        json.string(last_reply)
        json.key("reply_count")
        json.integer(reply_count)
        json.close()
    }
}

extension ClientMessageObject: JSONTextWritable, ClientMessageFields {
    func write(to json: inout JSONText) { writeFields(to: &json, conversation: conversation) }
}

extension ClientAnnouncementObject: JSONTextWritable, ClientMessageFields {
    func write(to json: inout JSONText) { writeFields(to: &json, conversation: nil) }
}

extension ClientConversationObject: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.key("created_at")
        json.string(created_at)
        json.key("distinct")
        json.bool(distinct)
        json.key("id")
        json.string(id)
        json.member("last_message", last_message)
        json.key("messages_url")
        json.string(messages_url)
        json.key("metadata")
        metadata.write(to: &json)
        json.key("participants")
        participants.write(to: &json)
        json.key("total_message_count")
        json.integer(total_message_count)
        json.key("unread_message_count")
        json.integer(unread_message_count)
        json.key("url")
        json.string(url)
        json.close()
    }
}

extension ClientErrorObject: JSONTextWritable {
    func write(to json: inout JSONText) {
        json.open()
        json.key("code")
        json.integer(code)
        json.member("data", data)
        json.key("id")
        json.string(id)
        json.key("message")
        json.string(message)
        json.key("url")
        json.string(url)
        json.close()
    }
}
