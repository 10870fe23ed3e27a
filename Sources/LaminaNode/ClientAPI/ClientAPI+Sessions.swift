import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire

extension ClientAPI {
    /// POST /nonces: 201 `{"nonce"}`, single use, bound to the client's address; 429 when the
    /// address (or the node) holds as many open nonces as it may.
    func createNonce(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        switch sessions.issueNonce(for: r.http.remoteAddress) {
        case .success(let nonce): return ServerAPIJSON.response(201, ClientNonceObject(nonce: nonce))
        case .failure(let error):
            var e = ServerAPIError(429, "rate_limit_exceeded", 7, error.reason)
            let seconds = max(1, Int(engine.nonces.limits.refusalRetryAfterMilliseconds + 999) / 1000)
            e.headers = [("retry-after", "\(seconds)")]
            throw e
        }
    }

    /// POST /sessions `{"identity_token", "app_id"}`: 201 `{"session_token"}`. A token that
    /// fails (signature, provider, expiry, nonce) answers 401 with a fresh nonce and the
    /// reason's code in `data.reason`; a suspended user's, 403.
    func createSession(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let body = try r.object()
        guard let rawToken = body["identity_token"] else { throw ServerAPIError.missingProperty("identity_token") }
        guard let token = rawToken.string else {
            throw ServerAPIError.invalidProperty("identity_token", "identity_token must be a string")
        }
        guard let rawApp = body["app_id"] else { throw ServerAPIError.missingProperty("app_id") }
        guard let app = rawApp.string else {
            throw ServerAPIError.invalidProperty("app_id", "app_id must be a string")
        }
        // Layer's app ids were `layer:///apps/<env>/<uuid>`; the node's is the uuid.
        if let appID, app != appID, app.split(separator: "/").last.map(String.init) != appID {
            throw ServerAPIError.invalidAppID("no app \(app) on this node")
        }
        do {
            let (sessionToken, _) = try await sessions.createSession(
                identityToken: token, address: r.http.remoteAddress)
            return ServerAPIJSON.response(201, ClientSessionObject(session_token: sessionToken))
        } catch let error as WireError {
            switch error.code {
            case .overloaded, .shuttingDown, .internalError: throw error
            // A suspended user: no new identity token helps, so no nonce (403, not 401).
            case .forbidden: throw ServerAPIError.accessDenied(error.reason)
            default:
                throw authenticationRequired(
                    "the identity token was refused: \(error.reason)", address: r.http.remoteAddress, code: error.code)
            }
        }
    }

    /// DELETE /sessions/:token: ends the caller's own session (204); its sync streams and
    /// WebSockets end too. Another session's token is refused (403).
    func deleteSession(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        let session = try r.requireSession()
        let token = r.parameters["session_token"] ?? ""
        guard token.utf8.count <= IdentityTokenVerifier.maxTokenBytes,
            (try? SHA256Hasher.hash(Array(token.utf8))) == session.tokenHash
        else { throw ServerAPIError.accessDenied("a session can only end itself") }
        try await sessions.revoke(token: token)
        return HTTPResponse(status: 204)
    }

    /// POST /dev/identity_tokens `{"user_id", "nonce", "display_name"?}`: 201
    /// `{"identity_token", "app_id"}` minted by the dev identity provider; 404 when the node does not
    /// trust the dev provider. For development only (the web chat page).
    func mintDevIdentityToken(_ r: ClientAPIRequest) async throws -> HTTPResponse {
        guard let devIdentity else {
            throw ServerAPIError.invalidEndpoint("the dev identity provider is off on this node")
        }
        let body = try r.object()
        guard let rawUser = body["user_id"] else { throw ServerAPIError.missingProperty("user_id") }
        let user = try ServerAPIRepresentation.user(rawUser, property: "user_id")
        guard let rawNonce = body["nonce"] else { throw ServerAPIError.missingProperty("nonce") }
        guard let nonce = rawNonce.string, !nonce.isEmpty, nonce.utf8.count <= 256 else {
            throw ServerAPIError.invalidProperty("nonce", "nonce must be a string of 1 to 256 bytes")
        }
        var displayName: String?
        if let raw = body["display_name"], !raw.isNull {
            guard let name = raw.string, name.utf8.count <= ServerAPILimits.maxIdentityStringBytes else {
                throw ServerAPIError.invalidProperty(
                    "display_name",
                    "display_name must be a string of at most \(ServerAPILimits.maxIdentityStringBytes) bytes")
            }
            displayName = name
        }
        let token = try devIdentity.mintToken(user: user, nonce: nonce, displayName: displayName)
        // The app id `POST /sessions` takes (any, when the node names none), so a page needs no other setup.
        return ServerAPIJSON.response(201, ["identity_token": token, "app_id": appID ?? "lamina"])
    }
}
