import LaminaModel
import LaminaStore
import LaminaWire

/// A command's feed changes travel in its group's `lamina_feed` notification (PostgreSQL, several
/// nodes): the other nodes deliver them to their caught-up sessions without reading the feeds
/// (`SharedStoreFanOut`). Each event is encoded once for the run of entries that hold it (a
/// message to every participant); an event that does not encode is left out (its feeds are then
/// read, from the head the notification also names).
extension CommandResult: AnnouncesFeedEntries {
    func announcedFeedEvents() -> [AnnouncedFeedEvent] {
        guard case .applied(_, let changes) = self, !changes.isEmpty else { return [] }
        var out: [AnnouncedFeedEvent] = []
        var previous: ChangeEvent?
        for change in changes {
            let entry = AnnouncedFeedEvent.Entry(user: change.user, seq: change.seq)
            if let previous, previous == change.event, !out.isEmpty {
                out[out.count - 1].entries.append(entry)
                continue
            }
            previous = nil
            let encoded: [UInt8]
            do {
                encoded = try FeedCoding.encode(change.change)
            } catch {
                continue
            }
            previous = change.event
            out.append(AnnouncedFeedEvent(encoded: encoded, entries: [entry]))
        }
        return out
    }
}
