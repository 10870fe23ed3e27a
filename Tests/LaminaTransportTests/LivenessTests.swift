import LaminaTransport
import NIOCore
import Testing

/// ``HTTP2Liveness``: a connection that has been quiet is PINGed, and closed when the ACK does
/// not come back in time, in either role; a peer that answers keeps its connection. A peer
/// that "stops answering" here is a client that stops reading its socket: its PINGs and ACKs
/// are never read, as when packets are dropped on the way.
@Suite struct LivenessTests {
    static let fast = HTTP2Liveness(pingAfterQuiet: .milliseconds(200), ackDeadline: .milliseconds(300))
    /// Generous for a loaded 2-core machine; the bound itself is 500 ms.
    static let slack = Duration.seconds(5)

    static func settings(_ liveness: HTTP2Liveness?) -> HTTP2Settings {
        var settings = HTTP2Settings()
        settings.liveness = liveness
        return settings
    }

    @Test func theServerClosesAConnectionWhosePeerStopsAnswering() async throws {
        let server = try await TestServer.start(settings: Self.settings(Self.fast))
        defer { _ = server.shutdown() }
        let connection = try await TransportConnection.connect(
            to: "https://localhost:\(server.port)", tls: Fixtures.clientTLS, group: Fixtures.group)
        // Alive while it answers (nghttp2 ACKs PINGs by itself).
        try await Self.waitUntil("the server's connection to be open") { server.connectionCount == 1 }

        try await connection.setReading(false)
        let stopped = ContinuousClock.now
        try await Self.waitUntil("the server to close the silent connection", within: Self.slack) {
            server.connectionCount == 0
        }
        let elapsed = ContinuousClock.now - stopped
        #expect(server.counts.closedUnanswered == 1)
        #expect(server.counts.closedIdle == 0 && server.counts.closedStalled == 0)
        print(
            "liveness: server closed a silent client \(elapsed) after it stopped reading (bound \(Self.fast.detectionBound))"
        )
    }

    @Test func theClientClosesAConnectionWhosePeerStopsAnsweringAndItsStreamsSayWhy() async throws {
        let server = try await TestServer.start()
        defer { _ = server.shutdown() }
        let connection = try await TransportConnection.connect(
            to: "https://localhost:\(server.port)", tls: Fixtures.clientTLS, settings: Self.settings(Self.fast),
            group: Fixtures.group)
        let stream = try await connection.openStream(method: "POST", path: "/echo")
        let response = stream.collect(maxBytes: 1024)

        // From the client's side nothing arrives any more: no ACK is read.
        try await connection.setReading(false)
        let stopped = ContinuousClock.now
        let closed = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await connection.closeFuture.get()
                return true
            }
            group.addTask {
                try await Task.sleep(for: Self.slack)
                return false
            }
            defer { group.cancelAll() }
            return try await group.next() ?? false
        }
        let elapsed = ContinuousClock.now - stopped
        #expect(closed, "the client kept a connection whose peer never answered its PING")
        print(
            "liveness: client closed a connection whose ACKs it no longer read \(elapsed) after (bound \(Self.fast.detectionBound))"
        )
        await #expect {
            _ = try await response.get()
        } throws: { error in
            (error as? TransportError)?.code == .timeout && "\(error)".contains("no PING ACK in 300 ms")
        }
    }

    @Test func aPeerThatAnswersKeepsItsQuietConnection() async throws {
        let server = try await TestServer.start(settings: Self.settings(Self.fast))
        defer { _ = server.shutdown() }
        let connection = try await TransportConnection.connect(
            to: "https://localhost:\(server.port)", tls: Fixtures.clientTLS, settings: Self.settings(Self.fast),
            group: Fixtures.group)
        // Several rounds of quiet, PING and ACK (each round is at least 200 ms).
        try await Self.waitUntil("three answered PINGs", within: Self.slack) {
            (try? await connection.livenessPingsAnswered()) ?? 0 >= 3
        }
        #expect(server.counts.closedUnanswered == 0)
        #expect(server.connectionCount == 1)
        let hello = try await connection.openStream(method: "GET", path: "/hello", endStream: true)
        let answer = try await hello.collect(maxBytes: 1024).get()
        #expect(answer.headers?[":status"] == "200")
        try await connection.close()
    }

    @Test func theBoundIsTheSumAndReadsAsTime() {
        #expect(Self.fast.detectionBound == .milliseconds(500))
        #expect(
            HTTP2Liveness(pingAfterQuiet: .seconds(1), ackDeadline: .seconds(2)).description
                == "PING after 1 s quiet, ACK within 2 s")
        #expect(HTTP2Liveness.format(.milliseconds(1_500)) == "1.5 s")
        #expect(HTTP2Settings().liveness == nil)
    }

    static func waitUntil(_ what: String, within timeout: Duration = .seconds(10), _ condition: () async throws -> Bool)
        async throws
    {
        let deadline = ContinuousClock.now + timeout
        while try await !condition() {
            guard ContinuousClock.now < deadline else { throw LivenessTimeout(waitingFor: what) }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    struct LivenessTimeout: Error { var waitingFor: String }
}
