import Foundation
import LaminaModel
import LaminaWire

/// Channels (SPEC §6.8): Layer's large named rooms. Joining, leaving, creating, deleting and
/// sending need a live session (they are not queued offline) and return once the node
/// acknowledged them; what they change reaches the store as the node's changes arrive (the
/// channel with the feed, messages live and from the channel's log), so queries over
/// ``StoredChannel`` and ``StoredChannelMessage`` follow.
extension LaminaClient {
    /// Creates a channel named `name` (unique on the node); the user is its first member.
    @discardableResult
    public func createChannel(named name: String) async throws(ClientError) -> ChannelID {
        let channelName: ChannelName
        do { channelName = try ChannelName(name) } catch {
            throw ClientError(error)
        }
        let id = ChannelID.timeOrdered()
        try await sendChannelCommand(.createChannel(CreateChannel(channelID: id, name: channelName)))
        return id
    }

    /// Joins channel `id`: the device then reads its whole history and gets its new messages.
    public func joinChannel(_ id: ChannelID) async throws(ClientError) {
        try await sendChannelCommand(.joinChannel(ChannelRequest(requestID: UUID(), channelID: id)))
    }

    /// Leaves channel `id`.
    public func leaveChannel(_ id: ChannelID) async throws(ClientError) {
        try await sendChannelCommand(.leaveChannel(ChannelRequest(requestID: UUID(), channelID: id)))
    }

    /// Deletes channel `id` for everyone (its creator only).
    public func deleteChannel(_ id: ChannelID) async throws(ClientError) {
        try await sendChannelCommand(.deleteChannel(ChannelRequest(requestID: UUID(), channelID: id)))
    }

    /// Sends a message of `parts` (SPEC §3.12) to channel `id`; returns its id once the node
    /// acknowledged it (the message reaches the store as the node delivers it). Rich parts made
    /// with this client's staging (`MessagePart.with(mimeType:data:staging:)`) are uploaded
    /// first, then kept on this device as the message's downloaded content; a rich part that is
    /// not staged must name content this user uploaded already.
    @discardableResult
    public func sendChannelMessage(_ parts: [MessagePart], to id: ChannelID) async throws(ClientError) -> MessageID {
        let message = MessageID.timeOrdered()
        var staged: [(MessagePart, ContentReference, URL)] = []
        for part in parts {
            guard case .external(let reference) = part.content, let file = staging.stagedFile(for: reference.id)
            else { continue }
            try await ChannelContentUpload.upload(reference, from: file, link: transfers.link, store: store)
            staged.append((part, reference, file))
        }
        // The sender holds the bytes: they become the part's content here before the message
        // can arrive (no download); a refused send puts them back into staging.
        var moved: [(ContentID, URL, URL)] = []
        for (part, reference, file) in staged {
            let destination = store.contentFileURL(for: MessagePartID(message: message, part: part.id))
            guard let taken = staging.take(reference.id) else { continue }
            do { try ContentStaging.move(taken, to: destination) } catch {
                staging.putBack(reference.id, taken)
                continue
            }
            moved.append((reference.id, file, destination))
        }
        do {
            try await sendChannelCommand(
                .sendChannelMessage(SendChannelMessage(messageID: message, channelID: id, parts: parts)))
        } catch {
            restoreStagedContent(moved)
            throw error
        }
        return message
    }

    /// Sends a text/plain message to channel `id`.
    @discardableResult
    public func sendChannelMessage(text: String, to id: ChannelID) async throws(ClientError) -> MessageID {
        let part: MessagePart
        do { part = try MessagePart(text: text) } catch { throw ClientError(error) }
        return try await sendChannelMessage([part], to: id)
    }

    /// The channels this device holds.
    public func channels() throws(ClientError) -> [StoredChannel] { try store.channels() }

    /// Channel `id`, when this device holds it.
    public func channel(_ id: ChannelID) throws(ClientError) -> StoredChannel? { try store.channel(id) }

    /// The messages this device holds of channel `id`, in log order.
    public func channelMessages(of id: ChannelID) throws(ClientError) -> [StoredChannelMessage] {
        try store.channelMessages(of: id)
    }

    private func sendChannelCommand(_ frame: Frame) async throws(ClientError) {
        guard let engine = currentEngine else { throw ClientError(.notConnected, "no sync session is running") }
        try await engine.sendChannelCommand(frame)
    }
}
