import Foundation
import LaminaTransport
import NIOCore

/// JSON in and out of the Server API and webhooks: `Codable` types through `JSONEncoder` and
/// `JSONDecoder` (keys sorted, slashes not escaped, as Layer's clients and our tests expect).
///
/// Why hand-written `Codable` and not swift-openapi-generator: the API's shapes are few and
/// stable, several are open (PATCH operations, metadata of nested strings, webhook `config`)
/// and Layer's errors name the exact property that is wrong (`parts[2].mime_type`), which a
/// generated decoder's `DecodingError` does not give; the generator would also add a build
/// plugin and runtime packages to the node for what is a handful of types.
enum ServerAPIJSON {
    /// The media type of every JSON response.
    static let contentType = "application/vnd.layer+json; charset=utf-8"

    /// `value` as JSON: keys sorted, slashes as they are (escaped as `\/` with
    /// `escapingSlashes`, as a webhook's stored `config` has always been written).
    static func encode(_ value: some Encodable, escapingSlashes: Bool = false) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = escapingSlashes ? [.sortedKeys] : [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }

    static func response(
        _ status: Int, _ value: some Encodable, contentType: String = contentType, extraHeaders: [(String, String)] = []
    ) -> HTTPResponse {
        let data = (try? encode(value)) ?? Data("{}".utf8)
        return HTTPResponse(
            status: status, headers: [("content-type", contentType)] + extraHeaders, body: ByteBuffer(bytes: data))
    }

    /// Any JSON text as a value (nil when it is not JSON).
    static func value(_ data: Data) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: data)
    }

    /// The request body, parsed: an object or an array (a bare scalar is not a body).
    private static func body(_ body: ByteBuffer) throws(ServerAPIError) -> JSONValue {
        guard body.readableBytes > 0 else { throw .invalidRequest("the request needs a JSON body") }
        guard let value = value(Data(body.readableBytesView)), value.object != nil || value.array != nil else {
            throw .invalidRequest("the body is not valid JSON")
        }
        return value
    }

    /// The request body as a JSON object; `invalid_request` when it is not one.
    static func object(_ body: ByteBuffer) throws(ServerAPIError) -> [String: JSONValue] {
        guard let object = try Self.body(body).object else { throw .invalidRequest("the body is not a JSON object") }
        return object
    }

    /// The request body as a JSON array (PATCH operations).
    static func array(_ body: ByteBuffer) throws(ServerAPIError) -> [JSONValue] {
        guard let array = try Self.body(body).array else {
            throw .invalidRequest("the body is not a JSON array of operations")
        }
        return array
    }

    /// Layer's date-time: ISO 8601 in UTC with milliseconds (`2026-11-26T07:40:03.123Z`).
    private static let dateStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    static func date(millisecondsSince1970 ms: Int64) -> String {
        // Whole seconds and milliseconds apart: a Double of ms / 1000 may fall just below
        // the millisecond and be written one lower.
        let (seconds, milliseconds) = ms.quotientAndRemainder(dividingBy: 1_000)
        let (s, m) = milliseconds < 0 ? (seconds - 1, milliseconds + 1_000) : (seconds, milliseconds)
        return Date(timeIntervalSince1970: Double(s) + (Double(m) + 0.5) / 1_000).formatted(dateStyle)
    }
}
