import Foundation
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaTransport
import NIOCore

/// The Server API (`ServerAPI.handle`, everything after the transport: bearer token, Accept,
/// route and path parameters, query, If-None-Match, JSON bodies and layer-patch operations,
/// the handlers and the engine behind them) over a node engine on a temporary store, with a
/// few objects the seeds name: conversation ``conversationID`` (alice, bob, carol; metadata),
/// its message ``messageID`` from alice, alice's identity, badge and block of dave.
public final class ServerAPIFuzzEnvironment: Sendable {
    /// The app id in the seeds' paths.
    public static let appID = "fuzz-app"
    /// The bearer token; added to a request that carries no `authorization` header.
    public static let token = "fuzz-token"
    /// The fixture conversation and message (lower-case UUIDs, as in the seeds).
    public static let conversationID = "0f0f0f0f-1111-4222-8333-444455556666"
    public static let messageID = "0e0e0e0e-1111-4222-8333-444455556666"

    let directory: URL
    let store: NodeStore
    let engine: NodeEngine
    let api: ServerAPI

    private init(directory: URL, store: NodeStore, engine: NodeEngine, api: ServerAPI) {
        self.directory = directory
        self.store = store
        self.engine = engine
        self.api = api
    }

    /// A fresh store and engine with the fixtures; throws when a fixture is not created.
    public static func make() async throws -> ServerAPIFuzzEnvironment {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "lamina-fuzz-api-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let store = try NodeStore(path: directory.appendingPathComponent("node.sqlite").path)
        let engine = try NodeEngine(store: store, configuration: NodeEngineConfiguration(nodeID: NodeID(9)))
        var settings = ServerAPISettings()
        settings.requestsPerSecond = 1e9  // the token limit is not what is fuzzed
        settings.burst = 1e9
        let api = ServerAPI(
            engine: engine, credentials: ServerAPICredentials(appID: appID, tokens: [token]), settings: settings)
        let environment = ServerAPIFuzzEnvironment(directory: directory, store: store, engine: engine, api: api)
        let accept = "accept: application/vnd.layer+json; version=3.0\ncontent-type: application/json\n"
        let fixtures: [(String, Int)] = [
            (
                "POST /apps/\(appID)/conversations\n\(accept)if-none-match: \"\(conversationID)\"\n\n"
                    + #"{"participants":["alice","bob","carol"],"distinct":false,"metadata":{"title":"fuzz","nested":{"a":"b"}}}"#,
                201
            ),
            (
                "POST /apps/\(appID)/conversations/\(conversationID)/messages\n\(accept)if-none-match: \(messageID)\n\n"
                    + #"{"sender_id":"layer:///identities/alice","parts":[{"mime_type":"text/plain","body":"hello"}]}"#,
                201
            ),
            (
                "POST /apps/\(appID)/users/alice/identity\n\(accept)\n"
                    + #"{"display_name":"Alice","metadata":{"k":"v"}}"#, 201
            ),
            ("PUT /apps/\(appID)/users/alice/badge\n\(accept)\n" + #"{"external_unread_count":3}"#, 204),
            ("POST /apps/\(appID)/users/alice/blocks\n\(accept)\n" + #"{"user_id":"dave"}"#, 204),
        ]
        for (text, status) in fixtures {
            let response = await environment.answer(Array(text.utf8))
            guard response.status == status else {
                await environment.close()
                throw FixtureError(
                    description: "fixture \(text.prefix(60))… answered \(response.status), not \(status): "
                        + String(decoding: response.body.readableBytesView, as: UTF8.self))
            }
        }
        return environment
    }

    struct FixtureError: Error, CustomStringConvertible {
        var description: String
    }

    /// Stops the engine and deletes the store.
    public func close() async {
        await engine.shutdown()
        try? store.close()
        try? FileManager.default.removeItem(at: directory)
    }

    /// The Server API's answer to `input` read as a request (``request(_:)``).
    public func answer(_ input: [UInt8]) async -> HTTPResponse {
        await api.handle(Self.request(input))
    }

    /// `input` as a request: the first line `METHOD target`, then `name: value` header lines
    /// up to an empty line (names lower-cased, values trimmed; `\r` before `\n` dropped), then
    /// the body. A body over `ServerAPILimits.maxBodyBytes` arrives empty with `bodyTooLarge`,
    /// as the transport delivers it. A request without an `authorization` header gets
    /// `authorization` (the bearer token by default).
    public static func request(_ input: [UInt8], authorization: String = "Bearer \(token)") -> HTTPRequest {
        var head = input[...]
        var body: ArraySlice<UInt8> = []
        if let end = input.indices.first(where: { $0 + 1 < input.count && input[$0] == 0x0A && input[$0 + 1] == 0x0A })
        {
            head = input[..<end]
            body = input[(end + 2)...]
        }
        var lines = head.split(separator: 0x0A, omittingEmptySubsequences: false).map { line in
            String(decoding: line.last == 0x0D ? line.dropLast() : line, as: UTF8.self)
        }
        let requestLine = lines.isEmpty ? "" : lines.removeFirst()
        let method: String
        let path: String
        if let space = requestLine.firstIndex(of: " ") {
            method = String(requestLine[..<space])
            path = String(requestLine[requestLine.index(after: space)...])
        } else {
            method = requestLine
            path = "/"
        }
        var headers = HeaderFields()
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append(
                String(line[..<colon]).lowercased(),
                String(line[line.index(after: colon)...]).trimmingCharacters(in: [" ", "\t"]))
        }
        if headers["authorization"] == nil { headers.append("authorization", authorization) }
        let tooLarge = body.count > ServerAPILimits.maxBodyBytes
        return HTTPRequest(
            method: method, path: path, headers: headers, body: ByteBuffer(bytes: tooLarge ? [] : body),
            bodyTooLarge: tooLarge, httpVersion: "2")
    }
}
