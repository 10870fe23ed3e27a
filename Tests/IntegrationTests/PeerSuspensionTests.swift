import Foundation
import LaminaModel
import LaminaWire
import Testing

/// A user's suspension (Layer's `PATCH /users/:id` `suspended`) replicates between peered
/// SQLite nodes like the other per-user state (REPLICATE kind 70, SPEC §6.5): suspended through
/// one node's Server API, the user is logged out and refused on the other; unsuspended there,
/// they log in on the first again, and both nodes end with one digest.
@Suite struct PeerSuspensionTests {
    static let patch = "application/vnd.layer-patch+json"

    static func suspended(_ api: CurlAPI, _ user: String) async throws -> Bool? {
        try await api.request("GET", "/users/\(user)").object["suspended"] as? Bool
    }

    /// Polls (with a deadline) until `user`'s Server API status on `api` is `expected`.
    static func waitSuspended(_ api: CurlAPI, _ user: String, _ expected: Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if try await suspended(api, user) == expected { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Whether a login of `user` on `node` is refused as suspended.
    static func refused(_ user: UserID, on node: TestNode) async throws -> Bool {
        do {
            let session = try await node.session(user, device: UUID())
            await session.close()
            return false
        } catch let failed as CommandFailed {
            return failed.error.code == .forbidden && failed.error.reason.contains("suspended")
        }
    }

    @Test func aSuspensionOnOneNodeHoldsOnItsPeer() async throws {
        let (a, b, _) = try await PeerReplicationTests.cluster("peer-suspension")
        let apiA = CurlAPI(a.server, http: .http2)
        let apiB = CurlAPI(b.server, http: .http1)
        let stream = try await b.session("bob", device: UUID())

        let suspend = try await apiA.request(
            "PATCH", "/users/bob", json: #"[{"operation":"set","property":"suspended","value":true}]"#,
            contentType: Self.patch)
        #expect(suspend.status == 204, "\(suspend.body)")
        #expect(try await Self.waitSuspended(apiB, "bob", true), "node b never showed bob suspended")
        // His session on node b ends, and node b refuses his login.
        let frames = try await stream.framesUntilEnd()
        guard case .error(let ended)? = frames.last else {
            Issue.record("bob's stream on node b did not end with an ERROR: \(frames)")
            return
        }
        #expect(ended.code == .sessionRevoked)
        #expect(try await Self.refused("bob", on: b))
        #expect(try await Self.suspended(apiB, "alice") == false)  // nobody else

        // Unsuspended through node b, he logs in on node a again.
        let unsuspend = try await apiB.request(
            "PATCH", "/users/bob", json: #"[{"operation":"set","property":"suspended","value":false}]"#,
            contentType: Self.patch)
        #expect(unsuspend.status == 204, "\(unsuspend.body)")
        #expect(try await Self.waitSuspended(apiA, "bob", false), "node a never showed bob unsuspended")
        #expect(try await Self.refused("bob", on: a) == false)
        #expect(try await PeerReplicationTests.converged([a, b], within: .seconds(30)))

        await stream.close()
        await b.stop()
        await a.stop()
    }
}
