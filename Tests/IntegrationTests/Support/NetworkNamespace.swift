import Foundation

/// A Linux network namespace of a test's own (`ip netns`), with its loopback up: processes
/// started in it reach each other on 127.0.0.1 and nothing outside, and `iptables` rules in
/// it touch nothing else. Needs root (CI runs as root) and `iproute2` and `iptables`
/// (`.ci/deps`); creating one that fails throws with what `ip` said, so a test that needs one
/// fails rather than skips.
struct NetworkNamespace: Sendable {
    let name: String

    static let ip = "/usr/sbin/ip"
    static let iptables = "/usr/sbin/iptables"

    /// `lamina-part-<pid>-<label>`, made now (one left over by a killed run of this pid is
    /// replaced).
    static func create(label: String) async throws -> NetworkNamespace {
        let namespace = NetworkNamespace(name: "lamina-part-\(getpid())-\(label)")
        for tool in [ip, iptables] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw NamespaceError("\(tool) is missing: run .ci/deps (it installs iproute2 and iptables)")
        }
        _ = try? await ExternalCommand.run(ip, ["netns", "delete", namespace.name])
        try await namespace.check(
            ExternalCommand.run(ip, ["netns", "add", namespace.name]), "ip netns add \(namespace.name)")
        do {
            try await namespace.check(namespace.run(ip, ["link", "set", "lo", "up"]), "ip link set lo up")
        } catch {
            await namespace.delete()
            throw error
        }
        return namespace
    }

    /// `executable` with `arguments`, inside the namespace: the argument list `ip netns exec` needs.
    func command(_ executable: String, _ arguments: [String]) -> [String] {
        ["netns", "exec", name, executable] + arguments
    }

    /// Runs `executable` inside the namespace to its end.
    func run(_ executable: String, _ arguments: [String]) async throws -> ExternalCommand.Result {
        try await ExternalCommand.run(Self.ip, command(executable, arguments))
    }

    /// Drops (never rejects: no reset reaches anyone) every TCP segment sent to `ports`.
    func drop(ports: [Int]) async throws {
        for port in ports {
            try await check(
                run(Self.iptables, ["-A", "INPUT", "-p", "tcp", "--dport", "\(port)", "-j", "DROP"]),
                "iptables -A DROP \(port)")
        }
    }

    /// Removes the rules ``drop(ports:)`` added.
    func heal(ports: [Int]) async throws {
        for port in ports {
            try await check(
                run(Self.iptables, ["-D", "INPUT", "-p", "tcp", "--dport", "\(port)", "-j", "DROP"]),
                "iptables -D DROP \(port)")
        }
    }

    /// Deletes the namespace (its processes must be stopped first).
    func delete() async {
        _ = try? await ExternalCommand.run(Self.ip, ["netns", "delete", name])
    }

    private func check(_ result: ExternalCommand.Result, _ what: String) throws {
        guard result.status == 0 else {
            throw NamespaceError("\(what) failed (status \(result.status)): \(result.stderr)\(result.stdout)")
        }
    }

    struct NamespaceError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
