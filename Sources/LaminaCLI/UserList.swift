import Foundation
import LaminaModel

/// Parses user ids from the command line.
public enum UserList {
    /// The most users one `--to`, `--with` or `/new` names.
    public static let maxUsers = Limits.maxParticipants

    /// One user id, validated (1 to 256 UTF-8 bytes, no control characters).
    public static func user(_ text: String) throws(CLIError) -> UserID {
        do { return try UserID(text) } catch {
            throw CLIError(.invalidUserID, "'\(Sanitizer.clip(text, 64))' is not a user id: \(error.reason)")
        }
    }

    /// A comma-separated list (`bob,carol`); blanks around names are ignored, duplicates
    /// collapse. At least one user, at most `maxUsers`.
    public static func users(_ text: String) throws(CLIError) -> Set<UserID> {
        let names = text.split(separator: ",", omittingEmptySubsequences: true)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        guard !names.isEmpty else { throw CLIError(.invalidUserID, "name at least one user (e.g. bob or bob,carol)") }
        guard names.count <= maxUsers else {
            throw CLIError(.invalidArgument, "name at most \(maxUsers) users, not \(names.count)")
        }
        var users = Set<UserID>()
        for name in names { users.insert(try user(name)) }
        return users
    }
}
