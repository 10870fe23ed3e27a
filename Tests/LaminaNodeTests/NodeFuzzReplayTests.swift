import Foundation
import LaminaModel
import LaminaNode
import LaminaNodeFuzzChecks
import LaminaWire
import NIOCore
import Testing

/// Replays the seeds (`Fuzz/seeds/`) and every saved failing input (`Fuzz/FailCases/`) of the
/// node's parser fuzz targets through their properties (`NodeFuzzChecks`), and checks that
/// the token seeds reach past the signature (they are signed by the fuzz provider's key).
@Suite struct NodeFuzzReplayTests {
    static let fuzz = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz")

    static func inputs(_ target: String) throws -> [(String, [UInt8])] {
        var out: [(String, [UInt8])] = []
        let seeds = fuzz.appendingPathComponent("seeds/\(target)")
        for name in try FileManager.default.contentsOfDirectory(atPath: seeds.path).sorted() {
            out.append(("seeds/\(target)/\(name)", try [UInt8](Data(contentsOf: seeds.appendingPathComponent(name)))))
        }
        let failCases = fuzz.appendingPathComponent("FailCases")
        for name in try FileManager.default.contentsOfDirectory(atPath: failCases.path).sorted()
        where name.hasPrefix("\(target)-") {
            out.append(("FailCases/\(name)", try [UInt8](Data(contentsOf: failCases.appendingPathComponent(name)))))
        }
        return out
    }

    @Test func contentHeaderInputsHoldTheirProperties() throws {
        let inputs = try Self.inputs("FuzzContentHeaders")
        #expect(inputs.count >= 6)
        for (label, input) in inputs {
            do { try NodeFuzzChecks.checkContentHeaders(input) } catch { Issue.record("\(label): \(error)") }
        }
    }

    /// What each Server API seed is answered on a fresh environment (the fixtures only), so
    /// the seeds reach the handlers rather than stop at the checks before them.
    static let serverAPISeedStatuses: [String: Int] = [
        "announcement": 202, "bad-accept": 406, "badge-get": 200, "badge-put": 204, "block-add": 204,
        "block-remove": 204,
        "blocks-list": 200, "conversation-create": 201, "conversation-create-v1": 201, "conversation-delete": 204,
        "conversation-get": 200, "conversation-get-v1": 200, "conversation-patch-metadata": 204,
        "conversation-patch-participants": 204, "conversations-list": 200, "crlf": 200, "identity-create": 201,
        "identity-delete": 204, "identity-get": 200, "identity-patch": 204, "identity-replace": 204,
        "mark-all-read": 204,
        "message-delete": 204, "message-get": 200, "message-send": 201, "message-send-system": 201,
        "message-send-v1": 201,
        "messages-list": 200, "messages-list-user": 200, "messages-search-user": 200, "no-token": 401,
        "notification-level-get": 200, "notification-level-put": 200, "sessions-revoke": 204, "webhook-create": 503,
        "webhook-get": 404, "webhooks-list": 200, "wrong-app": 404, "wrong-method": 405,
    ]

    @Test func serverAPIInputsHoldTheirPropertiesAndReachTheHandlers() async throws {
        let inputs = try Self.inputs("FuzzServerAPI")
        #expect(inputs.count >= Self.serverAPISeedStatuses.count)
        // Each input on a fresh store, as libFuzzer replays one input in a fresh process.
        for (label, input) in inputs {
            let environment = try await ServerAPIFuzzEnvironment.make()
            let request = ServerAPIFuzzEnvironment.request(input)
            let response = await environment.answer(input)
            do {
                try NodeFuzzChecks.checkServerAPIResponse(response, to: request, input: input)
            } catch {
                Issue.record("\(label): \(error)")
            }
            if label.hasPrefix("seeds/"),
                let expected = Self.serverAPISeedStatuses[String(label.split(separator: "/").last!)]
            {
                #expect(
                    response.status == expected,
                    "\(label): \(String(decoding: response.body.readableBytesView, as: UTF8.self))")
            }
            await environment.close()
        }
        // The same inputs one after another on one store hold the property too.
        let shared = try await ServerAPIFuzzEnvironment.make()
        for (label, input) in inputs {
            do { try await NodeFuzzChecks.checkServerAPIRequest(input, in: shared) } catch {
                Issue.record("\(label) (shared store): \(error)")
            }
        }
        await shared.close()
    }

    /// The frame scanner's seeds and fail cases, then random streams of both roles.
    @Test func http2FrameScannerInputsHoldTheirProperty() throws {
        let inputs = try Self.inputs("FuzzHTTP2FrameScanner")
        #expect(inputs.count >= 7)
        for (label, input) in inputs {
            do { try NodeFuzzChecks.checkHTTP2FrameScanner(input) } catch { Issue.record("\(label): \(error)") }
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            let input = (0..<Int.random(in: 1...600, using: &generator)).map { _ in
                UInt8.random(in: 0...255, using: &generator)
            }
            do { try NodeFuzzChecks.checkHTTP2FrameScanner(input) } catch { Issue.record("\(error)") }
        }
    }

    @Test func webSocketPacketInputsHoldTheirProperties() throws {
        let inputs = try Self.inputs("FuzzWebSocketPacket")
        #expect(inputs.count >= 11)
        for (label, input) in inputs {
            do { try NodeFuzzChecks.checkWebSocketPacket(input) } catch { Issue.record("\(label): \(error)") }
        }
        func decode(_ name: String) throws -> Result<WebSocketInboundPacket, WebSocketPacketError> {
            let input = try [UInt8](
                Data(contentsOf: Self.fuzz.appendingPathComponent("seeds/FuzzWebSocketPacket/\(name)")))
            do { return .success(try WebSocketInboundPacket.decode(String(decoding: input, as: UTF8.self))) } catch {
                return .failure(error)
            }
        }
        guard case .request(let request) = try decode("message-create").get() else {
            Issue.record("message-create is not a request")
            return
        }
        #expect(request.method == .messageCreate && request.requestID == "r1")
        #expect(
            try decode("typing").get()
                == .typing(
                    conversation: "layer:///conversations/f3cc7b32-3c92-11e4-baad-164230d1df67", action: .started))
        for (name, id, requestID) in [
            ("not-json", "invalid_request", nil), ("unknown-type", "invalid_property", nil),
            ("unknown-method", "invalid_property", "r5"), ("no-request-id", "missing_property", nil),
            ("bad-action", "invalid_property", nil),
        ] as [(String, String, String?)] {
            guard case .failure(let error) = try decode(name) else {
                Issue.record("\(name) was accepted")
                continue
            }
            #expect(error.errorID == id, "\(name)")
            #expect(error.requestID == requestID, "\(name)")
        }
    }

    /// What each Client API seed is answered on a fresh environment (alice's session and the
    /// fixtures only), so the seeds reach the handlers rather than stop at the checks before them.
    static let clientAPISeedStatuses: [String: Int] = [
        "nonce": 201, "session-bad-token": 401, "session-delete-other": 403, "dev-token-off": 404,
        "conversations-list": 200, "conversation-create": 201, "conversation-create-id-in-use": 409,
        "conversation-get": 200, "conversation-patch": 204, "conversation-delete": 204, "mark-all-read": 204,
        "messages-list": 200, "messages-search": 200, "message-send": 201, "message-get": 200, "message-delete": 204,
        "receipt-read": 204,
        "receipt-delivery": 204, "identity-get": 200, "announcements-list": 200, "push-token": 422,
        "bad-accept": 406, "no-session": 401, "malformed": 400, "wrong-method": 405, "notification-level-get": 200,
        "notification-level-put": 200,
    ]

    @Test func clientAPIInputsHoldTheirPropertiesAndReachTheHandlers() async throws {
        let inputs = try Self.inputs("FuzzClientAPI")
        #expect(inputs.count >= Self.clientAPISeedStatuses.count)
        for (label, input) in inputs {
            let environment = try await ClientAPIFuzzEnvironment.make()
            let request = ClientAPIFuzzEnvironment.request(input)
            let response = await environment.answer(input)
            do {
                try NodeFuzzChecks.checkServerAPIResponse(response, to: request, input: input)
            } catch {
                Issue.record("\(label): \(error)")
            }
            if label.hasPrefix("seeds/"),
                let expected = Self.clientAPISeedStatuses[String(label.split(separator: "/").last!)]
            {
                #expect(
                    response.status == expected,
                    "\(label): \(String(decoding: response.body.readableBytesView, as: UTF8.self))")
            }
            await environment.close()
        }
        let shared = try await ClientAPIFuzzEnvironment.make()
        for (label, input) in inputs {
            do { try await NodeFuzzChecks.checkClientAPIRequest(input, in: shared) } catch {
                Issue.record("\(label) (shared store): \(error)")
            }
        }
        await shared.close()
    }

    @Test func webhookRegistrationInputsHoldTheirProperties() throws {
        let inputs = try Self.inputs("FuzzWebhookRequest")
        #expect(inputs.count >= 13)
        for (label, input) in inputs {
            do { try NodeFuzzChecks.checkWebhookRegistration(input) } catch { Issue.record("\(label): \(error)") }
        }
        func seed(_ name: String) throws -> [UInt8] {
            try [UInt8](Data(contentsOf: Self.fuzz.appendingPathComponent("seeds/FuzzWebhookRequest/\(name)")))
        }
        func parse(_ name: String) throws -> Result<WebhookRegistration, ServerAPIError> {
            let input = try seed(name)
            let newline = input.firstIndex(of: 0x0A)!
            do {
                return .success(
                    try WebhookRegistration.parse(
                        contentType: String(decoding: input[..<newline], as: UTF8.self),
                        body: ByteBuffer(bytes: input[(newline + 1)...])))
            } catch { return .failure(error) }
        }
        let valid = try parse("valid").get()
        #expect(valid.host == "example.com" && valid.port == 8443 && valid.path == "/hooks/layer?x=1")
        #expect(valid.events == ["message.sent", "conversation.created"])
        #expect(try parse("ipv6").get().host == "2001:db8::1")
        for (name, status) in [
            ("http-url", 422), ("short-secret", 422), ("unknown-event", 422), ("not-json", 415), ("array-body", 400),
        ] {
            guard case .failure(let error) = try parse(name) else {
                Issue.record("\(name) was accepted")
                continue
            }
            #expect(error.status == status, "\(name): \(error.message)")
        }
    }

    @Test func identityTokenInputsHoldTheirPropertiesAndReachTheClaims() throws {
        let inputs = try Self.inputs("FuzzIdentityToken")
        #expect(inputs.count >= 8)
        for (label, input) in inputs {
            do { try NodeFuzzChecks.checkIdentityToken(input) } catch { Issue.record("\(label): \(error)") }
        }
        let verifier = IdentityTokenVerifier(
            providers: [
                IdentityProvider(
                    id: "fuzz", publicKeyPEM: NodeFuzzChecks.fuzzProviderPublicKeyPEM, algorithms: ["ES256"])
            ],
            maxClockSkew: .seconds(60))
        let now = Timestamp(millisecondsSince1970: 1_800_000_000_000)
        func seed(_ name: String) throws -> String {
            String(
                decoding: try Data(contentsOf: Self.fuzz.appendingPathComponent("seeds/FuzzIdentityToken/\(name)")),
                as: UTF8.self)
        }
        let claims = try verifier.verify(try seed("valid-es256"), now: now)
        #expect(claims.identity.userID == "alice")
        let expired = try seed("expired")
        do {
            _ = try verifier.verify(expired, now: now)
            Issue.record("an expired token verified")
        } catch {
            #expect(error.code == .tokenExpired)
        }
    }
}
