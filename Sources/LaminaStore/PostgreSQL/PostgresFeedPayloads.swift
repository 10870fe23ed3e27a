import Foundation
import LaminaModel

/// One change event a command appended to one or more feeds, as other nodes get it in the
/// group's `lamina_feed` notification: its CHANGE frame encoding (seq 0), encoded once, and
/// the (user, seq) entries that hold it.
package struct AnnouncedFeedEvent: Sendable, Equatable {
    /// The event's CHANGE frame with seq 0 (the node's `FeedCoding.encode`).
    package var encoded: [UInt8]
    /// The feed entries holding it, real seqs.
    package var entries: [Entry]

    package struct Entry: Sendable, Equatable {
        package var user: UserID
        package var seq: UInt64
        package init(user: UserID, seq: UInt64) {
            self.user = user
            self.seq = seq
        }
    }

    package init(encoded: [UInt8], entries: [Entry]) {
        self.encoded = encoded
        self.entries = entries
    }
}

/// A command result whose feed entries can travel in the group's notification, so the other
/// nodes deliver them to their sessions without reading the feeds (POSTGRES.md, "Cross-node
/// delivery from the notification"). Asked on the writer's thread just before COMMIT, after
/// the provisional seqs were resolved.
package protocol AnnouncesFeedEntries: Sendable {
    /// The result's feed entries with their encoded events, in append order.
    func announcedFeedEvents() -> [AnnouncedFeedEvent]
}

/// What one `lamina_feed` notification carries, decoded.
package struct FeedNotification: Sendable, Equatable {
    /// When the sending writer built it (microseconds since 1970), if it says.
    package var sentAtMicroseconds: Int64?
    /// Encoded events (CHANGE frames, seq 0), referred to by `entries`.
    package var events: [[UInt8]] = []
    /// Entries to deliver from `events`, in the order sent (per user, ascending seq).
    package var entries: [Entry] = []
    /// Feeds to read up to a head (entries that did not fit, or results that hold none).
    /// Applied after `entries`.
    package var heads: [Head] = []

    package struct Entry: Sendable, Equatable {
        package var user: UserID
        package var seq: UInt64
        /// Index into `events`.
        package var event: Int
    }

    package struct Head: Sendable, Equatable {
        package var user: UserID
        package var head: UInt64
    }

    package init() {}

    /// The highest seq per user this notification names (entries and heads alike).
    package var highest: [(UserID, UInt64)] {
        var out: [UserID: UInt64] = [:]
        for entry in entries { out[entry.user] = max(out[entry.user] ?? 0, entry.seq) }
        for head in heads { out[head.user] = max(out[head.user] ?? 0, head.head) }
        return out.sorted { $0.key < $1.key }
    }
}

/// The `lamina_feed` payload format:
///
/// ```
/// <origin>
/// @<microseconds since 1970 when the writer announced it>
/// =<base64 of an encoded event>      (events are numbered 0, 1, … in the payload)
/// +<seq> <event number> <user>       (an entry delivered from that event)
/// <head> <user>                      (a feed to read up to head)
/// ```
///
/// A group's events go in at most `maxEntryPayloads` payloads (each under
/// `NotificationChannel.maxPayloadBytes`); an event too big for one payload, the events past
/// that budget, and entries no result reported fall back to a head line: the receiving node
/// reads those feeds, as it did for every entry before.
enum FeedPayloads {
    /// Payloads carrying events per group at most; beyond, head lines only (a big group's
    /// notification stays a few statements' worth for the database).
    static let maxEntryPayloads = 2

    /// The payloads for a group that advanced `heads` and reported `events`.
    static func payloads(
        origin: String, heads: [UserID: Int64], events: [AnnouncedFeedEvent], now: Int64,
        maxPayloadBytes: Int = NotificationChannel.maxPayloadBytes, maxEntryPayloads: Int = maxEntryPayloads
    ) -> [String] {
        let header = "\(origin)\n@\(now)"
        var out: [String] = []
        var current = header
        var index = 0
        var delivered: [UserID: UInt64] = [:]
        var full = false
        for event in events where !full {
            guard !event.entries.isEmpty else { continue }
            let encoded = Data(event.encoded).base64EncodedString()
            func block(_ number: Int) -> String {
                var text = "\n=\(encoded)"
                for entry in event.entries { text += "\n+\(entry.seq) \(number) \(entry.user.rawValue)" }
                return text
            }
            var text = block(index)
            if current.utf8.count + text.utf8.count > maxPayloadBytes {
                // Too big for what is left of this payload: a fresh one, if it fits there.
                text = block(0)
                guard header.utf8.count + text.utf8.count <= maxPayloadBytes else { continue }
                guard out.count + 1 < maxEntryPayloads else {
                    full = true
                    continue
                }
                out.append(current)
                current = header
                index = 0
                text = block(0)
            }
            current += text
            index += 1
            for entry in event.entries { delivered[entry.user] = max(delivered[entry.user] ?? 0, entry.seq) }
        }
        // Heads the entries do not reach: read there.
        for (user, head) in heads.sorted(by: { $0.key < $1.key }) where head > 0 {
            guard UInt64(head) > delivered[user] ?? 0 else { continue }
            let line = "\n\(head) \(user.rawValue)"
            if current.utf8.count + line.utf8.count > maxPayloadBytes {
                out.append(current)
                current = header
            }
            current += line
        }
        if current.utf8.count > header.utf8.count { out.append(current) }
        return out
    }

    /// The origin and contents of a payload; nil when it is not one. A line it does not
    /// understand is skipped; an entry naming an event the payload lacks becomes a head line.
    static func decode(_ payload: String) -> (origin: Substring, notification: FeedNotification)? {
        var lines = payload.split(separator: "\n", omittingEmptySubsequences: false)[...]
        guard let origin = lines.popFirst() else { return nil }
        var notification = FeedNotification()
        for line in lines {
            switch line.first {
            case "@":
                notification.sentAtMicroseconds = Int64(line.dropFirst())
            case "=":
                notification.events.append(Data(base64Encoded: String(line.dropFirst())).map { [UInt8]($0) } ?? [])
            case "+":
                let words = line.dropFirst().split(separator: " ", maxSplits: 2)
                guard words.count == 3, let seq = UInt64(words[0]), let event = Int(words[1]),
                    let user = try? UserID(String(words[2]))
                else { continue }
                if notification.events.indices.contains(event), !notification.events[event].isEmpty {
                    notification.entries.append(.init(user: user, seq: seq, event: event))
                } else {
                    notification.heads.append(.init(user: user, head: seq))
                }
            default:
                guard let space = line.firstIndex(of: " "), let head = UInt64(line[..<space]),
                    let user = try? UserID(String(line[line.index(after: space)...]))
                else { continue }
                notification.heads.append(.init(user: user, head: head))
            }
        }
        return (origin, notification)
    }
}
