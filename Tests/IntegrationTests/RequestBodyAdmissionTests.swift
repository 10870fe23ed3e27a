import Foundation
import LaminaModel
import LaminaNode
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import LaminaTransport

/// Issue 35, items 3, 5, 6 and 8 over real TLS: request bodies are refused by declared length
/// and by authorization before they are read, and cut as they arrive past their route's limit
/// (HTTP/2 and HTTP/1.1); HTTP/1.1 Host is checked and URLs in answers come from the node's
/// public URL; a refused stream's empty-DATA flood is cut; wrong tokens are throttled per
/// address. A healthy sync pair and an API client keep being served alongside.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct RequestBodyAdmissionTests {
    typealias HealthyPair = ResourceLimitTests.HealthyPair

    static let tenGiB = "10737418240"

    /// A real HTTP/2 request (the transport's client, flow control honoured) that declares
    /// `headers` and then writes 16 KiB chunks as fast as the node's window lets it, until the
    /// answer comes or the stream is reset.
    struct Upload {
        var status: Int
        /// Body bytes the node let through (framed by the client within its windows) before
        /// the answer arrived, and in all.
        var framedBeforeAnswer: Int
        var framedInAll: Int
        var answeredAfter: Duration
    }

    static func upload(_ node: TestNode, path: String, headers: [(String, String)]) async throws -> Upload {
        let tls = try TLSContext(.client(trust: .caFile(node.server.prepared.certificatePath)))
        let connection = try await TransportConnection.connect(to: node.server.url, tls: tls, group: Fixtures.group)
        defer { Task { try? await connection.close() } }
        var fields = HeaderFields()
        for (name, value) in headers { fields.append(name, value) }
        let clock = ContinuousClock()
        let start = clock.now
        let stream = try await connection.openStream(method: "POST", path: path, headers: fields, endStream: false)
        let framed = NIOLockedValueBox(0)
        let answered = NIOLockedValueBox<Int?>(nil)
        let writer = Task {
            let chunk = ByteBuffer(repeating: 0x61, count: 16 * 1024)
            while true {
                do { try await stream.write(chunk).get() } catch { return }
                framed.withLockedValue { $0 += chunk.readableBytes }
                // 64 MiB: far past every bound; stops a node that never answers.
                if framed.withLockedValue({ $0 }) > 64 << 20 { return }
            }
        }
        let (responseHeaders, _) = try await stream.collect(maxBytes: 1 << 20).get()
        let took = clock.now - start
        answered.withLockedValue { $0 = framed.withLockedValue { $0 } }
        // The node resets the stream once its answer is out: the writer's next write fails.
        try await ResourceLimitTests.eventually("the stream reset") { stream.isClosed }
        await writer.value
        return Upload(
            status: Int(responseHeaders?[":status"] ?? "") ?? 0, framedBeforeAnswer: answered.withLockedValue { $0! },
            framedInAll: framed.withLockedValue { $0 }, answeredAfter: took)
    }

    static func apiHeaders(_ node: TestNode, token: String?, extra: [(String, String)] = []) -> [(String, String)] {
        var headers = [("accept", "application/vnd.layer+json; version=3.0"), ("content-type", "application/json")]
        if let token { headers.append(("authorization", "Bearer \(token)")) }
        return headers + extra
    }

    /// A Server API request that must stay fast while the attacks run.
    static func healthyAPICall(_ node: TestNode) async throws -> Duration {
        let clock = ContinuousClock()
        let start = clock.now
        let response = try await CurlAPI(node.server, http: .http2).request(
            "POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        #expect(response.status == 201, "\(response.body)")
        return clock.now - start
    }

    // MARK: item 3, HTTP/2

    @Test(arguments: ["no token", "declared too large"])
    func http2RefusesADeclaredBodyBeforeReadingIt(_ kind: String) async throws {
        let node = try await TestNode.start("body-h2")
        let healthy = try await HealthyPair.start(node)
        let appID = node.server.serverAPICredentials!.appID
        let token = kind == "no token" ? nil : ServerAPITestTokens.first(of: node.server)
        let upload = try await Self.upload(
            node, path: "/apps/\(appID)/conversations",
            headers: Self.apiHeaders(node, token: token, extra: [("content-length", Self.tenGiB)]))
        #expect(upload.status == (kind == "no token" ? 401 : 413))
        print("HTTP/2 10 GiB declared, \(kind): \(upload)")
        // Answered at HEADERS time: the client had at most the stream's first window framed
        // (16 KiB, or HTTP/2's default 65,535 bytes while the node's SETTINGS are on their way);
        // nothing is read after the answer either (the reset stops the client).
        #expect(upload.framedBeforeAnswer <= 65_535, "\(upload)")
        #expect(upload.framedInAll < 1 << 20, "\(upload)")
        #expect(upload.answeredAfter < .seconds(10), "\(upload)")
        #expect(try await Self.healthyAPICall(node) < .seconds(10))
        try await healthy.expectHealthy()
        await healthy.close()
        await node.stop()
    }

    @Test func http2CutsABodyThatGrowsPastItsLimitAsItArrives() async throws {
        let node = try await TestNode.start("body-h2-cut")
        let healthy = try await HealthyPair.start(node)
        let appID = node.server.serverAPICredentials!.appID
        // No content-length: only the bytes themselves tell.
        let upload = try await Self.upload(
            node, path: "/apps/\(appID)/conversations",
            headers: Self.apiHeaders(node, token: ServerAPITestTokens.first(of: node.server)))
        #expect(upload.status == 413)
        print("HTTP/2 body without a length: \(upload)")
        // Not cut before the limit. The chunk that crossed it is counted once its write completes,
        // which under load can come after the answer: so at least the limit, not past it.
        #expect(upload.framedBeforeAnswer >= ServerAPILimits.maxBodyBytes, "\(upload)")
        // The limit plus what was in flight (windows of 16 KiB and the connection's).
        #expect(upload.framedInAll < ServerAPILimits.maxBodyBytes + (1 << 20), "\(upload)")
        #expect(try await Self.healthyAPICall(node) < .seconds(10))
        try await healthy.expectHealthy()
        await healthy.close()
        await node.stop()
    }

    // MARK: item 3, HTTP/1.1

    @Test(arguments: ["no token", "declared too large", "chunked past the limit"])
    func http1RefusesBeforeTheBodyAndCloses(_ kind: String) async throws {
        let node = try await TestNode.start("body-h1")
        let healthy = try await HealthyPair.start(node)
        let appID = node.server.serverAPICredentials!.appID
        let token = ServerAPITestTokens.first(of: node.server)
        let client = try await RawHTTP1Client.connect(
            port: node.server.transport.port, caFile: node.server.prepared.certificatePath)
        var head = "POST /apps/\(appID)/conversations HTTP/1.1\r\nHost: localhost\r\n"
        head += "Accept: application/vnd.layer+json; version=3.0\r\nContent-Type: application/json\r\n"
        if kind != "no token" { head += "Authorization: Bearer \(token)\r\n" }
        head +=
            kind == "chunked past the limit"
            ? "Transfer-Encoding: chunked\r\n\r\n" : "Content-Length: \(Self.tenGiB)\r\n\r\n"
        try await client.send(head)
        var sent = 0
        if kind == "chunked past the limit" {
            // 16 KiB chunks until the answer: the node answers once the limit is passed.
            let chunk = "4000\r\n" + String(repeating: "a", count: 16 * 1024) + "\r\n"
            while client.received.isEmpty, sent < 8 << 20 {
                do { try await client.send(chunk) } catch { break }
                sent += 16 * 1024
            }
        }
        let status = try await client.status()
        print("HTTP/1.1 \(kind): \(status.map(String.init) ?? "closed") after \(sent) body bytes sent")
        #expect(status == (kind == "no token" ? 401 : 413), "\(client.received.prefix(300))")
        if kind == "chunked past the limit" {
            #expect(sent > ServerAPILimits.maxBodyBytes)
            #expect(sent < 8 << 20, "the answer came only after \(sent) bytes")
        }
        #expect(client.received.lowercased().contains("connection: close"))
        try await client.closed.get()  // the node closes: the rest of the body is never read
        #expect(try await Self.healthyAPICall(node) < .seconds(10))
        try await healthy.expectHealthy()
        await healthy.close()
        await node.stop()
    }

    // MARK: item 5 and item 8's header points

    @Test func http1HostMustBeThereOnce() async throws {
        let node = try await TestNode.start("host-h1")
        let appID = node.server.serverAPICredentials!.appID
        let token = ServerAPITestTokens.first(of: node.server)
        let port = node.server.transport.port
        let ca = node.server.prepared.certificatePath
        let accept = "Accept: application/vnd.layer+json; version=3.0\r\nAuthorization: Bearer \(token)\r\n"
        let target = "GET /apps/\(appID)/users/alice/identity HTTP/1.1\r\n"
        for (hosts, refused) in [
            ("", true), ("Host: localhost\r\nHost: evil.example\r\n", true), ("Host: a\r\n", false),
        ] {
            let client = try await RawHTTP1Client.connect(port: port, caFile: ca)
            try await client.send(target + hosts + accept + "\r\n")
            let status = try await client.status()
            #expect((status == 400) == refused, "\(hosts): \(client.received.prefix(200))")
            await client.close()
        }
        // Two Authorization headers: which one counts would be a guess.
        let twice = try await RawHTTP1Client.connect(port: port, caFile: ca)
        try await twice.send(target + "Host: localhost\r\n" + accept + "Authorization: Bearer wrong\r\n\r\n")
        #expect(try await twice.status() == 400, "\(twice.received.prefix(300))")
        #expect(twice.received.contains("Authorization"))
        await twice.close()
        // `%00` after an id names nothing.
        for http in [CurlAPI.HTTP.http1, .http2] {
            let api = CurlAPI(node.server, http: http)
            let created = try await api.request(
                "POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
            let id = (created.object["id"] as? String ?? "").split(separator: "/").last.map(String.init) ?? ""
            #expect(try await api.request("GET", "/conversations/\(id)").status == 200)
            #expect(try await api.request("GET", "/conversations/\(id)%00").status == 404)
            #expect(try await api.request("GET", "/users/alice%00/conversations").status == 404)
        }
        await node.stop()
    }

    @Test func urlsInAnswersComeFromThePublicURL() async throws {
        let node = try await TestNode.start("public-url") { $0.publicURL = "https://chat.example.com:8443/" }
        for http in [CurlAPI.HTTP.http1, .http2] {
            let api = CurlAPI(node.server, http: http)
            var headers = [
                "Authorization": "Bearer \(api.token)", "Accept": "application/vnd.layer+json; version=3.0",
            ]
            headers["Host"] = "evil.example"
            let created = try await api.request(
                "POST", "/conversations", json: #"{"participants":["alice","bob"]}"#, headers: headers)
            #expect(created.status == 201 || created.status == 200, "\(created.body)")  // 200: the distinct one
            let url = created.object["url"] as? String ?? ""
            #expect(url.hasPrefix("https://chat.example.com:8443/apps/\(api.appID)/conversations/"), "\(url)")
            #expect(!created.body.contains("evil.example"))
        }
        await node.stop()
        // Without the setting: the listener's address, whatever the request says.
        let plain = try await TestNode.start("public-url-default")
        let api = CurlAPI(plain.server, http: .http1)
        let created = try await api.request(
            "POST", "/conversations", json: #"{"participants":["alice"]}"#,
            headers: [
                "Authorization": "Bearer \(api.token)", "Accept": "application/vnd.layer+json; version=3.0",
                "Host": "evil.example",
            ])
        #expect((created.object["url"] as? String ?? "").hasPrefix("\(plain.server.url)/apps/"), "\(created.body)")
        await plain.stop()
    }

    // MARK: item 6: every refused stream's empty-DATA flood is cut

    @Test(arguments: ["server API", "content"])
    func emptyDataFloodAfterARefusalIsCut(_ path: String) async throws {
        let node = try await TestNode.start("refused-flood")
        let healthy = try await HealthyPair.start(node)
        let appID = node.server.serverAPICredentials!.appID
        let raw = try await RawHTTP2Client.connect(
            port: node.server.transport.port, caFile: node.server.prepared.certificatePath)
        raw.sendPreface()
        let target = path == "content" ? "/v1/content/\(UUID().uuidString)" : "/apps/\(appID)/conversations"
        // A content upload (PUT) without a session token, or a Server API POST without one.
        raw.write(
            path == "content"
                ? RawHTTP2Client.putHeaders(stream: 1, path: target)
                : RawHTTP2Client.postHeaders(stream: 1, path: target))
        // The refusal (401, no token) ends with RST_STREAM NO_ERROR: the stream is closed.
        let reset = try await raw.frame(where: { $0.type == 0x3 && $0.stream == 1 })
        #expect(reset?.payload == [0, 0, 0, 0])
        var flood: [UInt8] = []
        for _ in 0..<5_000 { flood += RawHTTP2Client.frame(type: 0x0, stream: 1) }
        let clock = ContinuousClock()
        let start = clock.now
        raw.write(flood)
        let goAway = try await raw.frame(where: { $0.type == 0x7 })
        #expect(goAway?.goAwayCode == 0xB, "GOAWAY \(String(describing: goAway))")
        try await raw.closed.get()
        #expect(clock.now - start < .seconds(5))
        try await ResourceLimitTests.eventually("counted") { node.server.transport.counts.closedForFlood == 1 }
        try await healthy.expectHealthy()
        await healthy.close()
        await node.stop()
    }

    // MARK: item 8: wrong tokens are throttled per address

    @Test func wrongTokensAreThrottledPerAddress() async throws {
        let node = try await TestNode.start("token-throttle") {
            $0.serverAPI.failedTokenBurst = 5
            $0.serverAPI.failedTokensPerSecond = 0.05
        }
        let appID = node.server.serverAPICredentials!.appID
        let token = ServerAPITestTokens.first(of: node.server)
        let port = node.server.transport.port
        let ca = node.server.prepared.certificatePath
        func get(_ bearer: String, from source: String) async throws -> Int? {
            let client = try await RawHTTP1Client.connect(port: port, caFile: ca, from: source)
            try await client.send(
                "GET /apps/\(appID)/users/alice/conversations HTTP/1.1\r\nHost: localhost\r\n"
                    + "Accept: application/vnd.layer+json; version=3.0\r\nAuthorization: Bearer \(bearer)\r\n\r\n")
            defer { Task { await client.close() } }
            return try await client.status()
        }
        for _ in 0..<5 { #expect(try await get("wrong", from: "127.0.0.2") == 401) }
        // The burst is spent: that address's wrong tokens are answered 429...
        #expect(try await get("wrong", from: "127.0.0.2") == 429)
        #expect(try await get("", from: "127.0.0.2") == 429)
        // ...its valid token is still served (a backend behind the same NAT is not locked out),
        #expect(try await get(token, from: "127.0.0.2") == 200)
        #expect(try await get("wrong", from: "127.0.0.2") == 429)
        // ...and another address's wrong tokens are its own.
        #expect(try await get(token, from: "127.0.0.1") == 200)
        #expect(try await get("wrong", from: "127.0.0.1") == 401)
        await node.stop()
    }
}
