import LaminaTransport
import NIOCore

/// The web chat page (`WebChat/index.html` and `WebChat/chat.js`, embedded in the binary): plain
/// HTML and JavaScript on Layer's Client API, served at `/` only while the node trusts its dev
/// identity provider (the page mints identity tokens through `POST /dev/identity_tokens`).
enum WebChatPage {
    /// The paths the page is served at.
    static let paths = ["/", "/index.html", "/chat.js"]

    /// Registers the page's routes on `router`.
    static func register(on router: inout TransportRouter) {
        for path in paths {
            router.add(path, maxBodyBytes: 0) { request in response(to: request) }
        }
    }

    static func response(to request: HTTPRequest) -> HTTPResponse {
        guard request.method == "GET" else {
            return HTTPResponse(status: 405, headers: [("allow", "GET")])
        }
        let bare = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        let (bytes, type): ([UInt8], String) =
            bare == "/chat.js"
            ? (PackageResources.chat_js, "text/javascript; charset=utf-8")
            : (PackageResources.index_html, "text/html; charset=utf-8")
        let headers = [
            ("content-type", type),
            ("cache-control", "no-cache"),
            ("x-content-type-options", "nosniff"),
            ("content-security-policy", "default-src 'self'; connect-src 'self'; style-src 'self' 'unsafe-inline'"),
        ]
        return HTTPResponse(status: 200, headers: headers, body: ByteBuffer(bytes: bytes))
    }
}
