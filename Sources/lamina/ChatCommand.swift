import ArgumentParser
import LaminaCLI
import LaminaModel

/// `lamina chat`: an interactive, line-based terminal chat.
struct ChatCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chat",
        abstract:
            "Chat in the terminal: pick or start a conversation, type lines to send, see messages and receipts live.",
        discussion: """
            Commands: /list, /open N, /new bob[,carol], /help, /quit (or Ctrl-D).
            Your messages show · queued, ✓ sent, ✓✓ delivered, ✓✓ read; a status line follows each receipt.
            Messages arriving in the open conversation are marked read. Reads standard input line by
            line, so it also works with a pipe (it leaves at the end of input once queued messages are sent).
            """)

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "Open the conversation with these users at once (comma-separated; started if new).")
    var with: String?

    @Option(help: "Messages of history shown when a conversation opens.")
    var history = 20

    @Option(help: "Seconds to wait on leaving for queued messages and receipts to reach the node.")
    var drainTimeout = 10

    func validate() throws {
        guard (0...ChatLoop.maxHistory).contains(history) else {
            throw ValidationError("--history is 0...\(ChatLoop.maxHistory)")
        }
        guard (0...600).contains(drainTimeout) else { throw ValidationError("--drain-timeout is 0...600 seconds") }
    }

    func run() async throws {
        try await reportingErrors {
            let with = try self.with.map { text throws(CLIError) in try UserList.users(text) }
            let lines = LineReader.lines()  // typed-ahead lines wait while connecting
            try await connection.withSession { session in
                // Ctrl-C ends the process at once while connecting; from here on, cleanly.
                let interrupts = Interrupts.stream()
                var loop = ChatLoop(session: session, history: history, drainTimeout: .seconds(drainTimeout))
                try await loop.run(lines: lines, interrupts: interrupts, openWith: with)
            }
        }
    }
}
