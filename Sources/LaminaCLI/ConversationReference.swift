import Foundation
import LaminaClient
import LaminaModel

/// Reads a conversation named on the command line: `lamina:///conversations/<uuid>` or the
/// bare UUID, and finds it in the local store (following distinct merges).
public enum ConversationReference {
    public static func parse(_ text: String) throws(CLIError) -> ConversationID {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let uuid = UUID(uuidString: trimmed) { return ConversationID(uuid: uuid) }
        do { return try ConversationID(parsing: trimmed) } catch {
            throw CLIError(
                .invalidArgument,
                "'\(Sanitizer.clip(trimmed, 80))' is not a conversation id (lamina:///conversations/<uuid>, as `lamina conversations` prints)"
            )
        }
    }

    /// The stored conversation, or `.notFound` with a hint.
    public static func find(_ id: ConversationID, in client: LaminaClient) throws(CLIError) -> StoredConversation {
        do {
            let current = try client.store.currentIdentifier(of: id)
            if let stored = try client.conversation(current) { return stored }
        } catch {
            throw CLIError(error)
        }
        throw CLIError(
            .notFound,
            "\(client.user) has no conversation \(id): `lamina conversations --user \(client.user)` lists them")
    }
}
