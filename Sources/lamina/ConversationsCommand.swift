import ArgumentParser
import LaminaCLI

/// `lamina conversations`: the user's conversations after a sync.
struct ConversationsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conversations",
        abstract: "Sync, then list your conversations: id, participants, last message, unread count.")

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "The most conversations to list (1...\(ConversationList.maxListed)).")
    var limit = 50

    func run() async throws {
        try await reportingErrors {
            try await connection.withSession { session in
                let format = MessageFormat(localUser: session.client.user)
                let entries = try ConversationList.load(session.client, limit: limit)
                if entries.isEmpty {
                    Console.err(
                        "\(session.client.user) has no conversations yet; start one: lamina send --user \(session.client.user) --to bob \"hi\""
                    )
                }
                for (index, entry) in entries.enumerated() {
                    Console.out(format.listing(entry, number: index + 1))
                }
            }
        }
    }
}
