import ArgumentParser
import LaminaCLI
import LaminaClient
import LaminaModel

/// `lamina tail`: incoming messages as they arrive, until Ctrl-C.
struct TailCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tail",
        abstract: "Print incoming messages as they arrive (from the SDK's change stream) until Ctrl-C.",
        discussion:
            "Unread messages that reach this device during the first sync (sent while you were away) are printed too.")

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "Only this conversation (an id from `lamina conversations`).")
    var conversation: String?

    @Flag(help: "Mark each printed message read (otherwise nothing is marked read).")
    var markRead = false

    func run() async throws {
        try await reportingErrors {
            let filter = try conversation.map { text throws(CLIError) in try ConversationReference.parse(text) }
            let session = try ClientSession(settings: connection.settings())
            let client = session.client
            let tail = TailPrinter(client: client, filter: filter, markRead: markRead)
            let changes = client.changes()  // before connecting: the first sync's messages are seen
            let (events, event) = AsyncStream<TailPrinter.Event>.makeStream()
            let pumps = [
                Task {
                    for await batch in changes { event.yield(.changes(batch)) }
                    event.yield(.ended)
                },
                Task { for await notice in session.notices { event.yield(.notice(notice)) } },
            ]
            defer { pumps.forEach { $0.cancel() } }
            do {
                try await session.connect(timeout: connection.connectTimeoutDuration, trace: connection.trace)
                if let filter { _ = try ConversationReference.find(filter, in: client) }
            } catch {
                await session.close()
                throw error
            }
            // Ctrl-C ends the process at once while connecting; from here on, cleanly.
            let interrupts = Interrupts.stream()
            let watcher = Task { for await _ in interrupts { event.yield(.interrupted) } }
            defer { watcher.cancel() }
            Console.err(
                "tailing \(client.user)'s incoming messages\(filter.map { " in \($0)" } ?? "") — Ctrl-C to stop")
            var failure: CLIError?
            loop: for await next in events {
                switch next {
                case .changes(let batch):
                    do throws(CLIError) { try tail.show(batch) } catch {
                        failure = error
                        break loop
                    }
                case .notice(let notice):
                    if case .stopped(let error) = notice {
                        failure = error
                        break loop
                    }
                    Console.err(notice.text)
                case .interrupted, .ended:
                    break loop
                }
            }
            if markRead { _ = try? await session.waitForOutbox(timeout: .seconds(5)) }
            await session.close()
            if let failure { throw failure }
        }
    }
}

/// Prints the messages of a change batch that came from others (and marks them read
/// when asked).
struct TailPrinter {
    enum Event: Sendable {
        case changes([ObjectChange])
        case notice(SessionNotice)
        case interrupted
        case ended
    }

    let client: LaminaClient
    let filter: ConversationID?
    let markRead: Bool

    func show(_ batch: [ObjectChange]) throws(CLIError) {
        let format = MessageFormat(localUser: client.user)
        for change in batch {
            guard change.type == .create, case .message(let created) = change.object, created.sender != client.user
            else { continue }
            do {
                // Unread only: a fresh store's first sync brings the whole history.
                guard let stored = try client.message(created.id), stored.isUnread else { continue }
                let conversationID = try client.store.currentIdentifier(of: stored.message.conversationID)
                if let filter, try client.store.currentIdentifier(of: filter) != conversationID { continue }
                let participants =
                    try client.conversation(conversationID)?.conversation.participants ?? [
                        stored.message.sender, client.user,
                    ]
                Console.out(
                    "(\(format.others(participants))) \(format.line(stored.message, participants: participants))")
                if markRead { try client.markAsRead(stored.id) }
            } catch {
                throw CLIError(error)
            }
        }
    }
}
