import Foundation
import LaminaModel
import LaminaTransport

/// `GET /v1/peer/content/<uuid>` on the peer listener (CONTENT.md §9): a peer node fetches rich
/// content that a message references, for its own users. Mutual TLS is the authentication (a
/// certificate of the cluster's CA naming a node); the answer is a download as in CONTENT.md §5
/// (ranges included), of complete content that a message this node holds references.
enum PeerContentEndpoint {
    static let pathPrefix = "/v1/peer/content/"
    static let routePattern = "/v1/peer/content/*"

    static func handler(service: ContentService) -> TransportStreamHandler {
        return { stream in
            let exchange = ContentExchange(stream: stream)
            exchange.start(pausingBody: false)
            guard stream.method == "GET" else {
                exchange.respond(status: 405, headers: [("allow", "GET")])
                return
            }
            guard let name = stream.tlsInfo?.peerCommonName, let node = PeerSettings.node(fromCommonName: name) else {
                exchange.fail(ContentFailure(.forbidden, "the peer's certificate names no node"))
                return
            }
            guard !service.isStopped else {
                exchange.fail(ContentFailure(.shuttingDown, "the node is shutting down"))
                return
            }
            guard let id = ContentHeaderParsing.contentID(path: stream.path, prefix: pathPrefix) else {
                exchange.fail(ContentFailure(.invalidArgument, "the path is not \(pathPrefix)<uuid>"))
                return
            }
            DownloadHandler.start(exchange: exchange, service: service, id: id, reader: .peer(node))
        }
    }
}
