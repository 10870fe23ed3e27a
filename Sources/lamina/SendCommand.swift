import ArgumentParser
import LaminaCLI
import LaminaClient
import LaminaModel

/// `lamina send`: one message (text, a file, or both), sent and acknowledged by the node.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send a message (text and/or a file) and wait until the node has it; prints the message id.",
        discussion:
            "With --to, the message goes to the distinct conversation of you and those users (created if new). A file over 2 KiB is uploaded as rich content first (up to 2 GiB)."
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "The recipients, comma-separated (e.g. bob or bob,carol).")
    var to: String?

    @Option(help: "A conversation id from `lamina conversations` (instead of --to).")
    var conversation: String?

    @Option(help: "Seconds to wait for the node to accept the message.")
    var timeout = 20

    @Option(help: "A file to send as a part of the message (rich content when over 2 KiB).")
    var file: String?

    @Option(help: "The file's MIME type (default: from its extension, else application/octet-stream).")
    var mime: String?

    @Argument(help: "The text (several words are joined by spaces).")
    var text: [String] = []

    func validate() throws {
        guard !text.isEmpty || file != nil else { throw ValidationError("give the message text, a --file, or both") }
        guard mime == nil || file != nil else { throw ValidationError("--mime describes a --file") }
        guard (to == nil) != (conversation == nil) else {
            throw ValidationError(
                "name the recipients with --to bob[,carol] or a conversation with --conversation ID (one of them)")
        }
        guard (1...3_600).contains(timeout) else { throw ValidationError("--timeout is 1...3600 seconds") }
    }

    func run() async throws {
        try await reportingErrors {
            let body = text.joined(separator: " ")
            guard !body.isEmpty || file != nil else { throw CLIError(.invalidArgument, "the message text is empty") }
            let recipients = try to.map { text throws(CLIError) in try UserList.users(text) }
            let named = try conversation.map { text throws(CLIError) in try ConversationReference.parse(text) }
            // Checked before connecting: bad input fails at once (a file is staged by the client).
            var parts: [MessagePart] = []
            do throws(ClientError) {
                if !body.isEmpty { parts.append(try MessagePart.with(text: body)) }
                if let file { try FilePart.check(path: file) }
            } catch { throw CLIError(error) }
            try await connection.withSession { session in
                let client = session.client
                var parts = parts
                if let file {
                    do throws(ClientError) {
                        parts.append(try FilePart.part(path: file, mimeType: mime, staging: client.staging))
                    } catch { throw CLIError(error) }
                }
                let target: StoredConversation
                do {
                    if let named {
                        target = try ConversationReference.find(named, in: client)
                    } else {
                        target = try client.newConversation(participants: recipients ?? [])
                    }
                    let draft = try client.newMessage(parts: parts)
                    try client.send(draft, in: target.id)
                    let conversationID = target.id
                    let outcome = try await Waiting.until(client, timeout: .seconds(timeout)) {
                        () throws(ClientError) -> Bool in
                        if try client.isSent(draft.id) { return true }
                        if try client.sendFailure(of: draft.id) != nil { return true }
                        return try client.store.failure(for: conversationID.uuid) != nil
                    }
                    if let failure = try client.sendFailure(of: draft.id)
                        ?? client.store.failure(for: conversationID.uuid)
                    {
                        throw CLIError(
                            .sendFailed, "the node refused the message: \(failure.reason) (code \(failure.code))")
                    }
                    guard outcome else {
                        throw CLIError(
                            .timedOut,
                            "the node did not accept the message within \(timeout) s; it stays queued and goes out the next time \(client.user) connects"
                        )
                    }
                    let current = try client.store.currentIdentifier(of: conversationID)
                    Console.err(
                        "sent to \(MessageFormat(localUser: client.user).others(target.conversation.participants)) in \(current)"
                    )
                    Console.out(draft.id.description)
                } catch let error as ClientError {
                    throw CLIError(error)
                }
            }
        }
    }
}
