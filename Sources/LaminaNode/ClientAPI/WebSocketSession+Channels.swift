import LaminaModel
import LaminaWire

/// Channel events (SPEC §6.8 kinds 16 to 19) as Layer `change` packets, under the session's
/// lock. The feed brings a member's own channel events (created, joined, left, deleted); channel
/// messages come live, once, to the sessions of members online (and are read from the log over
/// REST when the socket was away: they are not feed entries).
extension WebSocketSession {
    func channelPackets(for event: ChangeEvent, seq: UInt64?) {
        let r = representation
        switch event {
        case .channelCreated(let channel):
            // Kind 16 comes to a member's feed when they join (or create): they are a member.
            var object = r.channel(channel, memberCount: 0, isMember: true)
            object.member_count = nil
            channelChange("create", channel: channel.id, object, seq: seq)
        case .channelMembershipChanged(let changed):
            guard changed.user == user else { return }
            let membership = r.membership(changed.user, of: changed.channelID)
            let reference = WebSocketObjectReference(type: "Membership", id: membership.id, url: membership.url)
            if changed.joined {
                write("change", WebSocketChangeBody(operation: "create", object: reference, data: membership), seq: seq)
            } else {
                write(
                    "change",
                    WebSocketChangeBody(
                        operation: "delete", object: reference, data: WebSocketDeletionData(mode: "all_participants")),
                    seq: seq)
            }
            // The Web SDK's `channel.membership` (its `isCurrentParticipant`).
            let value = changed.joined ? Self.json(membership) ?? .null : .null
            channelChange(
                "update", channel: changed.channelID,
                [WebSocketPatchOperation(operation: "set", property: "membership", value: value)], seq: seq)
        case .channelMessage(let message):
            let object = r.channelMessage(message)
            write(
                "change",
                WebSocketChangeBody(
                    operation: "create",
                    object: WebSocketObjectReference(type: "Message", id: object.id, url: object.url),
                    data: object), seq: seq)
        case .channelDeleted(let deleted):
            channelChange(
                "delete", channel: deleted.channelID, WebSocketDeletionData(mode: "all_participants"), seq: seq)
        default: return
        }
    }

    private func channelChange<Data: Encodable>(_ operation: String, channel: ChannelID, _ data: Data, seq: UInt64?) {
        let reference = representation.channelReference(channel)
        write(
            "change",
            WebSocketChangeBody(
                operation: operation,
                object: WebSocketObjectReference(type: "Channel", id: reference.id, url: reference.url), data: data),
            seq: seq)
    }
}

extension WebSocketSession {
    /// `Message.create` naming a channel (the Web SDK's `ChannelMessage.send`): the channel
    /// command as the socket's user (members only, inline parts), answered with the message as
    /// stored (its place in the log) once it is durable, or Layer's error.
    func createChannelMessage(_ request: WebSocketRequest, in channel: ChannelID) throws {
        guard let data = request.data?.object else { throw ServerAPIError.missingProperty("data") }
        let id = try ClientAPI.chosenMessageID(data)
        let (parts, _) = try ServerAPI.content(data, of: id)
        let (engine, user, requestID) = (self.engine, self.user, request.requestID)
        requestStarted()
        Task {
            defer { self.connection.eventLoop.execute { self.requestAnswered() } }
            do {
                let outcome = try await engine.sendChannelMessage(
                    SendChannelMessage(messageID: id, channelID: channel, parts: parts), by: user)
                if case .refused(let error) = outcome { return self.respond(to: requestID, error: .from(error)) }
                guard let stored = try await engine.store.read({ r in try r.channelMessage(id) }) else {
                    return self.respond(to: requestID, error: .internalError("the channel message was not stored"))
                }
                let shown = self.lock.withLock { self.representation }
                self.respond(to: requestID, data: shown.channelMessage(stored))
            } catch {
                self.respond(to: requestID, error: ClientAPI.apiError(error))
            }
        }
    }
}
