import Foundation
import LaminaNode
import Testing

/// `Protocol/SERVER-API.yaml` and the node's Server API route table name the same operations.
@Suite struct ServerAPIDocumentTests {
    /// (method, path) of every operation in the document: paths at two spaces of indent,
    /// methods at four (the document keeps that layout).
    static func documentedOperations(in document: String = "Protocol/SERVER-API.yaml") throws -> Set<String> {
        let url = Fixtures.packageRoot.appendingPathComponent(document)
        let text = try String(contentsOf: url, encoding: .utf8)
        var operations = Set<String>()
        var inPaths = false
        var path: String?
        let methods: Set<String> = ["get", "post", "put", "patch", "delete", "head", "options"]
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if !line.hasPrefix(" ") {
                inPaths = line == "paths:"
                continue
            }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                path = String(line.dropFirst(2).dropLast())
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":"),
                case let name = String(line.dropFirst(4).dropLast()), methods.contains(name), let path
            {
                operations.insert("\(name.uppercased()) \(path)")
            }
        }
        return operations
    }

    @Test func everyServedRouteIsDocumentedAndViceVersa() throws {
        let served = Set(ServerAPI.routes.map { "\($0.method) \($0.template)" })
        let documented = try Self.documentedOperations()
        #expect(documented.count >= 10)
        #expect(served.subtracting(documented).isEmpty, "served but not documented: \(served.subtracting(documented))")
        #expect(documented.subtracting(served).isEmpty, "documented but not served: \(documented.subtracting(served))")
    }
}
