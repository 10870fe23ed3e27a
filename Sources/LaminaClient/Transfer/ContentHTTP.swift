import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire

/// The requests and answers of the node's content API (Protocol/CONTENT.md), as pure
/// functions: header lists to send, and the meaning of what came back.
enum ContentHTTP {
    /// `/v1/content/<uuid>` (CONTENT.md §1: lowercase 8-4-4-4-12).
    static func path(_ id: ContentID) -> String { "/v1/content/\(id.uuid.uuidString.lowercased())" }

    static func authorization(_ token: String) -> (String, String) { ("authorization", "Bearer \(token)") }

    /// PUT headers (§3): size, digest and the offset of the body's first byte. No
    /// `content-length`: a paused upload ends its body early, which HTTP/2 would refuse as
    /// malformed against a declared length (RFC 9113 §8.1.1).
    static func putHeaders(_ reference: ContentReference, offset: UInt64, token: String) -> HeaderFields {
        var headers = HeaderFields([
            authorization(token),
            ("lamina-content-size", String(reference.size)),
            ("lamina-content-sha256", Hex.encode(reference.sha256)),
        ])
        if offset > 0 { headers.append("lamina-upload-offset", String(offset)) }
        return headers
    }

    /// GET headers (§5): a range from `offset` when resuming.
    static func getHeaders(from offset: UInt64, token: String) -> HeaderFields {
        var headers = HeaderFields([authorization(token)])
        if offset > 0 { headers.append("range", "bytes=\(offset)-") }
        return headers
    }

    /// A decimal header value as an unsigned number (no sign, no spaces, at most 20 digits).
    static func number(_ value: String?) -> UInt64? {
        guard let value, !value.isEmpty, value.utf8.count <= 20, value.utf8.allSatisfy({ (48...57).contains($0) })
        else { return nil }
        return UInt64(value)
    }

    /// The first byte of a `content-range: bytes a-b/size` answer, with the total size.
    static func contentRange(_ value: String?) -> (start: UInt64, end: UInt64, size: UInt64)? {
        guard let value, value.hasPrefix("bytes ") else { return nil }
        let rest = value.dropFirst("bytes ".count)
        let halves = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        let bounds = halves[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let a = number(String(bounds[0])), let b = number(String(bounds[1])),
            let size = number(String(halves[1])), a <= b, b < size
        else { return nil }
        return (a, b, size)
    }
}

/// A content request the node refused: the HTTP status and the JSON error of CONTENT.md §2.
struct ContentHTTPError: Error, Hashable, Sendable, CustomStringConvertible {
    var status: Int
    /// The SPEC §9 value (0 when the answer had none, e.g. 405 or 416).
    var code: UInt16
    var name: String
    var reason: String
    /// What the node holds, when the answer said (`lamina-upload-offset`).
    var heldOffset: UInt64?
    /// `retry-after`, in seconds, when the answer said.
    var retryAfterSeconds: UInt64?

    var description: String { "HTTP \(status) \(name.isEmpty ? "" : "\(name) (\(code))"): \(reason)" }

    /// Parses an error answer; a body that is not the JSON of §2 keeps the status alone.
    init(status: Int, headers: HeaderFields, body: [UInt8]) {
        self.status = status
        var code: UInt16 = 0
        var name = headers["lamina-error"] ?? ""
        var reason = "the node answered \(status)"
        if let object = try? JSONDecoder().decode(Body.self, from: Data(body)) {
            if let c = object.code, let v = UInt16(exactly: c) { code = v }
            if let n = object.name, n.utf8.count <= 64 { name = n }
            if let r = object.reason { reason = String(r.prefix(1_000)) }
        }
        self.code = code
        self.name = name
        self.reason = reason
        self.heldOffset = ContentHTTP.number(headers["lamina-upload-offset"])
        self.retryAfterSeconds = ContentHTTP.number(headers["retry-after"])
    }

    /// The JSON error of CONTENT.md §2, each field read on its own: a malformed one is left
    /// out and the others are kept.
    private struct Body: Decodable {
        var code: Int?
        var name: String?
        var reason: String?

        private enum Keys: CodingKey { case code, name, reason }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            code = try? c.decodeIfPresent(Int.self, forKey: .code)
            name = try? c.decodeIfPresent(String.self, forKey: .name)
            reason = try? c.decodeIfPresent(String.self, forKey: .reason)
        }
    }

    init(status: Int, code: UInt16, name: String, reason: String) {
        self.status = status
        self.code = code
        self.name = name
        self.reason = reason
    }

    /// 401: the session token is missing, expired or revoked (§1): authenticate again.
    var isUnauthorized: Bool { status == 401 }
    /// Worth retrying as is, later: 429, 500, 503, and 409 content-not-ready with `retry-after`
    /// (the node is still fetching a peer's content, CONTENT.md §9).
    var isTransient: Bool {
        status == 429 || status == 500 || status == 503
            || (status == 409 && (code == 600 || name == "content-not-ready") && retryAfterSeconds != nil)
    }

    /// How an upload goes on after this answer (§3).
    enum UploadOutcome: Equatable {
        /// Continue from the node's offset (409 upload-offset-mismatch, 408 upload-stalled).
        case resume
        /// The whole content did not hash to the digest: the node deleted it (422).
        case digestMismatch
        /// Authenticate again, then retry.
        case reauthenticate
        /// Retry later (after `retry-after` when given).
        case retryLater
        /// Nothing will make it succeed: fail the message.
        case fail
    }

    var uploadOutcome: UploadOutcome {
        switch status {
        case 401: .reauthenticate
        case 409 where code == 603 || name == "upload-offset-mismatch": .resume
        case 408 where code == 606 || name == "upload-stalled": .resume
        case 422: .digestMismatch
        case 429, 500, 503: .retryLater
        default: .fail
        }
    }
}
