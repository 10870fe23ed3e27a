import LaminaTransport
import NIOConcurrencyHelpers

extension ClientAPI {
    /// The answer due before a request's body is read (the router's awaited header check, run
    /// for requests that announce a body): for a route that needs a session, 406 for a bad
    /// `Accept` and 401 (with a fresh nonce) for a missing, unknown, expired or revoked session
    /// token; nil to read the body (and then check again, in ``handle(_:)``, as for any request).
    /// A route that is unknown, or needs no session, goes on: ``handle(_:)`` answers it. An
    /// upload to a content's `upload_url` whose signature does not hold is refused (403) here.
    public func refusalBeforeBody(_ request: HTTPRequest) async -> HTTPResponse? {
        if let refusal = uploadRefusalBeforeBody(request) { return refusal }
        let bare = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        let segments = bare.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        guard
            let entry = Self.served.first(where: {
                $0.0.method == request.method && ServerAPI.match($0.0.template, segments) != nil
            }), entry.1
        else { return nil }
        do {
            try Self.checkAccept(request.headers["accept"])
            _ = try await authenticate(request)
            return nil
        } catch {
            return Self.answeredAsJSON(Self.apiError(error).response(base: origin.withLockedValue { $0 }))
        }
    }
}
