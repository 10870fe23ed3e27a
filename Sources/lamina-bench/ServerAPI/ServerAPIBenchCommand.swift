import ArgumentParser
import Foundation

/// `lamina-bench server-api`: messages/s and p99 latency of sending messages through the
/// Server API over HTTP/1.1 keep-alive (wrk) and HTTP/2 (h2load), beside the sync protocol's
/// figure (`closed`) in the same run.
struct ServerAPIBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "server-api",
        abstract:
            "Messages/s and p99 sending through the Server API: HTTP/1.1 keep-alive (wrk), HTTP/2 (h2load), and the sync protocol (closed) in the same run.",
        discussion: """
            A fresh node (rate limit lifted by a config file) for each client program. Every request is \
            POST /apps/<app>/conversations/<id>/messages with a 100-byte text part, as a participant, \
            into one conversation per run. Counts only 201 answers; any other status is reported. \
            Needs wrk and h2load (Debian: wrk, nghttp2-client).
            """)

    @Option(help: "Connections.") var connections = 16
    @Option(help: "Seconds of load per client program.") var seconds = 10
    @Option(help: "h2load: requests in flight per connection.") var streams = 8
    @Option(help: "Sync senders for the `closed` figure (0: skip it).") var syncSenders = 16
    @Option(help: "lamina-node binary (default: next to this executable).") var nodeBinary: String?

    func run() async throws {
        BenchSupport.raiseFileLimit()
        guard BenchSupport.executable("wrk") != nil, BenchSupport.executable("h2load") != nil else {
            throw ValidationError("needs wrk and h2load (apt-get install wrk nghttp2-client)")
        }
        let binary = try NodeProcess.binary(nodeBinary)
        let config = try BenchSupport.temporaryDirectory() + "/server-api-bench-\(UUID().uuidString.prefix(8)).json"
        try Data(#"{"serverAPI":{"requestsPerSecond":1000000000,"burst":1000000000}}"#.utf8).write(
            to: URL(fileURLWithPath: config))
        defer { try? FileManager.default.removeItem(atPath: config) }

        for tool in ["wrk", "h2load"] {
            let node = try await NodeProcess.start(
                binary: binary, label: "api-\(tool)", extraArguments: ["--config", config])
            defer { node.stop() }
            let target = try prepare(node)
            let result = tool == "wrk" ? try wrk(target) : try h2load(target)
            emit("server-api \(tool == "wrk" ? "http/1.1 (wrk)" : "http/2 (h2load)"): \(result)")
        }
        if syncSenders > 0 {
            let closed = try ClosedCommand.parse(
                ["--senders", "\(syncSenders)", "--window", "\(streams)", "--seconds", "\(seconds)", "--size", "100"]
                    + (nodeBinary.map { ["--node-binary", $0] } ?? []))
            try await closed.run()
        }
    }

    struct Target {
        var url: String
        var headers: [String]
        var bodyFile: String
    }

    /// Reads the node's app id and token, creates a conversation, writes the request body.
    private func prepare(_ node: NodeProcess) throws -> Target {
        let data = URL(fileURLWithPath: node.dataDirectory)
        let app = try String(contentsOf: data.appendingPathComponent("server-api/app-id"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let token =
            try String(contentsOf: data.appendingPathComponent("server-api/tokens"), encoding: .utf8)
            .split(separator: "\n").first { !$0.hasPrefix("#") && !$0.isEmpty }.map(String.init) ?? ""
        let headers = [
            "Authorization: Bearer \(token)", "Accept: application/vnd.layer+json; version=1.0",
            "Content-Type: application/json",
        ]
        let created = try BenchSupport.run(
            "curl",
            ["-sS", "--cacert", node.caFile] + headers.flatMap { ["-H", $0] }
                + ["-d", #"{"participants":["sender","reader"]}"#, "\(node.url)/apps/\(app)/conversations"])
        guard let object = try? JSONDecoder().decode(BenchObject.self, from: Data(created.utf8)),
            let id = object.id?.split(separator: "/").last
        else { throw BenchFailure("creating the conversation failed: \(created)") }
        let bodyFile = node.dataDirectory + "/message.json"
        let text = String(repeating: "m", count: 100)
        try Data(#"{"sender":{"user_id":"sender"},"parts":[{"body":"\#(text)","mime_type":"text/plain"}]}"#.utf8)
            .write(to: URL(fileURLWithPath: bodyFile))
        return Target(url: "\(node.url)/apps/\(app)/conversations/\(id)/messages", headers: headers, bodyFile: bodyFile)
    }

    private func wrk(_ target: Target) throws -> String {
        let body = try String(contentsOfFile: target.bodyFile, encoding: .utf8)
        let script = target.bodyFile + ".lua"
        let quoted = body.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        var lua = "wrk.method = \"POST\"\nwrk.body = \"\(quoted)\"\n"
        for header in target.headers {
            let parts = header.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            lua += "wrk.headers[\"\(parts[0])\"] = \"\(parts[1])\"\n"
        }
        lua += """
            local statuses = {}
            response = function(status, headers, body) if status ~= 201 then statuses[status] = (statuses[status] or 0) + 1 end end
            """
        try Data(lua.utf8).write(to: URL(fileURLWithPath: script))
        let output = try BenchSupport.run(
            "wrk", ["-t", "2", "-c", "\(connections)", "-d", "\(seconds)s", "--latency", "-s", script, target.url])
        let rate =
            output.split(separator: "\n").first { $0.hasPrefix("Requests/sec:") }
            .flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
        let p99 =
            output.split(separator: "\n").first { $0.trimmingCharacters(in: .whitespaces).hasPrefix("99%") }
            .map { Self.milliseconds(String($0.split(separator: " ").last ?? "")) } ?? -1
        let p50 =
            output.split(separator: "\n").first { $0.trimmingCharacters(in: .whitespaces).hasPrefix("50%") }
            .map { Self.milliseconds(String($0.split(separator: " ").last ?? "")) } ?? -1
        let errors =
            output.split(separator: "\n").first { $0.contains("Non-2xx") }.map {
                String($0).trimmingCharacters(in: .whitespaces)
            } ?? "all 2xx"
        return String(
            format: "%.0f messages/s, p50 %.2f ms, p99 %.2f ms, %d connections keep-alive; %@", rate, p50, p99,
            connections, errors)
    }

    private func h2load(_ target: Target) throws -> String {
        let log = target.bodyFile + ".log"
        let output = try BenchSupport.run(
            "h2load",
            [
                "-c", "\(connections)", "-m", "\(streams)", "-D", "\(seconds)", "-d", target.bodyFile, "--log-file",
                log,
            ] + target.headers.flatMap { ["-H", $0] } + [target.url])
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        var durations: [Double] = []
        var other: [Substring: Int] = [:]
        var first = UInt64.max
        var last = UInt64(0)
        for line in lines {
            let columns = line.split(separator: "\t")
            guard columns.count >= 3, let start = UInt64(columns[0]), let micros = Double(columns[2]) else { continue }
            guard columns[1] == "201" else {
                other[columns[1], default: 0] += 1
                continue
            }
            durations.append(micros / 1000)
            first = min(first, start)
            last = max(last, start + UInt64(micros))
        }
        guard !durations.isEmpty, last > first else {
            throw BenchFailure("h2load made no successful request: \(output)")
        }
        durations.sort()
        let p = { (q: Double) in durations[min(durations.count - 1, Int(Double(durations.count) * q))] }
        let rate = Double(durations.count) / (Double(last - first) / 1e6)
        let refused =
            other.isEmpty
            ? "all 201"
            : "other statuses: "
                + other.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " ")
        return String(
            format: "%.0f messages/s, p50 %.2f ms, p99 %.2f ms, %d connections x %d streams; ", rate, p(0.5), p(0.99),
            connections, streams) + refused
    }

    /// wrk's "12.34ms" / "567.00us" / "1.20s" in milliseconds.
    static func milliseconds(_ text: String) -> Double {
        if text.hasSuffix("us") { return (Double(text.dropLast(2)) ?? -1) / 1000 }
        if text.hasSuffix("ms") { return Double(text.dropLast(2)) ?? -1 }
        if text.hasSuffix("s") { return (Double(text.dropLast()) ?? -1) * 1000 }
        return -1
    }
}
