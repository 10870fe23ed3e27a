/// A metadata value: a string, or a dictionary of further values.
public indirect enum MetadataValue: Hashable, Sendable {
    case string(String)
    case dictionary([String: MetadataValue])
}

/// A key path into metadata, written with dots: `"style.colors.background"`.
/// 1 to 8 components, each 1 to 128 UTF-8 bytes with no `.`.
public struct MetadataKeyPath: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let components: [String]

    public init(_ components: [String]) throws(ModelError) {
        guard !components.isEmpty else { throw ModelError(.invalidMetadata, "a key path must not be empty") }
        guard components.count <= Limits.maxMetadataDepth else {
            throw ModelError(
                .invalidMetadata,
                "a key path has at most \(Limits.maxMetadataDepth) components, this one has \(components.count)")
        }
        for key in components { try Metadata.checkKey(key) }
        self.components = components
    }

    /// Parses the dotted form.
    public init(parsing dotted: String) throws(ModelError) {
        try self.init(dotted.split(separator: ".", omittingEmptySubsequences: false).map(String.init))
    }

    public var description: String { components.joined(separator: ".") }

    public static func < (lhs: MetadataKeyPath, rhs: MetadataKeyPath) -> Bool {
        lhs.components.lexicographicallyPrecedes(rhs.components) { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }
}

/// A conversation's metadata: nested dictionaries of strings, set or deleted by key path.
public struct Metadata: Hashable, Sendable, ExpressibleByDictionaryLiteral {
    public var values: [String: MetadataValue]

    public init(_ values: [String: MetadataValue] = [:]) { self.values = values }
    public init(dictionaryLiteral elements: (String, MetadataValue)...) {
        self.values = Dictionary(elements, uniquingKeysWith: { _, last in last })
    }

    public var isEmpty: Bool { values.isEmpty }

    /// The value at a key path, if any.
    public subscript(path: MetadataKeyPath) -> MetadataValue? {
        var current = values
        for (i, key) in path.components.enumerated() {
            guard let value = current[key] else { return nil }
            if i == path.components.count - 1 { return value }
            guard case .dictionary(let next) = value else { return nil }
            current = next
        }
        return nil
    }

    /// Sets the value at a key path, creating (or replacing with) dictionaries along the way.
    public mutating func set(_ value: MetadataValue, at path: MetadataKeyPath) {
        Self.set(value, at: path.components[...], in: &values)
    }

    /// Removes the value at a key path; dictionaries left empty stay.
    public mutating func remove(at path: MetadataKeyPath) {
        Self.remove(at: path.components[...], in: &values)
    }

    /// Every string leaf with its key path, in key-path order.
    public var leaves: [(MetadataKeyPath, String)] {
        var out: [(MetadataKeyPath, String)] = []
        Self.collect(values, prefix: [], into: &out)
        return out.sorted { $0.0 < $1.0 }
    }

    /// Checks depth, key and value lengths and total size against `Limits`.
    public func validate() throws(ModelError) {
        var total = 0
        try Self.check(values, depth: 1, total: &total)
    }

    static func checkKey(_ key: String) throws(ModelError) {
        guard !key.isEmpty, !key.contains(".") else {
            throw ModelError(.invalidMetadata, "a metadata key must be non-empty and contain no '.'")
        }
        guard key.utf8.count <= Limits.maxMetadataKeyBytes else {
            throw ModelError(.invalidMetadata, "a metadata key is at most \(Limits.maxMetadataKeyBytes) UTF-8 bytes")
        }
    }

    private static func check(_ dict: [String: MetadataValue], depth: Int, total: inout Int) throws(ModelError) {
        guard depth <= Limits.maxMetadataDepth else {
            throw ModelError(.invalidMetadata, "metadata nests at most \(Limits.maxMetadataDepth) levels deep")
        }
        for (key, value) in dict {
            try checkKey(key)
            total += key.utf8.count
            switch value {
            case .string(let s):
                guard s.utf8.count <= Limits.maxMetadataValueBytes else {
                    throw ModelError(
                        .invalidMetadata, "a metadata value is at most \(Limits.maxMetadataValueBytes) UTF-8 bytes")
                }
                total += s.utf8.count
            case .dictionary(let d):
                try check(d, depth: depth + 1, total: &total)
            }
            guard total <= Limits.maxMetadataTotalBytes else {
                throw ModelError(
                    .invalidMetadata,
                    "metadata is at most \(Limits.maxMetadataTotalBytes) UTF-8 bytes of keys and values in all")
            }
        }
    }

    private static func set(_ value: MetadataValue, at path: ArraySlice<String>, in dict: inout [String: MetadataValue])
    {
        let key = path.first!
        if path.count == 1 {
            dict[key] = value
            return
        }
        var child: [String: MetadataValue] = [:]
        if case .dictionary(let existing)? = dict[key] { child = existing }
        dict[key] = nil  // keep the child uniquely referenced while it changes
        set(value, at: path.dropFirst(), in: &child)
        dict[key] = .dictionary(child)
    }

    private static func remove(at path: ArraySlice<String>, in dict: inout [String: MetadataValue]) {
        let key = path.first!
        if path.count == 1 {
            dict[key] = nil
            return
        }
        guard case .dictionary(var child)? = dict[key] else { return }
        dict[key] = nil
        remove(at: path.dropFirst(), in: &child)
        dict[key] = .dictionary(child)
    }

    private static func collect(
        _ dict: [String: MetadataValue], prefix: [String], into out: inout [(MetadataKeyPath, String)]
    ) {
        for (key, value) in dict {
            let path = prefix + [key]
            switch value {
            case .string(let s): if let p = try? MetadataKeyPath(path) { out.append((p, s)) }
            case .dictionary(let d): collect(d, prefix: path, into: &out)
            }
        }
    }
}
