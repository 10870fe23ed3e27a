import Foundation
import LaminaModel
import LaminaNode
import Testing

/// The push gateway is the operator's own service, often under the same private CA as its
/// webhook targets (issue #33): with no CA file of its own or of the push providers it trusts
/// the one webhooks honour; a CA file of its own wins over both.
@Suite struct PushGatewayTrustTests {
    /// A message from the Server API to bob, whose only device is offline with a gateway token.
    static func pushToBob(_ node: TestNode) async throws {
        let bob = try await PushTests.registered(node, "bob", device: UUID(), .gateway(token: "bob-gw"))
        await bob.close()
        try await PushTests.waitForSessions(node, 0)
        let sent = try await CurlAPI(node.server).request(
            "POST", "/notifications", json: #"{"recipients":["bob"],"notification":{"text":"trusted"}}"#)
        #expect(sent.status == 202, "\(sent.body)")
    }

    @Test func theGatewayTrustsTheWebhooksCAFileWhenPushHasNone() async throws {
        let fake = try await FakePushServer.start(http1: true)
        let node = try await TestNode.start("push-gateway-webhook-ca") { c in
            c.push.gateway = PushSettings.Gateway(url: fake.url("/push"))
            c.push.initialBackoffMilliseconds = 50
            c.webhooks.caFile = fake.certificate
        }
        try await Self.pushToBob(node)
        let got = try await fake.waitForRequests(1)
        #expect(PushPathsTests.notification(got[0])["alert"] as? String == "trusted")
        await node.stop()
        await fake.stop()
    }

    @Test func theGatewaysOwnCAFileWins() async throws {
        let fake = try await FakePushServer.start(http1: true)
        let other = try await FakePushServer.start(http1: true)
        let node = try await TestNode.start("push-gateway-own-ca") { c in
            c.push.gateway = PushSettings.Gateway(url: fake.url("/push"), caFile: fake.certificate)
            c.push.caFile = other.certificate  // another CA: the gateway's own is the one used
            c.push.initialBackoffMilliseconds = 50
        }
        try await Self.pushToBob(node)
        let got = try await fake.waitForRequests(1)
        #expect(PushPathsTests.notification(got[0])["alert"] as? String == "trusted")
        #expect(PushSettings().gatewayTrust(webhooksCAFile: "w.pem") == "w.pem")
        await node.stop()
        await fake.stop()
        await other.stop()
    }
}
