import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// Presence on the Client API WebSocket as Layer's Web SDK asks for it (`Presence.subscribe`,
/// `Presence.update`, `Presence.sync`), from Python's `websockets` (not our code), against an
/// SDK client of the same node (SPEC §6.6, CLIENT-API-WEBSOCKET.md).
@Suite struct ClientAPIWebSocketPresenceTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    /// Python side: alice on the WebSocket. argv: CA file, host:port, alice's session token,
    /// the marker directory. Prints one line per check.
    static let script = #"""
        import asyncio, json, os, ssl, sys, time
        import websockets
        ctx = ssl.create_default_context(cafile=sys.argv[1])
        hostport, token, marks = sys.argv[2], sys.argv[3], sys.argv[4]

        def touch(name):
            with open(os.path.join(marks, name + ".tmp"), "w") as f: f.write("")
            os.rename(os.path.join(marks, name + ".tmp"), os.path.join(marks, name))

        async def wait_file(name, timeout=90):
            deadline = time.time() + timeout
            while not os.path.exists(os.path.join(marks, name)):
                if time.time() > deadline: raise Exception("timed out waiting for " + name)
                await asyncio.sleep(0.05)

        async def recv(ws, until, timeout=60):
            got = []
            deadline = time.time() + timeout
            while True:
                left = deadline - time.time()
                if left <= 0: raise Exception("timed out; got " + json.dumps(got)[:2000])
                p = json.loads(await asyncio.wait_for(ws.recv(), left))
                got.append(p)
                if until(p): return got

        async def request(ws, rid, method, data=None):
            body = {"request_id": rid, "method": method}
            if data is not None: body["data"] = data
            await ws.send(json.dumps({"type": "request", "body": body}))
            got = await recv(ws, lambda p: p["type"] == "response" and p["body"]["request_id"] == rid)
            return got[-1]["body"], got

        def presence_of(change, user):
            if change.get("operation") != "update" or change["object"]["type"] != "Identity": return None
            if change["object"]["id"] != "layer:///identities/" + user: return None
            return {op["property"]: op["value"] for op in change["data"]}

        async def main():
            ws = await websockets.connect("wss://" + hostport + "/websocket?session_token=" + token, ssl=ctx,
                subprotocols=["layer-2.0"])
            body, _ = await request(ws, "p1", "Presence.subscribe")
            print("subscribe", body["success"], body["data"])
            # What the Web SDK sends on connect: status auto, then a sync since its last timestamp.
            body, _ = await request(ws, "p2", "Presence.update", [{"operation": "set", "property": "status", "value": "auto"}])
            print("update-auto", body["success"])
            body, _ = await request(ws, "p3", "Presence.sync", {"since": "2026-01-01T00:00:00.000Z"})
            bob = [presence_of(c, "bob") for c in body["data"]["changes"] if presence_of(c, "bob")]
            print("sync-since", body["success"], [p["presence.status"] for p in bob])
            body, _ = await request(ws, "p4", "Presence.sync", {"ids": ["layer:///identities/bob", "carol"]})
            print("sync-ids", body["success"], sorted(c["object"]["id"] for c in body["data"]["changes"]))
            body, _ = await request(ws, "p5", "Presence.update", [{"operation": "set", "property": "status", "value": "sleepy"}])
            print("update-bad", body["success"], body["data"]["id"], body["data"]["data"]["property"])
            # The Web SDK sends offline for invisible.
            body, _ = await request(ws, "p6", "Presence.update", [{"operation": "set", "property": "status", "value": "offline"}])
            print("update-offline", body["success"])
            touch("ws-invisible")
            await wait_file("bob-busy")
            got = await recv(ws, lambda p: p["type"] == "change" and (presence_of(p["body"], "bob") or {}).get("presence.status") == "busy")
            print("bob-busy", presence_of(got[-1]["body"], "bob")["presence.last_seen_at"])
            await ws.close()
            touch("ws-closed")
            print("done")

        asyncio.run(main())
        """#

    @Test func webSDKPresenceRequestsAreServed() async throws {
        let node = try await TestNode.start("client-ws-presence")
        defer { Task { await node.stop() } }
        // Alice's session token from the sync protocol; her conversation with bob from it too.
        let raw = try await node.connect()
        _ = try await raw.hello()
        let authenticated = try await raw.authenticate(user: Self.alice, device: UUID(), dev: node.dev)
        _ = try await MessagingTests.conversation(raw, with: [Self.bob])
        await raw.drop()
        let bob = try ClientHarness.device(Self.bob, on: node)
        let bobEvents = try await ClientHarness.connectLive(bob, on: node)

        let marks = Fixtures.temporaryDirectory("ws-presence-marks").path
        let python = Task {
            try await ExternalCommand.run(
                "/usr/bin/env",
                [
                    "python3", "-c", Self.script, node.server.prepared.certificatePath,
                    node.server.url.replacingOccurrences(of: "https://", with: ""), authenticated.sessionToken, marks,
                ])
        }
        func waitFile(_ name: String) async throws {
            let path = (marks as NSString).appendingPathComponent(name)
            let deadline = ContinuousClock.now + .seconds(120)
            while ContinuousClock.now < deadline {
                if FileManager.default.fileExists(atPath: path) { return }
                try await Task.sleep(for: .milliseconds(50))
            }
            let run = try await python.value
            Issue.record("no \(name) from the script; stdout:\n\(run.stdout)\nstderr:\n\(run.stderr)")
            throw CancellationError()
        }

        // Alice chose invisible on the socket: bob's SDK sees her offline, with a last-seen time.
        try await waitFile("ws-invisible")
        try await bobEvents.wait("alice offline at bob's SDK") { _ in
            bob.presence(of: Self.alice)?.status == .offline && bob.presence(of: Self.alice)?.lastSeenAt != nil
        }
        try await bob.setPresence(.busy)
        _ = FileManager.default.createFile(
            atPath: (marks as NSString).appendingPathComponent("bob-busy"), contents: nil)
        try await waitFile("ws-closed")

        let result = try await python.value
        #expect(result.status == 0, "\(result.stderr)")
        let expected = [
            "subscribe True None",
            "update-auto True",
            "sync-since True ['available']",
            "sync-ids True ['layer:///identities/bob']",
            "update-bad False invalid_property data[0].value",
            "update-offline True",
            "bob-busy None",
            "done",
        ]
        #expect(result.stdout.split(separator: "\n").map(String.init) == expected, "\(result.stdout)\n\(result.stderr)")
        try await bob.close()
    }
}
