import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire
import NIOCore

/// The `/v1/content/<uuid>` resource (Protocol/CONTENT.md): routing by method, HEAD and
/// DELETE answers, and the hand-over of PUT to ``UploadHandler`` and GET to ``DownloadHandler``.
public enum ContentEndpoint {
    /// The path prefix of content resources.
    public static let pathPrefix = "/v1/content/"
    /// The router pattern.
    public static let routePattern = "/v1/content/*"

    /// The route handler for ``routePattern``.
    public static func handler(service: ContentService) -> TransportStreamHandler {
        return { stream in
            let exchange = ContentExchange(stream: stream)
            let method = stream.method
            exchange.start(pausingBody: method == "PUT")
            guard ["PUT", "HEAD", "GET", "DELETE"].contains(method) else {
                exchange.respond(status: 405, headers: [("allow", "PUT, HEAD, GET, DELETE")])
                return
            }
            guard !service.isStopped else {
                exchange.fail(ContentFailure(.shuttingDown, "the node is shutting down"))
                return
            }
            guard let id = ContentHeaderParsing.contentID(path: stream.path) else {
                exchange.fail(ContentFailure(.invalidArgument, "the path is not /v1/content/<uuid>"))
                return
            }
            let upload: UploadRequestHeaders?
            if method == "PUT" {
                do throws(ContentFailure) { upload = try UploadRequestHeaders(stream.requestHeaders) } catch {
                    exchange.fail(error)
                    return
                }
            } else {
                upload = nil
            }
            // A signed download URL the Server API handed out (CONTENT.md §10) stands in for a session.
            if method == "GET", stream.requestHeaders["authorization"] == nil, ContentURLSigner.isSigned(stream.path) {
                let query = stream.path[stream.path.index(after: stream.path.firstIndex(of: "?")!)...]
                guard
                    service.urls.verify(.download, id, query: query, now: Timestamp.now().millisecondsSince1970 / 1000)
                else {
                    exchange.fail(
                        ContentFailure(.forbidden, "the download URL's signature is invalid or it has expired"))
                    return
                }
                DownloadHandler.start(exchange: exchange, service: service, id: id, reader: .signedURL)
                return
            }
            service.authenticate(stream.requestHeaders, on: stream.eventLoop).whenComplete { result in
                switch result {
                case .failure(let error):
                    exchange.fail(ContentFailure.from(error))
                case .success(let user):
                    switch method {
                    case "PUT":
                        UploadHandler.start(exchange: exchange, service: service, id: id, user: user, request: upload!)
                    case "GET": DownloadHandler.start(exchange: exchange, service: service, id: id, reader: .user(user))
                    case "HEAD": head(exchange: exchange, service: service, id: id, user: user)
                    default: delete(exchange: exchange, service: service, id: id, user: user)
                    }
                }
            }
        }
    }

    /// HEAD (CONTENT.md §4): size, digest, durable bytes, completeness, for the owner and for
    /// users who may see complete content.
    static func head(exchange: ContentExchange, service: ContentService, id: ContentID, user: UserID) {
        // An upload whose stream ended is answered once its bytes are durable and recorded,
        // so the offset is the one a resuming PUT must use (CONTENT.md §4).
        guard !service.active.isSettling(id) else {
            let loop = exchange.eventLoop
            let settled = loop.makePromise(of: Void.self)
            Task {
                await service.active.waitUntilIdle(id)
                settled.succeed(())
            }
            settled.futureResult.whenSuccess { answerHead(exchange: exchange, service: service, id: id, user: user) }
            return
        }
        answerHead(exchange: exchange, service: service, id: id, user: user)
    }

    private static func answerHead(exchange: ContentExchange, service: ContentService, id: ContentID, user: UserID) {
        service.read(on: exchange.eventLoop) { r -> ContentUpload in
            guard let upload = try r.upload(id) else { throw ContentFailure(.contentNotFound, "no content \(id)") }
            if upload.owner != user {
                guard upload.state == .complete, try r.maySeeContent(id, user: user) else {
                    throw ContentFailure(.forbidden, "content \(id) belongs to another user")
                }
            }
            return upload
        }.whenComplete { result in
            switch result {
            case .failure(let error): exchange.fail(ContentFailure.from(error))
            case .success(let upload): exchange.respond(status: 200, headers: uploadHeaders(upload))
            }
        }
    }

    /// DELETE (CONTENT.md §6): the owner abandons an upload no message references.
    static func delete(exchange: ContentExchange, service: ContentService, id: ContentID, user: UserID) {
        let loop = exchange.eventLoop
        // Hold the content's slot so no upload of it runs while it goes.
        switch service.active.begin(id, user: user, limit: Int.max) {
        case .admitted: break
        case .contentBusy, .userBusy:
            exchange.fail(
                ContentFailure(
                    .overloaded, "an upload of \(id) is in progress; retry once its stream closed",
                    headers: ["retry-after": "1"]))
            return
        }
        service.write(on: loop) { tx in
            guard let upload = try tx.read.upload(id) else {
                throw ContentFailure(.contentNotFound, "no content \(id)")
            }
            guard upload.owner == user else {
                throw ContentFailure(.forbidden, "content \(id) belongs to another user")
            }
            guard try tx.read.contentReferences(id).isEmpty, try tx.read.channelContentReferences(id).isEmpty else {
                throw ContentFailure(.forbidden, "a message references content \(id); it goes with its messages")
            }
            try tx.deleteUpload(id)
        }.flatMap { () -> EventLoopFuture<Void> in
            let files = service.files
            return service.io(on: loop) { files.remove(id) }
        }.whenComplete { result in
            service.active.end(id)
            switch result {
            case .failure(let error): exchange.fail(ContentFailure.from(error))
            case .success: exchange.respond(status: 204)
            }
        }
    }

    /// The headers describing an upload's state (HEAD, and every PUT answer's offset).
    static func uploadHeaders(_ upload: ContentUpload) -> [(String, String)] {
        [
            ("lamina-content-size", "\(upload.declaredSize)"),
            ("lamina-content-sha256", Hex.encode(upload.sha256)),
            ("lamina-upload-offset", "\(upload.receivedBytes)"),
            ("lamina-upload-complete", upload.state == .complete ? "true" : "false"),
        ]
    }

    /// The `201`/`200` body of a complete upload (CONTENT.md §3).
    static func completionJSON(_ upload: ContentUpload) -> String {
        #"{"contentID":\#(WireJSON.quote(upload.id.url)),"size":\#(upload.declaredSize),"sha256":"\#(Hex.encode(upload.sha256))"}"#
    }
}
