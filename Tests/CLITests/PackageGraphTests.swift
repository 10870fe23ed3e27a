import Foundation
import LaminaProcess
import Testing

/// Module boundaries read from the package's own graph (`swift package dump-package`): the
/// `lamina` command-line client and `LaminaCLI` do not link the node.
@Suite struct PackageGraphTests {
    /// Each target's dependencies on targets of this package (products of other packages left out).
    static func targetGraph() throws -> [String: [String]] {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        // Its own scratch path: no lock on the .build of the `swift test` that runs this.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "lamina-dump-package-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        process.arguments = ["swift", "package", "--scratch-path", scratch.path, "dump-package"]
        process.currentDirectoryURL = CLIProcess.packageRoot
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = PipeReading.toEnd(output.fileHandleForReading)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let manifest = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let targets = try #require(manifest["targets"] as? [[String: Any]])
        var graph: [String: [String]] = [:]
        for target in targets {
            let name = try #require(target["name"] as? String)
            let dependencies = target["dependencies"] as? [[String: Any]] ?? []
            graph[name] = dependencies.compactMap { dependency in
                // {"byName": [name, condition]} or {"target": [name, condition]}; {"product": ...} is external.
                ((dependency["byName"] ?? dependency["target"]) as? [Any])?.first as? String
            }
        }
        return graph
    }

    /// Every target `root` depends on, directly or not.
    static func closure(of root: String, in graph: [String: [String]]) -> Set<String> {
        var seen: Set<String> = []
        var stack = graph[root] ?? []
        while let next = stack.popLast() {
            guard seen.insert(next).inserted else { continue }
            stack += graph[next] ?? []
        }
        return seen
    }

    @Test func theCommandLineClientDoesNotLinkTheNode() throws {
        let graph = try Self.targetGraph()
        #expect(graph["LaminaNode"] != nil)
        for client in ["lamina", "LaminaCLI"] {
            let linked = Self.closure(of: client, in: graph)
            #expect(!linked.contains("LaminaNode"), "\(client) links LaminaNode through \(linked.sorted())")
            // It does reach the SDK and the shared dev-identity module (the graph was read).
            #expect(
                linked.isSuperset(of: ["LaminaClient", "LaminaLocalNode", "LaminaTransport"]),
                "\(client): \(linked.sorted())")
        }
        // The node executable does link it: the walk finds what is there.
        #expect(Self.closure(of: "lamina-node", in: graph).isSuperset(of: ["LaminaNode", "LaminaLocalNode"]))
        // The shared module stays small: no node, no SDK, no storage.
        #expect(
            Self.closure(of: "LaminaLocalNode", in: graph) == [
                "LaminaModel", "LaminaTransport", "COpenSSL", "CNghttp2",
            ])
    }

    /// Model ← Wire, Merge ← Store ← Node: the store knows nothing of the node, its transport
    /// or the SDK (its only C is libpq's wrapper and its SQLite VFS), and the command-line
    /// client does not link it.
    @Test func theStoreSitsBetweenTheRulesAndTheNode() throws {
        let graph = try Self.targetGraph()
        #expect(
            Self.closure(of: "LaminaStore", in: graph) == [
                "LaminaModel", "LaminaWire", "LaminaMerge", "CLibpq", "CLaminaSQLiteWAL",
            ])
        #expect(graph["LaminaNode"]?.contains("LaminaStore") == true)
        for client in ["lamina", "LaminaCLI", "LaminaClient"] {
            #expect(!Self.closure(of: client, in: graph).contains("LaminaStore"), "\(client) links LaminaStore")
        }
    }
}
