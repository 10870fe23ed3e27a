/// An ordered list of HTTP/2 header fields (pseudo-headers such as `:path` included).
/// Names are stored lower-cased, as HTTP/2 requires.
public struct HeaderFields: Sendable, Hashable, Sequence, ExpressibleByArrayLiteral, CustomStringConvertible {
    public struct Field: Sendable, Hashable {
        public var name: String
        public var value: String
    }

    public private(set) var fields: [Field] = []

    public init() {}

    public init(_ pairs: [(String, String)]) {
        fields.reserveCapacity(pairs.count)
        for (name, value) in pairs { append(name, value) }
    }

    public init(arrayLiteral elements: (String, String)...) { self.init(elements) }

    /// Appends a field; the name is lower-cased.
    public mutating func append(_ name: String, _ value: String) {
        let isLower = name.utf8.allSatisfy { !($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")) }
        fields.append(Field(name: isLower ? name : name.lowercased(), value: value))
    }

    mutating func reserveCapacity(_ count: Int) { fields.reserveCapacity(count) }

    /// Appends a field whose name is known to be lower-case already.
    mutating func appendValidated(_ name: String, _ value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// The first value for `name` (case-insensitive), or nil.
    public subscript(_ name: String) -> String? {
        if let field = fields.first(where: { $0.name == name }) { return field.value }
        let lower = name.lowercased()
        return lower == name ? nil : fields.first(where: { $0.name == lower })?.value
    }

    /// All values for `name`.
    public func values(_ name: String) -> [String] {
        let lower = name.lowercased()
        return fields.filter { $0.name == lower }.map(\.value)
    }

    public var count: Int { fields.count }
    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    public var description: String { fields.map { "\($0.name): \($0.value)" }.joined(separator: "\n") }

    /// Size as HTTP/2 counts it for SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2).
    var listSize: Int { fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 32 } }
}
