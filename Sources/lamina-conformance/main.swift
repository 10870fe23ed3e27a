import Foundation
import LaminaCLI
import LaminaClient
import LaminaModel
import LaminaWire

// lamina-conformance: drives a node through every frame type in every session state of
// Protocol/SPEC.md §5.7 and prints, per row, what the text says and what the node answered.
// Exit status 0 when every answer matches, 1 otherwise. Usage:
//
//   lamina-conformance [--node https://host:port] [--ca FILE] [--node-data DIR]
//
// --node-data is the node's data directory: its CA file and its dev identity key (the
// tokens are minted with the dev provider, SPEC §5.2).

func option(_ name: String) -> String? {
    let args = CommandLine.arguments
    guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
    return args[i + 1]
}

let user: UserID = "conformance"
let other: UserID = "conformance-peer"
do {
    let settings = try ConnectionSettings(
        user: user.rawValue, node: option("--node"), ca: option("--ca"), nodeData: option("--node-data"), data: nil)
    let tokens = try DevTokens(nodeDataDirectory: settings.nodeDataDirectory)
    let runner = try ConformanceRunner(settings: settings, tokens: tokens, user: user, other: other)
    let rows = try await runner.run(Table.probes)
    var failures = 0
    print("state | frame | expected | got")
    for row in rows {
        let ok = row.expected == row.got
        if !ok { failures += 1 }
        print("\(ok ? "ok  " : "FAIL") \(row.state.rawValue) | \(row.name) | \(row.expected) | \(row.got)")
    }
    print("\(rows.count) rows, \(rows.count - failures) as specified, \(failures) not")
    exit(failures == 0 ? 0 : 1)
} catch {
    FileHandle.standardError.write(Data("lamina-conformance: \(error)\n".utf8))
    exit(2)
}
