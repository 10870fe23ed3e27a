import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire

/// The validated headers of an upload (`PUT /v1/content/<uuid>`, CONTENT.md §3).
public struct UploadRequestHeaders: Hashable, Sendable {
    public var size: UInt64
    public var sha256: [UInt8]
    public var offset: UInt64
    /// `content-length`, if the client sent one (at most size − offset).
    public var contentLength: UInt64?

    /// Validates the headers before any body byte is read: `invalid-argument` for a missing,
    /// malformed or out-of-range value, `part-too-large` for a size over 2^31.
    public init(_ headers: HeaderFields) throws(ContentFailure) {
        guard let sizeText = headers["lamina-content-size"] else {
            throw ContentFailure(.invalidArgument, "lamina-content-size is missing")
        }
        guard let size = ContentHeaderParsing.decimal(sizeText) else {
            throw ContentFailure(.invalidArgument, "lamina-content-size is not a decimal number")
        }
        guard size <= Limits.maxPartBytes else {
            throw ContentFailure(.partTooLarge, "content is at most \(Limits.maxPartBytes) bytes, declared \(size)")
        }
        guard let digestText = headers["lamina-content-sha256"] else {
            throw ContentFailure(.invalidArgument, "lamina-content-sha256 is missing")
        }
        guard let digest = ContentHeaderParsing.hex(digestText), digest.count == 32 else {
            throw ContentFailure(.invalidArgument, "lamina-content-sha256 is not 64 hex digits")
        }
        var offset: UInt64 = 0
        if let text = headers["lamina-upload-offset"] {
            guard let value = ContentHeaderParsing.decimal(text) else {
                throw ContentFailure(.invalidArgument, "lamina-upload-offset is not a decimal number")
            }
            guard value <= size else {
                throw ContentFailure(.invalidArgument, "lamina-upload-offset \(value) is past the size \(size)")
            }
            offset = value
        }
        var length: UInt64? = nil
        if let text = headers["content-length"] {
            guard let value = ContentHeaderParsing.decimal(text) else {
                throw ContentFailure(.invalidArgument, "content-length is not a decimal number")
            }
            guard value <= size - offset else {
                throw ContentFailure(
                    .uploadTooLong, "content-length \(value) runs past the declared size (\(size - offset) bytes left)")
            }
            length = value
        }
        self.size = size
        self.sha256 = digest
        self.offset = offset
        self.contentLength = length
    }
}

/// A single byte range of a download (`range: bytes=a-b | a- | -n`, RFC 9110 §14.1.2).
public enum ByteRangeRequest: Hashable, Sendable {
    /// No range (or one the node ignores, e.g. several ranges): the whole content.
    case whole
    /// Bytes `lower...upper` (inclusive) of the content.
    case range(lower: UInt64, upper: UInt64)
    /// No byte of the content is in the range: `416`.
    case unsatisfiable

    /// Resolves a `range` header value against a content of `size` bytes. A value that is not
    /// a byte range (another unit, several ranges, malformed) answers the whole content, as
    /// RFC 9110 lets a server ignore `range`.
    public init(header: String?, size: UInt64) {
        guard let header else {
            self = .whole
            return
        }
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes=") else {
            self = .whole
            return
        }
        let spec = trimmed.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else {
            self = .whole
            return
        }
        let first = String(spec[..<dash]).trimmingCharacters(in: .whitespaces)
        let last = String(spec[spec.index(after: dash)...]).trimmingCharacters(in: .whitespaces)
        if first.isEmpty {
            // Suffix: the last n bytes.
            guard let n = ContentHeaderParsing.decimal(last) else {
                self = .whole
                return
            }
            guard n > 0, size > 0 else {
                self = .unsatisfiable
                return
            }
            self = .range(lower: size - min(n, size), upper: size - 1)
            return
        }
        guard let a = ContentHeaderParsing.decimal(first) else {
            self = .whole
            return
        }
        var b = size == 0 ? 0 : size - 1
        if !last.isEmpty {
            guard let value = ContentHeaderParsing.decimal(last), value >= a else {
                self = .whole
                return
            }
            b = min(value, b)
        }
        guard a < size else {
            self = .unsatisfiable
            return
        }
        self = .range(lower: a, upper: b)
    }
}

enum ContentHeaderParsing {
    /// A non-negative decimal of at most 19 digits, nothing else.
    static func decimal(_ text: String) -> UInt64? {
        let utf8 = text.utf8
        guard !utf8.isEmpty, utf8.count <= 19, utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return UInt64(text)
    }

    /// Bytes from at most 128 hex digits (either case); nil otherwise.
    static func hex(_ text: String) -> [UInt8]? {
        text.utf8.count <= 128 ? Hex.decode(text) : nil
    }

    /// The content id of `/v1/content/<uuid>` (query ignored; either case).
    static func contentID(path: String, prefix: String = ContentEndpoint.pathPrefix) -> ContentID? {
        guard path.hasPrefix(prefix) else { return nil }
        var rest = path.dropFirst(prefix.count)
        if let q = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<q] }
        guard rest.utf8.count == 36, let uuid = UUID(uuidString: String(rest)) else { return nil }
        return ContentID(uuid: uuid)
    }
}

/// A refused content request: the code (SPEC §9) decides the HTTP status (CONTENT.md §2).
public struct ContentFailure: Error, Hashable, Sendable, CustomStringConvertible {
    public var code: WireError.Code
    public var reason: String
    /// Extra response headers (e.g. `lamina-upload-offset`, `retry-after`).
    public var headers: [String: String] = [:]

    public init(_ code: WireError.Code, _ reason: String, headers: [String: String] = [:]) {
        self.code = code
        self.reason = reason
        self.headers = headers
    }

    /// The HTTP status of the code (CONTENT.md §2).
    public var status: Int {
        switch code {
        case .invalidArgument, .uploadTooLong: 400
        case .authenticationRequired, .sessionExpired, .sessionRevoked: 401
        case .forbidden: 403
        case .contentNotFound: 404
        case .uploadOffsetMismatch, .uploadMismatch, .contentNotReady: 409
        case .uploadStalled: 408
        case .partTooLarge: 413
        case .contentDigestMismatch: 422
        case .overloaded: 429
        case .quotaExceeded: 507
        case .shuttingDown: 503
        default: 500
        }
    }

    public var description: String { "\(status) \(code.name): \(reason)" }

    /// Any error as a content failure: storage and other failures are `internal-error`.
    static func from(_ error: Error) -> ContentFailure {
        if let failure = error as? ContentFailure { return failure }
        if let wire = error as? WireError { return ContentFailure(wire.code, wire.reason) }
        if let storage = error as? StorageError {
            if storage.code == .closed { return ContentFailure(.shuttingDown, "the node is shutting down") }
            return ContentFailure(.internalError, "storage: \(storage.reason)")
        }
        return ContentFailure(.internalError, "\(error)")
    }
}
