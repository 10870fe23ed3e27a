import ArgumentParser
import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// `lamina-bench webhook`: `message.sent` events through a `lamina-node` child process to a
/// local webhook receiver (HTTPS on the project's transport, in this process, answering 200).
struct WebhookBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhook",
        abstract:
            "Messages at a fixed rate with a message.sent webhook: events delivered per second to a local receiver, and the lag from commit to delivery.",
        discussion: """
            One webhook subscribed to message.sent, created through the webhooks API and verified by the receiver \
            (HTTP/1.1 over TLS, in this process). P senders (users s<i>), one conversation each with a reader, send R \
            messages per second in total for S seconds (pipelined, on an absolute schedule). Every message is one event. \
            The receiver records when each event (its message id) first arrives. Lag: ACK (sent after the commit) → \
            arrival, and send → arrival; one monotonic clock, one process. events_per_second: events over the time from \
            the first to the last arrival. Needs curl (the webhooks API).
            """)

    @Option(help: "The lamina-node binary (default: lamina-node next to lamina-bench).") var nodeBinary: String?
    @Option(help: "Senders (one conversation each).") var senders = 20
    @Option(help: "Messages per second in total.") var rate: Double = 1_000
    @Option(help: "Seconds of sending.") var seconds: Double = 10
    @Option(help: "Events in flight to the target at once (the node's webhooks.maxInFlightPerTarget).") var inFlight = 4
    @Option(help: "Seconds to wait for the last events after the load ends.") var drainTimeout: Double = 60

    func validate() throws {
        guard senders >= 1, rate > 0, seconds > 0, inFlight >= 1 else {
            throw ValidationError("senders, rate, seconds, in-flight must be positive")
        }
    }

    func run() async throws {
        BenchSupport.raiseFileLimit()
        let binary = try NodeProcess.binary(nodeBinary)
        let directory = try BenchSupport.temporaryDirectory() + "/webhook-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let group = MultiThreadedEventLoopGroup.singleton

        // The receiver: echoes the verification challenge, records each event's first arrival.
        let arrivals = NIOLockedValueBox([UUID: UInt64]())
        let cert = directory + "/receiver-cert.pem"
        let certKey = directory + "/receiver-key.pem"
        try DevelopmentCertificate.generate(
            commonName: "webhook receiver", certificatePath: cert, privateKeyPath: certKey)
        var router = TransportRouter()
        router.add("/*", maxBodyBytes: 1 << 20) { request in
            let now = monotonicNanos()
            if request.method == "GET", let query = request.path.split(separator: "?").dropFirst().first,
                let pair = query.split(separator: "&").first(where: { $0.hasPrefix("verification_challenge=") })
            {
                return HTTPResponse(
                    status: 200, body: ByteBuffer(string: String(pair.dropFirst("verification_challenge=".count))))
            }
            let event = try? JSONDecoder().decode(BenchWebhookEvent.self, from: Data(request.body.readableBytesView))
            if let id = event?.message?.id.split(separator: "/").last.flatMap({ UUID(uuidString: String($0)) }) {
                arrivals.withLockedValue { if $0[id] == nil { $0[id] = now } }
            }
            return HTTPResponse(status: 200)
        }
        var tls = TLSConfiguration.server(certificateChainFile: cert, privateKeyFile: certKey)
        tls.offersHTTP1 = true
        let receiver = try await TransportServer.start(
            host: "127.0.0.1", port: 0, tls: try TLSContext(tls), router: router, group: group, http1: HTTP1Settings())
        defer { Task { try? await receiver.shutdown() } }

        // The node, configured to trust it and to allow a loopback target.
        let config = directory + "/node.json"
        try """
        {"webhooks": {"allowPrivateTargets": true, "caFile": "\(cert)", "maxInFlightPerTarget": \(inFlight)}}
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let node = try await NodeProcess.start(binary: binary, label: "webhook", extraArguments: ["--config", config])
        defer { node.stop() }
        try await createWebhook(node, target: "https://127.0.0.1:\(receiver.port)/hook")

        var conversations: [(LoadPeer, ConversationID)] = []
        for i in 0..<senders {
            let sender = try await LoadPeer.connect(node, user: try UserID("s\(i)"), sync: false, group: group)
            conversations.append((sender, try await sender.createConversation(with: [try UserID("reader\(i)")])))
        }

        let total = Int(rate * seconds)
        let schedule = conversations
        let sent = NIOLockedValueBox([UUID: UInt64]())
        let acked = NIOLockedValueBox([UUID: UInt64]())
        let errors = LoadCounter()
        progress("webhook", "\(total) messages at \(Int(rate))/s, one message.sent event each")
        let (cpu0, threads0) = (node.cpuSeconds(), node.threadCPU())
        let t0 = monotonicNanos()
        let interval = 1e9 / rate
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                for j in 0..<total {
                    sleepUntil(t0 + UInt64(Double(j) * interval))
                    let (peer, conversation) = schedule[j % schedule.count]
                    let id = MessageID.timeOrdered()
                    let part = try! MessagePart(text: "bench message \(j)")
                    sent.withLockedValue { $0[id.uuid] = monotonicNanos() }
                    peer.client.request(
                        .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: [part])),
                        id: id.uuid
                    )
                    .whenComplete { result in
                        if case .success(.ack) = result {
                            acked.withLockedValue { $0[id.uuid] = monotonicNanos() }
                        } else {
                            errors.add()
                        }
                    }
                }
                continuation.resume()
            }
        }
        let deadline = monotonicNanos() + UInt64(drainTimeout * 1e9)
        while arrivals.withLockedValue({ $0.count }) < total - errors.current, monotonicNanos() < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let (cpu1, threads1) = (node.cpuSeconds(), node.threadCPU())
        for (peer, _) in conversations { await peer.close() }

        let (sentAt, ackAt, arrived) = (
            sent.withLockedValue { $0 }, acked.withLockedValue { $0 }, arrivals.withLockedValue { $0 }
        )
        let fromAck = Percentiles(
            arrived.compactMap { id, at in ackAt[id].map { Double(Int64(bitPattern: at &- $0)) / 1e6 } })
        let fromSend = Percentiles(arrived.compactMap { id, at in sentAt[id].map { Double(at &- $0) / 1e6 } })
        let times = arrived.values.sorted()
        let span = Double((times.last ?? 0) &- (times.first ?? 0)) / 1e9
        let perSecond = span > 0 ? Double(times.count - 1) / span : 0
        // Node CPU from the first send until the last event arrived (or the drain timed out),
        // per event delivered; the writer thread's share apart.
        let events = Double(max(arrived.count, 1))
        let writer = ThreadRole.used(from: threads0, to: threads1)[.writer] ?? 0
        emit(
            String(
                format:
                    "webhook messages=%d acked=%d errors=%d events=%d events_per_second=%.0f ack_to_event_ms %@ send_to_event_ms %@"
                    + " node_cpu_us_per_event=%.1f writer_cpu_us_per_event=%.1f",
                total, ackAt.count, errors.current, arrived.count, perSecond, fromAck.shortFields, fromSend.shortFields,
                (cpu1 - cpu0) / events * 1e6, writer / events * 1e6))
    }

    /// Creates the webhook through the webhooks API (the node's first Server API token) and
    /// waits until the receiver's verification made it active.
    private func createWebhook(_ node: NodeProcess, target: String) async throws {
        let data = URL(fileURLWithPath: node.dataDirectory)
        let app = try String(contentsOf: data.appendingPathComponent("server-api/app-id"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let token =
            try String(contentsOf: data.appendingPathComponent("server-api/tokens"), encoding: .utf8)
            .split(separator: "\n").first { !$0.hasPrefix("#") && !$0.isEmpty }.map(String.init) ?? ""
        let headers = [
            "Authorization: Bearer \(token)", "Accept: application/vnd.layer.webhooks+json; version=3.0",
            "Content-Type: application/json",
        ]
        let base = "\(node.url)/apps/\(app)/webhooks"
        let created = try BenchSupport.run(
            "curl",
            ["-sS", "--cacert", node.caFile] + headers.flatMap { ["-H", $0] } + [
                "-d", #"{"target_url":"\#(target)","events":["message.sent"],"secret":"bench-secret-0123456789"}"#,
                base,
            ])
        guard let object = try? JSONDecoder().decode(BenchObject.self, from: Data(created.utf8)),
            let id = object.id?.split(separator: "/").last
        else { throw BenchFailure("creating the webhook failed: \(created)") }
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let got = try BenchSupport.run(
                "curl", ["-sS", "--cacert", node.caFile] + headers.flatMap { ["-H", $0] } + ["\(base)/\(id)"])
            if (try? JSONDecoder().decode(BenchObject.self, from: Data(got.utf8)))?.status == "active" { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw BenchFailure("the webhook was not verified within 30 s")
    }
}

/// The part of a webhook delivery the bench reads: the message's id.
struct BenchWebhookEvent: Decodable {
    struct Message: Decodable { var id: String }
    var message: Message?
}

/// The fields of a Server API answer the benches read.
struct BenchObject: Decodable {
    var id: String?
    var status: String?
}
