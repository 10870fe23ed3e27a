import Foundation
import LaminaModel
import LaminaTransport

/// Signed, expiring content URLs: what the Server API hands a backend so it can upload
/// (`PUT /apps/<app>/content/<uuid>`) or download (`GET /v1/content/<uuid>`) without a
/// device session, as Layer's Platform API handed out `upload_url` and `download_url`.
/// The query is `expires=<unix seconds>&signature=<hex>`, the signature an HMAC-SHA1 of
/// `<method> <content uuid> <expires>` under the store's key (node setting
/// ``ContentURLSigner/keySetting``, made at random by the first node to start on the store),
/// so a URL stays good across restarts and on every node sharing the store, until it expires.
public struct ContentURLSigner: Sendable {
    /// The node setting that holds the key.
    public static let keySetting = "content-url-key"
    /// The key's length in bytes.
    public static let keyBytes = 32
    private let key: [UInt8]

    /// A signer with a fresh random key (until the store's is loaded).
    public init() {
        self.init(key: Self.newKey())
    }

    /// A signer with `key` (the store's).
    public init(key: [UInt8]) {
        self.key = key
    }

    /// A fresh random key.
    public static func newKey() -> [UInt8] {
        (try? SecureRandom.bytes(keyBytes)) ?? (0..<keyBytes).map { _ in UInt8.random(in: 0...255) }
    }

    /// What a URL is for.
    public enum Purpose: String, Sendable {
        case upload = "PUT"
        case download = "GET"
    }

    private func signature(_ purpose: Purpose, _ id: ContentID, expires: Int64) -> String {
        let message = "\(purpose.rawValue) \(id.uuid.uuidString.lowercased()) \(expires)"
        return (try? HMACSHA1.hex(key: key, message: Array(message.utf8))) ?? ""
    }

    /// The query (without `?`) of a URL for `purpose` on `id`, good until `expires` (unix seconds).
    public func query(_ purpose: Purpose, _ id: ContentID, expires: Int64) -> String {
        "expires=\(expires)&signature=\(signature(purpose, id, expires: expires))"
    }

    /// Whether `query` (the part of a path after `?`) signs `purpose` on `id` and has not
    /// expired at `now` (unix seconds). The signature is compared in constant time.
    public func verify(_ purpose: Purpose, _ id: ContentID, query: Substring, now: Int64) -> Bool {
        var expires: Int64?
        var presented: String?
        for pair in query.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard kv.count == 2 else { continue }
            if kv[0] == "expires" { expires = Int64(kv[1]) }
            if kv[0] == "signature" { presented = String(kv[1]) }
        }
        guard let expires, let presented, expires > now else { return false }
        let expected = Array(signature(purpose, id, expires: expires).utf8)
        let given = Array(presented.lowercased().utf8)
        guard expected.count == given.count, !expected.isEmpty else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(expected, given) { difference |= a ^ b }
        return difference == 0
    }

    /// Whether a request path carries a signature query at all (`…?expires=…&signature=…`).
    public static func isSigned(_ path: String) -> Bool {
        guard let q = path.firstIndex(of: "?") else { return false }
        let query = path[path.index(after: q)...]
        return query.contains("signature=") && query.contains("expires=")
    }
}
