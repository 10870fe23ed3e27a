import ArgumentParser
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `lamina-bench transport-compare`: LaminaTransport's `h2-server` and `nghttpd` side by side
/// under `h2load`, same certificate (ECDSA P-256), same body, each server on one thread,
/// each pair run back-to-back, repeated `--rounds` times.
///
/// - persistent: `h2load -n R -c C -m M -t 1` (TLS 1.3, requests on kept-alive connections)
/// - handshakes: `h2load -n H -c H -m 1 -t 1` (every client: full TLS 1.3 handshake + one request)
struct TransportCompareCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transport-compare", abstract: "h2load against LaminaTransport and nghttpd, side by side.")

    @Option(help: "Repetitions of each pair.") var rounds = 3
    @Option(help: "Requests per persistent-connection run.") var requests = 200_000
    @Option(help: "h2load clients (connections) for the persistent run.") var clients = 10
    @Option(help: "Concurrent streams per connection for the persistent run.") var streams = 10
    @Option(help: "Connections (one request each) per handshake run.") var handshakes = 1000
    @Option(help: "Response body size.") var bodySize = 6

    struct H2LoadResult {
        var requestsPerSecond: Double
        var succeeded: Int
        var total: Int
        /// Server CPU time (user + system) spent during the run, seconds.
        var serverCPU: Double = 0
        /// Requests per server CPU-second: robust when other processes compete for the cores.
        var requestsPerCPUSecond: Double { serverCPU > 0 ? Double(succeeded) / serverCPU : 0 }
    }

    /// utime + stime of `pid` in seconds, from /proc/<pid>/stat.
    static func cpuSeconds(_ pid: Int32) -> Double { BenchSupport.cpuSeconds(pid) }

    func run() throws {
        BenchSupport.raiseFileLimit()
        let directory = try BenchSupport.temporaryDirectory()
        let (cert, key) = try BenchSupport.certificate(in: directory)
        let docroot = directory + "/docroot"
        try FileManager.default.createDirectory(atPath: docroot, withIntermediateDirectories: true)
        try Data(repeating: UInt8(ascii: "x"), count: bodySize).write(to: URL(fileURLWithPath: docroot + "/b"))
        guard let nghttpdPath = BenchSupport.executable("nghttpd") else {
            throw ValidationError("nghttpd is not installed")
        }

        var persistent: [(Double, Double)] = []
        var connections: [(Double, Double)] = []
        var persistentCPU: [(Double, Double)] = []
        var connectionsCPU: [(Double, Double)] = []
        for round in 1...rounds {
            let laminaPort = BenchSupport.freePort()
            let lamina = try BenchSupport.start(
                CommandLine.arguments[0],
                [
                    "h2-server", "--port", String(laminaPort), "--cert", cert, "--key", key, "--body-size",
                    String(bodySize),
                ])
            defer { BenchSupport.stop(lamina) }
            let nghttpdPort = BenchSupport.freePort()
            let nghttpd = try BenchSupport.start(
                nghttpdPath, ["--address=127.0.0.1", "-n", "1", "-d", docroot, String(nghttpdPort), key, cert])
            // nghttpd blocks SIGTERM (waiting for it hung the run after round 1): SIGINT, then
            // SIGKILL after 2 s.
            defer { BenchSupport.stop(nghttpd, signal: SIGINT, grace: 2) }
            try BenchSupport.waitForPort(laminaPort)
            try BenchSupport.waitForPort(nghttpdPort)
            // Warm-up for both.
            _ = try h2load(port: laminaPort, n: 20_000, c: clients, m: streams)
            _ = try h2load(port: nghttpdPort, n: 20_000, c: clients, m: streams)

            let lp = try h2load(port: laminaPort, n: requests, c: clients, m: streams, server: lamina.processIdentifier)
            let np = try h2load(
                port: nghttpdPort, n: requests, c: clients, m: streams, server: nghttpd.processIdentifier)
            persistent.append((lp.requestsPerSecond, np.requestsPerSecond))
            persistentCPU.append((lp.requestsPerCPUSecond, np.requestsPerCPUSecond))
            print(
                String(
                    format:
                        "round %d persistent: lamina %.0f req/s (%d/%d ok, %.0f req/CPU-s), nghttpd %.0f req/s (%d/%d ok, %.0f req/CPU-s), ratio %.2f (per CPU-s %.2f)",
                    round, lp.requestsPerSecond, lp.succeeded, lp.total, lp.requestsPerCPUSecond,
                    np.requestsPerSecond, np.succeeded, np.total, np.requestsPerCPUSecond,
                    lp.requestsPerSecond / np.requestsPerSecond, lp.requestsPerCPUSecond / np.requestsPerCPUSecond))
            let lh = try h2load(port: laminaPort, n: handshakes, c: handshakes, m: 1, server: lamina.processIdentifier)
            let nh = try h2load(
                port: nghttpdPort, n: handshakes, c: handshakes, m: 1, server: nghttpd.processIdentifier)
            connections.append((lh.requestsPerSecond, nh.requestsPerSecond))
            connectionsCPU.append((lh.requestsPerCPUSecond, nh.requestsPerCPUSecond))
            print(
                String(
                    format:
                        "round %d new TLS 1.3 connections + 1 request: lamina %.0f /s (%d/%d ok, %.0f /CPU-s), nghttpd %.0f /s (%d/%d ok, %.0f /CPU-s), ratio %.2f (per CPU-s %.2f)",
                    round, lh.requestsPerSecond, lh.succeeded, lh.total, lh.requestsPerCPUSecond,
                    nh.requestsPerSecond, nh.succeeded, nh.total, nh.requestsPerCPUSecond,
                    lh.requestsPerSecond / nh.requestsPerSecond, lh.requestsPerCPUSecond / nh.requestsPerCPUSecond))
            fflush(nil)
        }
        func summary(_ name: String, _ pairs: [(Double, Double)]) {
            let ratios = pairs.map { $0.0 / $0.1 }
            let mean = ratios.reduce(0, +) / Double(ratios.count)
            print(
                String(
                    format: "%@: ratio lamina/nghttpd mean %.2f (min %.2f, max %.2f) over %d rounds", name, mean,
                    ratios.min() ?? 0, ratios.max() ?? 0, ratios.count))
        }
        summary("persistent requests/s", persistent)
        summary("persistent requests per server CPU-second", persistentCPU)
        summary("new connections/s", connections)
        summary("new connections per server CPU-second", connectionsCPU)
    }

    private func h2load(port: Int, n: Int, c: Int, m: Int, server: Int32? = nil) throws -> H2LoadResult {
        let cpuBefore = server.map(Self.cpuSeconds) ?? 0
        let output = try BenchSupport.run(
            "h2load", ["-n", String(n), "-c", String(c), "-m", String(m), "-t", "1", "https://127.0.0.1:\(port)/b"])
        // "finished in 1.23s, 162601.63 req/s, 5.12MB/s"
        // "requests: 200000 total, 200000 started, 200000 done, 200000 succeeded, 0 failed, 0 errored, 0 timeout"
        guard let finished = output.split(separator: "\n").first(where: { $0.hasPrefix("finished in") }),
            let requestsLine = output.split(separator: "\n").first(where: { $0.hasPrefix("requests:") })
        else { throw ValidationError("unexpected h2load output:\n\(output)") }
        let rate = finished.split(separator: ",")[1].trimmingCharacters(in: .whitespaces).split(separator: " ")[0]
        let numbers = requestsLine.split(separator: " ").compactMap { Int($0) }
        let cpuAfter = server.map(Self.cpuSeconds) ?? 0
        return H2LoadResult(
            requestsPerSecond: Double(rate) ?? 0, succeeded: numbers.count > 3 ? numbers[3] : 0,
            total: numbers.first ?? 0, serverCPU: cpuAfter - cpuBefore)
    }
}
