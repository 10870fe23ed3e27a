import ArgumentParser
import Foundation
import LaminaProcess
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#endif

/// The Mosquitto side of the write-path comparison (../shared/bench/mosquitto): mqload.c
/// compiled once into a temp directory, Mosquitto started by run-mosquitto.sh (TLS 1.3, QoS 1,
/// persistence) on a free port, and mqload's output folded into one summary line.
/// Install: `apt-get install -y mosquitto libmosquitto-dev` (and a C compiler: cc).
final class MosquittoAnchor {
    let work: String
    let mqload: String
    let port: Int
    let pid: Int32
    var caFile: String { work + "/ec.crt" }

    private init(work: String, mqload: String, port: Int, pid: Int32) {
        self.work = work
        self.mqload = mqload
        self.port = port
        self.pid = pid
    }

    static func start(folder: String) throws -> MosquittoAnchor {
        let script = folder + "/run-mosquitto.sh"
        let source = folder + "/mqload.c"
        for f in [script, source] where !FileManager.default.fileExists(atPath: f) {
            throw ValidationError("--mosquitto \(folder): no \(f)")
        }
        guard BenchSupport.executable("mosquitto") != nil else {
            throw ValidationError(
                "mosquitto is not installed: apt-get update && apt-get install -y mosquitto libmosquitto-dev")
        }
        guard let cc = BenchSupport.executable("cc") else {
            throw ValidationError("no C compiler (cc) to build mqload")
        }
        let work = try BenchSupport.temporaryDirectory() + "/mosquitto-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let mqload = work + "/mqload"
        let built = try runProcess(cc, ["-O2", "-o", mqload, source, "-lmosquitto", "-lpthread"], timeout: 120)
        guard built.status == 0 else {
            throw ValidationError("building mqload failed (apt-get install -y libmosquitto-dev?):\n\(built.stderr)")
        }
        let port = BenchSupport.freePort()
        // Not through Foundation's Process: Mosquitto, started in the background by the
        // script, would inherit what Foundation watches to see the script exit.
        let pidFile = work + "/run-mosquitto.out"
        let status = try spawnAndWait(
            ["/bin/bash", script, work + "/mq"], environment: ["PORT": String(port)], stdout: pidFile, timeout: 60)
        let printed = (try? String(contentsOfFile: pidFile, encoding: .utf8)) ?? ""
        guard status == 0, let pid = Int32(printed.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw ValidationError("run-mosquitto.sh failed (status \(status)): \(printed)")
        }
        let anchor = MosquittoAnchor(work: work + "/mq", mqload: mqload, port: port, pid: pid)
        do {
            try BenchSupport.waitForPort(port)
        } catch {
            anchor.stop()
            throw ValidationError("Mosquitto did not listen on \(port); see \(work)/mq/mosquitto.log")
        }
        progress("mosquitto", "Mosquitto pid \(pid) on 127.0.0.1:\(port), mqload built in \(work)")
        return anchor
    }

    /// `mqload rate` with the same shape; its output as one line.
    func rate(pairs: Int, fanout: Int, rate: Double, seconds: Double, size: Int) throws -> RunSummary {
        let out = try mq(
            [
                "rate", "--pid", String(pid), "--cafile", caFile, "--port", String(port), "--pairs", String(pairs),
                "--fanout", String(fanout),
                "--rate", String(rate), "--seconds", String(seconds), "--size", String(size),
            ],
            timeout: seconds + 120)
        let line =
            "mosquitto "
            + out.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .map { $0.hasPrefix("mqload ") ? String($0.dropFirst(7)) : $0 }.joined(separator: " ")
        return RunSummary.parse(side: "mosquitto", line: line)
    }

    /// `mqload fill` (a persistent subscriber goes away; `messages` published over 100 topics,
    /// not measured), then `mqload catchup` (it comes back: time to all, broker CPU).
    func catchup(messages: Int, size: Int) throws -> RunSummary {
        let topics = messages >= 100 ? 100 : 1
        _ = try mq(
            [
                "fill", "--cafile", caFile, "--port", String(port), "--topics", String(topics), "--messages",
                String(messages / topics),
                "--size", String(size),
            ], timeout: 600)
        let n = (messages / topics) * topics
        let out = try mq(
            ["catchup", "--pid", String(pid), "--cafile", caFile, "--port", String(port), "--expect", String(n)],
            timeout: 400)
        // "catchup: persistent session reconnects: 100000 of 100000 messages in 1.260 s (first after 0.010 s) = 79365 messages/s;
        //  broker_cpu_s=1.100 (11.0 us/message) loadavg_before=… after=…"
        let words = out.replacingOccurrences(of: "(", with: " ").replacingOccurrences(of: ")", with: " ")
            .replacingOccurrences(of: ";", with: " ").split(separator: " ").map(String.init)
        func after(_ word: String, offset: Int = -1) -> String {
            guard let i = words.firstIndex(of: word), i + offset >= 0, i + offset < words.count else { return "?" }
            return words[i + offset]
        }
        let received = after("of")
        let seconds = after("s", offset: -1)
        let rate = after("messages/s")
        let first = after("after", offset: 1)
        let cpu = words.first { $0.hasPrefix("broker_cpu_s=") } ?? "broker_cpu_s=?"
        let perMessage = after("us/message")
        let line =
            "mosquitto catchup: messages=\(n) received=\(received) seconds=\(seconds) first_after_s=\(first) messages_per_s=\(rate) \(cpu) cpu_us_per_message=\(perMessage) (mqload: \(out.trimmingCharacters(in: .whitespacesAndNewlines)))"
        return RunSummary.parse(side: "mosquitto", line: line)
    }

    private func mq(_ arguments: [String], timeout: Double) throws -> String {
        let r = try runProcess(mqload, arguments, timeout: timeout)
        guard r.status == 0 else {
            throw BenchFailure("mqload \(arguments.first ?? "") exited \(r.status): \(r.stderr)")
        }
        return r.stdout
    }

    /// SIGTERM, SIGKILL after 5 s.
    func stop() {
        kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline, Self.alive(pid) { usleep(20_000) }
        if Self.alive(pid) { kill(pid, SIGKILL) }
    }

    /// Exists and is not a zombie (Mosquitto is re-parented once the start script exits).
    static func alive(_ pid: Int32) -> Bool {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return false }
        return !text[text.index(after: close)...].hasPrefix(" Z")
    }
}

/// Runs `path` to completion (killed after `timeout` seconds): exit status, stdout, stderr.
func runProcess(_ path: String, _ arguments: [String], environment: [String: String] = [:], timeout: Double)
    throws -> (status: Int32, stdout: String, stderr: String)
{
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let outText = NIOLockedValueBox(Data())
    let errText = NIOLockedValueBox(Data())
    let group = DispatchGroup()
    for (handle, box) in [(out.fileHandleForReading, outText), (err.fileHandleForReading, errText)] {
        group.enter()
        Thread.detachNewThread {
            let data = PipeReading.toEnd(handle)
            box.withLockedValue { $0 = data }
            group.leave()
        }
    }
    let deadline = Date().addingTimeInterval(timeout)
    while !BenchSupport.exited(process.processIdentifier), Date() < deadline { usleep(20_000) }
    if !BenchSupport.exited(process.processIdentifier) {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        _ = group.wait(timeout: .now() + 5)
        throw BenchFailure("\(path) \(arguments.joined(separator: " ")) did not finish within \(Int(timeout)) s")
    }
    process.waitUntilExit()
    _ = group.wait(timeout: .now() + 5)
    return (
        process.terminationStatus, String(decoding: outText.withLockedValue { $0 }, as: UTF8.self),
        String(decoding: errText.withLockedValue { $0 }, as: UTF8.self)
    )
}

/// posix_spawn with no signal blocked and the usual ones at their default action, standard
/// output to `stdout` (a file), standard error discarded; waits (at most `timeout` seconds,
/// then SIGKILL) and returns the exit status.
func spawnAndWait(_ argv: [String], environment: [String: String], stdout: String, timeout: Double) throws -> Int32 {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    var defaults = sigset_t()
    sigemptyset(&empty)
    sigemptyset(&defaults)
    for s in [SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2] { sigaddset(&defaults, s) }
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    let env = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
    var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
    var cEnv: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
    defer { for p in cArgs + cEnv { free(p) } }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, argv[0], &actions, &attributes, &cArgs, &cEnv)
    guard rc == 0 else { throw BenchFailure("posix_spawn \(argv[0]): \(String(cString: strerror(rc)))") }
    let deadline = Date().addingTimeInterval(timeout)
    var status: Int32 = 0
    while waitpid(pid, &status, WNOHANG) == 0 {
        if Date() > deadline {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
            throw BenchFailure("\(argv.joined(separator: " ")) did not finish within \(Int(timeout)) s")
        }
        usleep(20_000)
    }
    // WIFEXITED / WEXITSTATUS
    return (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
}
