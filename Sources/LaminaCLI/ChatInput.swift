import Foundation
import LaminaModel

/// One line typed into `lamina chat`.
public enum ChatInput: Hashable, Sendable {
    /// Text to send to the open conversation.
    case message(String)
    /// `/list`: the numbered list of conversations.
    case list
    /// `/open N`: open conversation N of the last list (1-based).
    case open(Int)
    /// `/new bob,carol`: open the distinct conversation with these users (made if new).
    case new(Set<UserID>)
    /// `/help`.
    case help
    /// `/quit` (or `/exit`).
    case quit
    /// An empty line: nothing to do.
    case empty

    /// The longest line accepted, in UTF-8 bytes (a text part is inline, at most 2 KiB).
    public static let maxLineBytes = Limits.maxInlinePartBytes

    /// Reads one line. `//text` sends `/text`. Unknown commands and bad arguments are
    /// errors whose reason says what to type instead.
    public static func parse(_ line: String) throws(CLIError) -> ChatInput {
        let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.isEmpty { return .empty }
        if trimmed.hasPrefix("//") { return try text(String(trimmed.dropFirst())) }
        guard trimmed.hasPrefix("/") else { return try text(trimmed) }
        let words = trimmed.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        let command = words[0].lowercased()
        let argument = words.count > 1 ? String(words[1]).trimmingCharacters(in: .whitespaces) : ""
        switch command {
        case "/list", "/ls":
            return .list
        case "/help", "/?":
            return .help
        case "/quit", "/exit", "/q":
            return .quit
        case "/open", "/o":
            guard let n = Int(argument), n >= 1 else {
                throw CLIError(.invalidArgument, "/open takes a number from /list, e.g. /open 1")
            }
            return .open(n)
        case "/new", "/n":
            guard !argument.isEmpty else {
                throw CLIError(.invalidArgument, "/new takes users, e.g. /new bob or /new bob,carol")
            }
            return .new(try UserList.users(argument))
        default:
            throw CLIError(
                .invalidArgument,
                "unknown command \(Sanitizer.clip(command, 32)): /help lists the commands (start with // to send a line beginning with /)"
            )
        }
    }

    private static func text(_ text: String) throws(CLIError) -> ChatInput {
        guard text.utf8.count <= maxLineBytes else {
            throw CLIError(
                .invalidArgument,
                "a message line is at most \(maxLineBytes) bytes (UTF-8), this one has \(text.utf8.count)")
        }
        return .message(text)
    }

    /// The `/help` text.
    public static let helpText = """
        Type a line and press Enter to send it to the open conversation.
          /list            numbered list of your conversations
          /open N          open conversation N of the list (shows recent messages)
          /new bob,carol   open (or start) the conversation with these users
          /help            this text
          /quit            leave (Ctrl-D too); queued messages are sent first
        Marks on your messages: · queued  ✓ sent  ✓✓ delivered  ✓✓ read (status lines follow as receipts arrive)
        """
}
