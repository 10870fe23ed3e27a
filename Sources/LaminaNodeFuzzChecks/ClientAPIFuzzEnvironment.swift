import Foundation
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaTransport
import NIOCore

/// The Client API (`ClientAPI.handle`, everything after the transport: Accept, session token,
/// route and path parameters, query, JSON bodies and layer-patch operations, the handlers and
/// the engine behind them) over a node engine on a temporary store, with a session of alice
/// (``sessionToken``) and the objects the seeds name: conversation ``conversationID`` (alice,
/// bob, carol; metadata) and its message ``messageID`` from alice.
public final class ClientAPIFuzzEnvironment: Sendable {
    /// Alice's session token; a request without an `authorization` header carries it.
    public static let sessionToken = "fuzz-session"
    /// The fixture conversation and message (lower-case UUIDs, as in the seeds).
    public static let conversationID = "0d0d0d0d-1111-4222-8333-444455556666"
    public static let messageID = "0c0c0c0c-1111-4222-8333-444455556666"

    let directory: URL
    let store: NodeStore
    let engine: NodeEngine
    let api: ClientAPI

    private init(directory: URL, store: NodeStore, engine: NodeEngine, api: ClientAPI) {
        self.directory = directory
        self.store = store
        self.engine = engine
        self.api = api
    }

    /// A fresh store and engine with the fixtures; throws when a fixture is not created.
    public static func make() async throws -> ClientAPIFuzzEnvironment {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "lamina-fuzz-capi-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let store = try NodeStore(path: directory.appendingPathComponent("node.sqlite").path)
        let engine = try NodeEngine(store: store, configuration: NodeEngineConfiguration(nodeID: NodeID(9)))
        var settings = ClientAPISettings()
        settings.requestsPerSecond = 1e9  // the session's rate is not what is fuzzed
        settings.burst = 1e9
        let api = ClientAPI(engine: engine, appID: "fuzz-app", settings: settings)
        let environment = ClientAPIFuzzEnvironment(directory: directory, store: store, engine: engine, api: api)
        let now = Timestamp.now()
        let session = SessionRecord(
            tokenHash: try SHA256Hasher.hash(Array(sessionToken.utf8)), user: "alice",
            device: "0b0b0b0b-1111-4222-8333-444455556666", createdAt: now,
            expiresAt: Timestamp(millisecondsSince1970: now.millisecondsSince1970 + 86_400_000))
        try await store.write { tx in try tx.createSession(session) }
        let accept = "accept: application/vnd.layer+json; version=2.0\ncontent-type: application/json\n"
        let fixtures: [(String, Int)] = [
            (
                "POST /conversations\n\(accept)\n"
                    + #"{"id":"layer:///conversations/\#(conversationID)","participants":["bob","carol"],"distinct":false,"metadata":{"title":"fuzz","nested":{"a":"b"}}}"#,
                201
            ),
            (
                "POST /conversations/\(conversationID)/messages\n\(accept)\n"
                    + #"{"id":"layer:///messages/\#(messageID)","parts":[{"mime_type":"text/plain","body":"hello"}]}"#,
                201
            ),
        ]
        for (text, status) in fixtures {
            let response = await environment.answer(Array(text.utf8))
            guard response.status == status else {
                await environment.close()
                throw ServerAPIFuzzEnvironment.FixtureError(
                    description: "fixture \(text.prefix(60))… answered \(response.status), not \(status): "
                        + String(decoding: response.body.readableBytesView, as: UTF8.self))
            }
        }
        return environment
    }

    /// Stops the engine and deletes the store.
    public func close() async {
        await engine.shutdown()
        try? store.close()
        try? FileManager.default.removeItem(at: directory)
    }

    /// The Client API's answer to `input` read as a request (``request(_:)``).
    public func answer(_ input: [UInt8]) async -> HTTPResponse {
        await api.handle(Self.request(input))
    }

    /// `input` as a request, read as the Server API target reads it
    /// (``ServerAPIFuzzEnvironment/request(_:authorization:)``), alice's session when it names none.
    public static func request(_ input: [UInt8]) -> HTTPRequest {
        ServerAPIFuzzEnvironment.request(input, authorization: "Layer session-token=\"\(sessionToken)\"")
    }
}
