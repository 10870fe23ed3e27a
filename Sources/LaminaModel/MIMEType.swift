/// A MIME type of the form `type/subtype`: exactly one `/`, no white space or control
/// characters, neither side empty, at most 255 UTF-8 bytes.
public struct MIMEType: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String

    public static let textPlain: MIMEType = "text/plain"

    /// Validates and wraps a MIME type.
    public init(_ rawValue: String) throws(ModelError) {
        let bytes = rawValue.utf8.count
        guard bytes <= Limits.maxMIMETypeBytes else {
            throw ModelError(
                .invalidMIMEType, "a MIME type is at most \(Limits.maxMIMETypeBytes) UTF-8 bytes, this one has \(bytes)"
            )
        }
        var slashes = 0
        var typeLength = 0
        var subtypeLength = 0
        for scalar in rawValue.unicodeScalars {
            if scalar == "/" {
                slashes += 1
            } else if scalar.value < 0x80
                // ASCII: controls and space, without a property lookup
                ? (scalar.value <= 0x20 || scalar.value == 0x7F)
                : (scalar.properties.isWhitespace || scalar.properties.generalCategory == .control)
            {
                throw ModelError(
                    .invalidMIMEType, "'\(rawValue.prefix(80))' contains white space or a control character")
            } else if slashes == 0 {
                typeLength += 1
            } else {
                subtypeLength += 1
            }
        }
        guard slashes == 1, typeLength > 0, subtypeLength > 0 else {
            throw ModelError(.invalidMIMEType, "'\(rawValue.prefix(80))' is not of the form type/subtype")
        }
        self.rawValue = rawValue
    }

    /// For literals in code and tests; traps on an invalid literal.
    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("invalid MIMEType literal: \(error)") }
    }

    public var description: String { rawValue }
}
