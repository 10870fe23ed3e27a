/// The words of a full-text search of messages, as both the device's index and the node's take
/// them: the text split at whitespace, control characters, punctuation and symbols (as the
/// indexes' tokenizers split what they index); every word must occur in a
/// message's text parts, the last one as a prefix (so results follow typing). Declared once here
/// so that a search finds the same messages on the device and on the node.
public struct MessageSearchTerms: Hashable, Sendable {
    /// The longest search text, in UTF-8 bytes.
    public static let maxTextBytes = 256
    /// The most words one search takes.
    public static let maxWords = 16
    /// The most results one page returns.
    public static let maxLimit = 200
    /// The most results a search pages through (offset + limit): deeper pages are refused, so
    /// that one search's ranking work stays bounded.
    public static let maxDepth = 1_000

    /// The words, in the order typed (at least one, at most `maxWords`).
    public let words: [String]

    /// Splits `text` into words. Throws `invalid-search` for a text over `maxTextBytes`, with no
    /// word or with more than `maxWords`.
    public init(_ text: String) throws(ModelError) {
        guard text.utf8.count <= Self.maxTextBytes else {
            throw ModelError(
                .invalidSearch, "a search text has at most \(Self.maxTextBytes) bytes, this one \(text.utf8.count)")
        }
        let words = text.split(whereSeparator: Self.separates)
        guard !words.isEmpty else { throw ModelError(.invalidSearch, "a search needs at least one word") }
        guard words.count <= Self.maxWords else {
            throw ModelError(.invalidSearch, "a search takes at most \(Self.maxWords) words, this one \(words.count)")
        }
        self.words = words.map(String.init)
    }

    /// Whether `c` separates words. Control characters do: a NUL inside a quoted FTS5 word ends
    /// the query text early (a syntax error), and no index holds them in a word.
    static func separates(_ c: Character) -> Bool {
        c.isWhitespace || c.isPunctuation || c.isSymbol
            || c.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    /// Checks a page of results: `limit` 1 to `maxLimit`, `offset` at least 0, and the page
    /// within the first `maxDepth` results.
    public static func validatePage(limit: Int, offset: Int) throws(ModelError) {
        guard (1...maxLimit).contains(limit), offset >= 0 else {
            throw ModelError(.invalidSearch, "a search's limit is 1 to \(maxLimit) and its offset at least 0")
        }
        guard offset + limit <= maxDepth else {
            throw ModelError(.invalidSearch, "a search pages through its first \(maxDepth) results at most")
        }
    }

    /// The words as an SQLite FTS5 query: each quoted (the user's text is never read as query
    /// syntax), all required, the last one a prefix.
    public var fts5Expression: String {
        let quoted = words.map { "\"" + $0.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
        return quoted.dropLast().map { $0 + " " }.joined() + quoted.last! + "*"
    }

    /// The words as a PostgreSQL `tsquery` (for `to_tsquery('simple', …)`): each a quoted
    /// lexeme, all required (`&`), the last one a prefix (`:*`).
    public var tsqueryExpression: String {
        let quoted = words.map { word -> String in
            let escaped = word.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "''")
            return "'" + escaped + "'"
        }
        return quoted.dropLast().map { $0 + " & " }.joined() + quoted.last! + ":*"
    }
}
