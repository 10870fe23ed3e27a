/// A codec property that did not hold for some input: what the fuzz targets trap on and
/// what the replay test reports.
public struct PropertyViolation: Error, CustomStringConvertible {
    /// Which property failed, e.g. `round-trip`.
    public var property: String
    /// What was observed.
    public var detail: String
    /// The input, in hex (at most the first 256 bytes).
    public var inputHex: String

    public init(property: String, detail: String, input: [UInt8]) {
        self.property = property
        self.detail = detail
        self.inputHex = input.prefix(256).map { byte in
            let digits = String(byte, radix: 16)
            return byte < 16 ? "0" + digits : digits
        }.joined()
    }

    public var description: String { "\(property) property violated: \(detail) (input: \(inputHex))" }
}
