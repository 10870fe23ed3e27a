import Foundation
import LaminaModel
import LaminaNode

/// curl against a node's Client API (Layer's REST API for clients), over HTTP/1.1 or HTTP/2,
/// with Layer's headers: `Accept: application/vnd.layer+json; version=…` and, once a session
/// is made, `Authorization: Layer session-token="…"`.
struct ClientAPICurl: Sendable {
    var curl: CurlAPI
    var sessionToken: String?
    var version = "2.0"

    init(_ node: TestNode, http: CurlAPI.HTTP) {
        curl = CurlAPI(node.server, http: http)
    }

    var headers: [String: String] {
        var h = ["Accept": "application/vnd.layer+json; version=\(version)"]
        if let sessionToken { h["Authorization"] = "Layer session-token=\"\(sessionToken)\"" }
        return h
    }

    /// `path` from the node's root (`/conversations`).
    func request(
        _ method: String, _ path: String, json: String? = nil, headers: [String: String]? = nil,
        contentType: String = "application/json"
    ) async throws -> CurlAPI.Response {
        try await curl.request(
            method, "/" + path, json: json, headers: headers ?? self.headers, contentType: contentType)
    }

    /// POST /nonces, a dev identity token for `user`, POST /sessions: a client with a session.
    static func session(_ user: UserID, on node: TestNode, http: CurlAPI.HTTP) async throws -> ClientAPICurl {
        var client = ClientAPICurl(node, http: http)
        let nonce = try await client.request("POST", "/nonces")
        guard nonce.status == 201, let value = nonce.object["nonce"] as? String else {
            throw CurlFailed(description: "POST /nonces answered \(nonce.status): \(nonce.body)")
        }
        let token = try node.dev.mintToken(user: user, nonce: value)
        let appID = node.server.serverAPICredentials!.appID
        let session = try await client.request(
            "POST", "/sessions", json: #"{"identity_token":"\#(token)","app_id":"layer:///apps/staging/\#(appID)"}"#)
        guard session.status == 201, let sessionToken = session.object["session_token"] as? String else {
            throw CurlFailed(description: "POST /sessions answered \(session.status): \(session.body)")
        }
        client.sessionToken = sessionToken
        return client
    }
}
