import Foundation

/// A reference to rich content: a part too large to travel inline.
public struct ContentReference: Hashable, Sendable {
    public var id: ContentID
    /// The content's size in bytes, at most `Limits.maxPartBytes`.
    public var size: UInt64
    /// SHA-256 of the content: 32 bytes.
    public var sha256: [UInt8]

    public init(id: ContentID, size: UInt64, sha256: [UInt8]) {
        self.id = id
        self.size = size
        self.sha256 = sha256
    }
}

/// Where a part's bytes are: inline (2 KB or less) or as rich content.
public enum PartContent: Hashable, Sendable {
    case inline([UInt8])
    case external(ContentReference)
}

/// One piece of a message: a MIME type and its bytes.
public struct MessagePart: Hashable, Sendable {
    /// The part's own UUID; with its message's id it forms a `MessagePartID`.
    public var id: UUID
    public var mimeType: MIMEType
    public var content: PartContent

    public init(id: UUID = UUID(), mimeType: MIMEType, content: PartContent) {
        self.id = id
        self.mimeType = mimeType
        self.content = content
    }

    /// An inline part. Throws when the bytes exceed the inline limit (2 KB).
    public init(id: UUID = UUID(), mimeType: MIMEType, bytes: [UInt8]) throws(ModelError) {
        self.init(id: id, mimeType: mimeType, content: .inline(bytes))
        try validate()
    }

    /// A `text/plain` part with UTF-8 text.
    public init(id: UUID = UUID(), text: String) throws(ModelError) {
        try self.init(id: id, mimeType: .textPlain, bytes: Array(text.utf8))
    }

    /// The size of the part's content in bytes.
    public var size: UInt64 {
        switch content {
        case .inline(let bytes): UInt64(bytes.count)
        case .external(let ref): ref.size
        }
    }

    /// The inline bytes, if the part is inline.
    public var inlineBytes: [UInt8]? {
        if case .inline(let bytes) = content { return bytes }
        return nil
    }

    /// Whether a part of `size` bytes must travel as rich content rather than inline.
    public static func needsRichContent(size: UInt64) -> Bool { size > UInt64(Limits.maxInlinePartBytes) }

    /// Checks the size limits.
    public func validate() throws(ModelError) {
        switch content {
        case .inline(let bytes):
            guard bytes.count <= Limits.maxInlinePartBytes else {
                throw ModelError(
                    .inlineTooLarge,
                    "an inline part is at most \(Limits.maxInlinePartBytes) bytes, this one has \(bytes.count); send it as rich content"
                )
            }
        case .external(let ref):
            guard ref.size <= Limits.maxPartBytes else {
                throw ModelError(
                    .partTooLarge, "a part is at most \(Limits.maxPartBytes) bytes, this one has \(ref.size)")
            }
            guard ref.sha256.count == 32 else {
                throw ModelError(
                    .invalidContentReference,
                    "a content reference carries a 32-byte SHA-256, this one has \(ref.sha256.count) bytes")
            }
        }
    }
}
