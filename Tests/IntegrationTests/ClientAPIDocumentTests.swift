import Foundation
import LaminaNode
import Testing

/// `Protocol/CLIENT-API.yaml` and the node's Client API route table name the same operations.
@Suite struct ClientAPIDocumentTests {
    @Test func everyServedRouteIsDocumentedAndViceVersa() throws {
        let served = Set(ClientAPI.routes.map { "\($0.method) \($0.template)" })
        let documented = try ServerAPIDocumentTests.documentedOperations(in: "Protocol/CLIENT-API.yaml")
        #expect(documented.count >= 15)
        #expect(served.subtracting(documented).isEmpty, "served but not documented: \(served.subtracting(documented))")
        #expect(documented.subtracting(served).isEmpty, "documented but not served: \(documented.subtracting(served))")
    }

    /// Every route template is under one of the router patterns the node registers.
    @Test func everyRouteIsUnderARegisteredPattern() {
        for route in ClientAPI.routes {
            let covered = ClientAPI.routePatterns.contains { pattern in
                pattern.hasSuffix("*")
                    ? route.template.hasPrefix(String(pattern.dropLast())) : route.template == pattern
            }
            #expect(covered, "\(route.template) is under no registered pattern")
        }
    }
}
