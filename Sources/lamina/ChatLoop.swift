import Foundation
import LaminaCLI
import LaminaClient
import LaminaModel

/// The chat's event loop: typed lines, committed change batches and session notices,
/// handled one at a time, in arrival order, on one task.
struct ChatLoop {
    enum Event: Sendable {
        case line(String?)
        case changes([ObjectChange])
        case notice(SessionNotice)
        case interrupted
    }

    /// The most history lines shown when a conversation opens.
    static let maxHistory = 1_000

    let session: ClientSession
    let client: LaminaClient
    let format: MessageFormat
    let history: Int
    let drainTimeout: Duration
    private var tracker = StatusTracker()
    /// The open conversation (its current id: distinct merges are followed).
    private var open: ConversationID?
    /// The conversations of the last list, by number - 1.
    private var listed: [ConversationID] = []

    init(session: ClientSession, history: Int, drainTimeout: Duration) {
        self.session = session
        self.client = session.client
        self.format = MessageFormat(localUser: session.client.user)
        self.history = history
        self.drainTimeout = drainTimeout
    }

    mutating func run(lines: AsyncStream<String?>, interrupts: AsyncStream<Int32>, openWith: Set<UserID>?) async throws
    {
        let changes = client.changes()
        let (events, event) = AsyncStream<Event>.makeStream()
        let pumps = [
            Task { for await line in lines { event.yield(.line(line)) } },
            Task { for await batch in changes { event.yield(.changes(batch)) } },
            Task { [notices = session.notices] in for await notice in notices { event.yield(.notice(notice)) } },
            Task { for await _ in interrupts { event.yield(.interrupted) } },
        ]
        defer { pumps.forEach { $0.cancel() } }

        Console.out(
            "lamina chat: \(client.user) on \(session.settings.nodeURL.absoluteString), in sync. /help lists the commands."
        )
        if let openWith {
            try openConversation(with: openWith)
        } else {
            try showList()
        }
        loop: for await next in events {
            switch next {
            case .line(nil), .interrupted:
                break loop
            case .line(let text?):
                do {
                    if try handle(ChatInput.parse(text)) == .quit { break loop }
                } catch let error as CLIError {
                    Console.out("  ! \(error.reason)")
                }
            case .changes(let batch):
                try show(batch)
            case .notice(let notice):
                Console.out(notice.text)
                if case .stopped(let error) = notice { throw error }
            }
        }
        try await leave()
    }

    // MARK: input

    private mutating func handle(_ input: ChatInput) throws -> ChatInput {
        switch input {
        case .empty, .quit:
            break
        case .help:
            Console.out(ChatInput.helpText)
        case .list:
            try showList()
        case .open(let number):
            if listed.isEmpty { try loadList() }
            guard number <= listed.count else {
                throw CLIError(
                    .invalidArgument,
                    listed.isEmpty
                        ? "there are no conversations to open: start one with /new NAME[,NAME…]"
                        : "there is no conversation \(number): /list shows 1...\(listed.count)")
            }
            try openConversation(listed[number - 1])
        case .new(let users):
            try openConversation(with: users)
        case .message(let text):
            try send(text)
        }
        return input
    }

    private mutating func send(_ text: String) throws {
        guard let open else {
            throw CLIError(.invalidArgument, "no conversation is open: /open N (from /list) or /new NAME[,NAME…]")
        }
        do {
            let stored = try client.send(client.newMessage(parts: [MessagePart.with(text: text)]), in: open)
            tracker.track(stored.message)
            Console.out(format.line(stored.message, participants: try participants(of: open)))
        } catch let error as ClientError {
            throw CLIError(error)
        }
    }

    // MARK: conversations

    /// A user name for examples that is not the local user.
    private var example: String { client.user.rawValue == "bob" ? "alice" : "bob" }

    private mutating func loadList() throws {
        listed = try ConversationList.load(client, limit: ConversationList.maxListed).map(\.conversation.id)
    }

    private mutating func showList() throws {
        let entries = try ConversationList.load(client, limit: ConversationList.maxListed)
        listed = entries.map(\.conversation.id)
        if entries.isEmpty {
            Console.out(
                "No conversations yet. Start one with /new NAME[,NAME…] (e.g. /new \(example)), or wait for a message.")
            return
        }
        Console.out("Your conversations (/open N to open one, /new NAME[,NAME…] to start one):")
        for (index, entry) in entries.enumerated() {
            let marker = entry.conversation.id == open ? "*" : " "
            Console.out("\(marker)\(index + 1). \(format.summary(entry.conversation, lastMessage: entry.lastMessage))")
        }
    }

    private mutating func openConversation(with users: Set<UserID>) throws {
        do {
            let stored = try client.newConversation(participants: users)
            try openConversation(stored.id)
        } catch let error as ClientError {
            throw CLIError(error)
        }
    }

    private mutating func openConversation(_ id: ConversationID) throws {
        do {
            let current = try client.store.currentIdentifier(of: id)
            guard let stored = try client.conversation(current) else {
                throw CLIError(.notFound, "the conversation is gone (deleted): /list shows the ones left")
            }
            open = current
            let participants = stored.conversation.participants
            Console.out("── conversation with \(format.others(participants)) ──")
            let messages = try client.messages(in: current)
            if messages.isEmpty {
                Console.out(
                    stored.isSynced ? "  (no messages yet)" : "  (new: it reaches the others with your first message)")
            } else if messages.count > history {
                Console.out("  (\(messages.count - history) earlier messages not shown)")
            }
            for stored in messages.suffix(history) {
                if stored.message.sender == client.user { tracker.track(stored.message) }
                Console.out(format.line(stored.message, participants: participants))
            }
            if stored.totalNumberOfUnreadMessages > 0 { try client.markAllMessagesAsRead(in: current) }
        } catch let error as ClientError {
            throw CLIError(error)
        }
    }

    private func participants(of id: ConversationID) throws -> Set<UserID> {
        do { return try client.conversation(id)?.conversation.participants ?? [client.user] } catch {
            throw CLIError(error)
        }
    }

    // MARK: changes

    /// Prints what a committed batch changed: new messages (the open conversation's in
    /// full, others as a one-line notice) and status lines for own messages.
    private mutating func show(_ batch: [ObjectChange]) throws {
        do {
            if let open {
                let current = try client.store.currentIdentifier(of: open)
                if current != open {
                    self.open = current
                    Console.out(
                        "  (the node merged this conversation with the existing one of the same people; same chat)")
                }
            }
            var seen = Set<MessageID>()
            for change in batch {
                guard case .message(let changed) = change.object, change.type != .delete,
                    seen.insert(changed.id).inserted
                else { continue }
                guard let stored = try client.message(changed.id) else { continue }
                let message = stored.message
                let conversation = try client.store.currentIdentifier(of: message.conversationID)
                if tracker.isTracked(message.id) {
                    for update in tracker.updates(for: message) {
                        Console.out(format.statusLine(update, of: message))
                    }
                } else if change.type == .create {
                    try showNew(stored, in: conversation)
                }
            }
        } catch let error as ClientError {
            throw CLIError(error)
        }
    }

    private mutating func showNew(_ stored: StoredMessage, in conversation: ConversationID) throws {
        let message = stored.message
        let participants = try participants(of: conversation)
        if message.sender != client.user, let open, conversation != open, try replaces(open, with: conversation) {
            // Both sides opened the distinct conversation of the same people; the other's
            // reached the node first. This side's copy was never sent: continue in theirs.
            do { try client.delete(open, mode: .myDevices) } catch { throw CLIError(error) }
            self.open = conversation
            Console.out(
                "  (\(Sanitizer.clip(message.sender.rawValue, 64)) started this conversation first; continuing in it)")
        }
        if conversation == open {
            if message.sender == client.user { tracker.track(message) }  // sent from another device
            Console.out(format.line(message, participants: participants))
            if stored.isUnread { try client.markAsRead(message.id) }
        } else if message.sender != client.user {
            // A conversation not in the last list gets the next number (the others keep theirs).
            if !listed.contains(conversation) { listed.append(conversation) }
            let number = "/open \(listed.firstIndex(of: conversation)! + 1)"
            Console.out(
                "  (new message from \(Sanitizer.clip(message.sender.rawValue, 64)) in the conversation with \(format.others(participants)): \"\(Sanitizer.clip(format.text(of: message), 40))\" — \(number))"
            )
        }
    }

    /// Whether the open conversation is an empty, never-sent distinct conversation of the
    /// same people as `other`, a distinct conversation from the node.
    private func replaces(_ open: ConversationID, with other: ConversationID) throws -> Bool {
        do {
            guard let mine = try client.conversation(open), let theirs = try client.conversation(other) else {
                return false
            }
            return !mine.isSynced && mine.totalMessageCount == 0 && mine.conversation.isDistinct
                && theirs.isSynced && theirs.conversation.isDistinct
                && mine.conversation.participants == theirs.conversation.participants
        } catch {
            throw CLIError(error)
        }
    }

    // MARK: leaving

    /// Waits (up to `drainTimeout`) for queued messages and receipts to reach the node.
    private func leave() async throws {
        let queued = (try? client.store.outboxEntries().count) ?? 0
        if queued > 0 {
            Console.out("  (sending \(queued) queued item\(queued == 1 ? "" : "s") before leaving…)")
            let left = try await session.waitForOutbox(timeout: drainTimeout)
            if left > 0 {
                Console.out("  (\(left) still queued: they go out the next time \(client.user) connects)")
            }
        }
        Console.out("bye")
    }
}
