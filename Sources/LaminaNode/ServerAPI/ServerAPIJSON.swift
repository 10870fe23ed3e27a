import Foundation
import LaminaTransport
import NIOCore

/// JSON in and out of the Server API (Foundation's serialization, keys sorted).
enum ServerAPIJSON {
    /// The media type of every JSON response.
    static let contentType = "application/vnd.layer+json; charset=utf-8"

    static func response(_ status: Int, _ object: Any, contentType: String = contentType, extraHeaders: [(String, String)] = []) -> HTTPResponse {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return HTTPResponse(status: status, headers: [("content-type", contentType)] + extraHeaders, body: ByteBuffer(bytes: data))
    }

    /// The request body as a JSON object; `invalid_request` when it is not one.
    static func object(_ body: ByteBuffer) throws(ServerAPIError) -> [String: Any] {
        guard body.readableBytes > 0 else { throw .invalidRequest("the request needs a JSON body") }
        guard let value = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView), options: []) else {
            throw .invalidRequest("the body is not valid JSON")
        }
        guard let object = value as? [String: Any] else { throw .invalidRequest("the body is not a JSON object") }
        return object
    }

    /// The request body as a JSON array (PATCH operations).
    static func array(_ body: ByteBuffer) throws(ServerAPIError) -> [Any] {
        guard body.readableBytes > 0 else { throw .invalidRequest("the request needs a JSON body") }
        guard let value = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView), options: []) else {
            throw .invalidRequest("the body is not valid JSON")
        }
        guard let array = value as? [Any] else { throw .invalidRequest("the body is not a JSON array of operations") }
        return array
    }

    /// An ISO 8601 date-time in UTC, as Layer writes them.
    static func date(millisecondsSince1970 ms: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(ms) / 1000))
    }
}
