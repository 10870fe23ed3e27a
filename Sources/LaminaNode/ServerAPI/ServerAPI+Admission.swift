import Foundation
import LaminaModel
import LaminaTransport
import NIOCore

/// What the Server API decides from a request's headers alone, before any body byte is read
/// (the route's ``HTTPHeaderCheck``; `RESOURCES.md` §12): a repeated `Authorization` (400), a
/// missing or wrong token (401, or 429 from an address that presented too many).
extension ServerAPI {
    /// The parts of a request target the checks look at.
    struct Target {
        /// The path without its query.
        var bare: String
        /// Its segments after the leading `/` (`["apps", "<id>", …]`).
        var segments: [String]
        /// `PUT /apps/<id>/content/<uuid>`: an upload chunk.
        var isUpload: Bool
        /// `GET /apps/<id>/content/<uuid>/data`: a download.
        var isDownload: Bool

        init(_ request: HTTPRequest) {
            bare = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
            segments = bare.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
            isUpload =
                request.method == "PUT" && segments.count == 4 && segments[0] == "apps" && segments[2] == "content"
            isDownload =
                request.method == "GET" && segments.count == 5 && segments[0] == "apps" && segments[2] == "content"
                && segments[4] == "data"
        }
    }

    /// An upload to a signed `upload_url` needs no token and no Accept (Layer's upload URLs
    /// took bare PUTs); its signature names the content (CONTENT.md §10). So does a download
    /// from a signed `download_url`.
    func isSigned(_ request: HTTPRequest, _ target: Target) -> Bool {
        guard target.isUpload || target.isDownload, ContentURLSigner.isSigned(request.path),
            target.segments[1] == credentials.appID, let uuid = UUID(uuidString: target.segments[3]),
            let query = request.path.firstIndex(of: "?")
        else { return false }
        return content?.urls.verify(
            target.isUpload ? .upload : .download, ContentID(uuid: uuid),
            query: request.path[request.path.index(after: query)...],
            now: Timestamp.now().millisecondsSince1970 / 1000) ?? false
    }

    /// The index of the token the request presents, nil when it presents none or a wrong one.
    /// More than one `Authorization` header is refused (which one counts would be a guess).
    func validToken(_ request: HTTPRequest) throws(ServerAPIError) -> Int? {
        let presented = request.headers.values("authorization")
        guard presented.count <= 1 else {
            throw .invalidHeader(400, "Authorization", "more than one Authorization header")
        }
        guard let authorization = presented.first, authorization.hasPrefix("Bearer ") else { return nil }
        return credentials.match(String(authorization.dropFirst("Bearer ".count)))
    }

    /// The answer due from the headers alone, or nil to read the body and serve the request.
    /// Wrong tokens are counted per remote address: past ``ServerAPISettings/failedTokenBurst``
    /// (refilled at ``ServerAPISettings/failedTokensPerSecond``) they are answered 429 with
    /// `retry-after` instead of 401. A valid token is served whatever its address did: a
    /// misconfigured backend retrying an old token must not lock out the others behind its NAT.
    public func refusalBeforeBody(_ request: HTTPRequest) -> HTTPResponse? {
        let base = "\(origin.withLockedValue { $0 })/apps/\(credentials.appID)"
        let contentType =
            request.path.hasPrefix("/apps/\(credentials.appID)/webhooks")
            ? Self.webhooksContentType : ServerAPIJSON.contentType
        let target = Target(request)
        do {
            if request.headers.values("authorization").count > 1 {
                _ = try validToken(request)  // throws the 400
            }
            if isSigned(request, target) { return nil }
            if try validToken(request) == nil {
                if let wait = failedTokens.take([1], for: request.remoteAddress?.ipAddress ?? "unknown") {
                    throw ServerAPIError.rateLimitExceeded(Self.seconds(wait))
                }
                throw ServerAPIError.authenticationRequired(
                    "a valid `Authorization: Bearer <token>` header is required")
            }
            return nil
        } catch {
            return Self.apiError(error).response(base: base, contentType: contentType)
        }
    }

    /// Whole seconds (at least 1) of `wait`, for `retry-after`.
    static func seconds(_ wait: Duration) -> Int {
        max(1, Int((Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18).rounded(.up)))
    }
}
