import Foundation
import LaminaTransport

/// `X-HTTP-Method-Override`: a client that cannot send PATCH (or PUT, DELETE) sends POST with
/// the method it means in this header, as Layer's Platform API allowed.
extension ServerAPI {
    /// The methods a POST may stand for.
    static let overridableMethods: Set<String> = ["PATCH", "PUT", "DELETE"]

    /// `request` with the method its override names; unchanged without the header. The
    /// header on another method than POST, or naming another method, is 400 `invalid_header`.
    static func applyingMethodOverride(_ request: HTTPRequest) throws(ServerAPIError) -> HTTPRequest {
        guard let raw = request.headers["x-http-method-override"] else { return request }
        let method = raw.trimmingCharacters(in: .whitespaces).uppercased()
        guard request.method == "POST" else {
            throw .invalidHeader(400, "X-HTTP-Method-Override", "X-HTTP-Method-Override goes with POST only")
        }
        guard overridableMethods.contains(method) else {
            throw .invalidHeader(
                400, "X-HTTP-Method-Override",
                "X-HTTP-Method-Override names PATCH, PUT or DELETE, not \(raw.prefix(40))")
        }
        var overridden = request
        overridden.method = method
        return overridden
    }
}
