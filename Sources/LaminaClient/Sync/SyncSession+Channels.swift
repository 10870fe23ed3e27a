import Foundation
import LaminaModel
import LaminaWire

/// One FETCH_CHANNEL in flight.
struct ChannelFetch: Sendable {
    var channel: ChannelID
    var after: UInt64
}

/// Channels (SPEC §6.8): the commands, and reading each channel's log by the device's cursor.
/// A device fetches a channel's log after its cursor when the session goes live, when it
/// learns of the channel (it joined), and when a live message shows a gap; it fetches again
/// after each answer that moved the cursor, until an answer brings nothing new.
extension SyncSession {
    /// The most messages one FETCH_CHANNEL asks for.
    static let channelPage: UInt32 = 1_000

    /// Sends a channel command (CREATE_CHANNEL … DELETE_CHANNEL) and returns once the node
    /// answered it. Only while live, with the channels feature.
    public func sendChannelCommand(_ frame: Frame) async throws(ClientError) {
        guard state == .live else { throw ClientError(.notConnected, "the session is not live") }
        guard features.contains(.channels) else {
            throw ClientError(.notAllowed, "the node does not offer channels (feature bit 11)")
        }
        guard let id = frame.commandID else { throw ClientError(.invalidArgument, "\(frame.type.name) has no id") }
        try await sendAwaited(frame, id: id)
    }

    /// Every channel the user is a member of is read after its cursor (the session went live).
    func fetchChannelsBehind() async throws {
        guard features.contains(.channels) else { return }
        for stored in try await store.channelsAsync() where stored.isMember {
            try await fetchChannel(stored.channel.id, after: stored.cursor)
        }
    }

    /// After changes were applied: channels joined are read from their cursor, and a channel
    /// whose live message lies past its cursor + 1 is read to fill the gap.
    func fetchChannels(after entries: [Change]) async throws {
        guard features.contains(.channels) else { return }
        var toRead = Set<ChannelID>()
        for entry in entries {
            switch entry.event {
            case .channelCreated(let c): toRead.insert(c.id)
            case .channelMessage(let m): toRead.insert(m.channelID)
            default: break
            }
        }
        for id in toRead.sorted() {
            guard let stored = try await store.channelAsync(id), stored.isMember else { continue }
            let newest = entries.compactMap { e -> UInt64? in
                if case .channelMessage(let m) = e.event, m.channelID == id { m.logSeq } else { nil }
            }.max()
            // A live message right after the cursor moved it: nothing is missing.
            if let newest, newest <= stored.cursor { continue }
            try await fetchChannel(id, after: stored.cursor)
        }
    }

    /// Sends FETCH_CHANNEL for `id` after `after`, unless one for that channel is in flight.
    func fetchChannel(_ id: ChannelID, after: UInt64) async throws {
        guard !channelFetches.values.contains(where: { $0.channel == id }) else { return }
        let request = UUID()
        channelFetches[request] = ChannelFetch(channel: id, after: after)
        try await channel.send(
            .fetchChannel(FetchChannel(requestID: request, channelID: id, after: after, count: Self.channelPage)))
    }

    /// The answer to a FETCH_CHANNEL arrived (its messages were applied before it): read on
    /// while it moved the cursor.
    func channelFetchAnswered(_ request: UUID, cursor: UInt64?) async throws {
        guard let fetch = channelFetches.removeValue(forKey: request) else { return }
        guard let cursor, cursor > fetch.after else { return }
        // The answer's messages are held without a gap from `after` on: the next page starts
        // at the stored cursor (no progress: stop, the next live message or session retries).
        guard let stored = try await store.channelAsync(fetch.channel), stored.isMember, stored.cursor > fetch.after
        else { return }
        try await fetchChannel(fetch.channel, after: stored.cursor)
    }
}
