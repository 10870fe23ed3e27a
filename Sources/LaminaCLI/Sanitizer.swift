/// Makes text from the network safe to print on a terminal: control characters (escape
/// sequences, carriage returns, bells) become visible, and long text is clipped.
public enum Sanitizer {
    /// `text` with every control character but tab replaced by `�`, newlines by `⏎`.
    public static func printable(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\t": out.append(scalar)
            case "\n": out.append("⏎")
            default:
                // Cc controls, and the bidirectional overrides that reorder what follows.
                let control =
                    scalar.properties.generalCategory == .control
                    || (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
                out.append(control ? "\u{FFFD}" : scalar)
            }
        }
        return String(out)
    }

    /// `text` made printable and cut to `maxCharacters` (with `…`).
    public static func clip(_ text: String, _ maxCharacters: Int) -> String {
        let safe = printable(text)
        guard safe.count > maxCharacters else { return safe }
        return String(safe.prefix(max(0, maxCharacters - 1))) + "…"
    }
}
