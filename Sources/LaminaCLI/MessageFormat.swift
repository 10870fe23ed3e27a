import Foundation
import LaminaClient
import LaminaModel

/// How messages and conversations read on a terminal, one line each.
public struct MessageFormat: Sendable {
    /// The local user (shown as the sender of own messages).
    public var localUser: UserID
    public var timeZone: TimeZone
    /// The most characters of message text on one line.
    public var maxTextCharacters: Int

    public init(localUser: UserID, timeZone: TimeZone = .current, maxTextCharacters: Int = 2_000) {
        self.localUser = localUser
        self.timeZone = timeZone
        self.maxTextCharacters = maxTextCharacters
    }

    /// The text of a message: its text/plain parts joined by spaces; other parts as
    /// `[mime/type, N bytes]`. Control characters are made visible.
    public func text(of message: Message) -> String {
        let pieces = message.parts.map { part -> String in
            if part.mimeType.description.lowercased().hasPrefix("text/plain"), let bytes = part.inlineBytes {
                return String(decoding: bytes, as: UTF8.self)
            }
            return "[\(part.mimeType), \(part.size) bytes]"
        }
        return Sanitizer.clip(pieces.joined(separator: " "), maxTextCharacters)
    }

    /// `HH:mm:ss` of a timestamp in `timeZone`.
    public func time(_ timestamp: Timestamp) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let c = calendar.dateComponents([.hour, .minute, .second], from: timestamp.date)
        return String(format: "%02d:%02d:%02d", c.hour ?? 0, c.minute ?? 0, c.second ?? 0)
    }

    /// A timeline line: `[12:03:04] bob: hi`; own messages end with their status mark.
    /// `now` stands in for the time of a message the node has not accepted yet.
    public func line(_ message: Message, participants: Set<UserID>, now: Timestamp = .now()) -> String {
        let who = sender(message)
        var line = "[\(time(message.sentAt ?? now))] \(who): \(text(of: message))"
        if message.sender == localUser {
            line += "  \(StatusMark(message: message, participants: participants))"
        }
        return line
    }

    /// Who sent `message`: the user id, or a system sender's name in brackets (`[Admin]`).
    public func sender(_ message: Message) -> String {
        if let name = message.sender.systemSenderName { return "[\(Sanitizer.clip(name, 64))]" }
        return Sanitizer.clip(message.sender.rawValue, 64)
    }

    /// A status line about an own message: `  [✓✓ read by bob] hello…`.
    public func statusLine(_ update: StatusUpdate, of message: Message) -> String {
        "  [\(update)] \(Sanitizer.clip(text(of: message), 40))"
    }

    /// The participants other than the local user, in name order: `bob, carol`
    /// (`just you` when there are none).
    public func others(_ participants: Set<UserID>) -> String {
        let names = participants.subtracting([localUser]).sorted().map { Sanitizer.clip($0.rawValue, 64) }
        return names.isEmpty ? "just you" : names.joined(separator: ", ")
    }

    /// A conversation in a list: who, the last message (sender, text, time), unread count.
    public func summary(_ conversation: StoredConversation, lastMessage: Message?) -> String {
        var line = "with \(others(conversation.conversation.participants))"
        if let last = lastMessage {
            let when = last.sentAt.map { " at \(time($0))" } ?? ""
            line += " — last: \(sender(last)): \"\(Sanitizer.clip(text(of: last), 60))\"\(when)"
        } else {
            line += " — no messages yet"
        }
        if conversation.totalNumberOfUnreadMessages > 0 {
            line += " — \(conversation.totalNumberOfUnreadMessages) unread"
        }
        return line
    }

    /// A conversation as `lamina conversations` lists it: its number and id, then the
    /// participants and unread count, then the last message.
    public func listing(_ entry: ConversationList.Entry, number: Int) -> String {
        let conversation = entry.conversation
        let participants = conversation.conversation.participants.sorted().map { Sanitizer.clip($0.rawValue, 64) }
        var lines = [
            "\(number). \(conversation.id)",
            "   participants: \(participants.joined(separator: ", "))   unread: \(conversation.totalNumberOfUnreadMessages)   messages: \(conversation.totalNumberOfMessages)",
        ]
        if let last = entry.lastMessage {
            lines.append("   last: \(line(last, participants: conversation.conversation.participants))")
        } else {
            lines.append("   last: (no messages yet)")
        }
        return lines.joined(separator: "\n")
    }
}
