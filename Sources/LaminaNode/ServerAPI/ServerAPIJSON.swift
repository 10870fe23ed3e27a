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

    /// An ISO 8601 date-time in UTC with milliseconds, as Layer writes them
    /// (`2026-11-26T07:40:03.123Z`). Written by hand: a formatter per call cost more than the
    /// rest of a webhook event inside its commit, and a shared one is not thread-safe.
    static func date(millisecondsSince1970 ms: Int64) -> String {
        let (days, inDay) = ms.quotientAndRemainder(dividingBy: 86_400_000)
        let (day, millisecond) = inDay < 0 ? (days - 1, inDay + 86_400_000) : (days, inDay)
        // Days since 1970-01-01 to a civil date (proleptic Gregorian; Howard Hinnant's algorithm).
        let z = day + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let d = dayOfYear - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yearOfEra + era * 400 + (m <= 2 ? 1 : 0)
        func pad(_ value: Int64, _ width: Int) -> String {
            let digits = String(value)
            return digits.count < width ? String(repeating: "0", count: width - digits.count) + digits : digits
        }
        let seconds = millisecond / 1_000
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(seconds / 3_600, 2)):\(pad(seconds / 60 % 60, 2)):\(pad(seconds % 60, 2))"
            + ".\(pad(millisecond % 1_000, 3))Z"
    }
}
