import Foundation
import LaminaModel
import LaminaNode
import LaminaProcess
import LaminaWire
import NIOConcurrencyHelpers
import Testing

/// `lamina-conformance` (Protocol/conformance/) against a real node: every row of the
/// session-state table of SPEC §5.7 answered as the text says.
@Suite struct ConformanceTests {
    @Test func everyRowOfTheSessionStateTableIsAnsweredAsSpecified() async throws {
        let node = try await TestNode.start("conformance")
        let process = ChildProcess()
        process.executableURL = try BuiltProduct.url("lamina-conformance")
        process.arguments = [
            "--node", node.server.url, "--ca", node.server.prepared.certificatePath, "--node-data",
            node.configuration.dataDirectory,
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        let loop = Fixtures.group.next()
        let finished = PromiseBox(loop.makePromise(of: (Int32, String).self))
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let reader = output.fileHandleForReading
        Thread.detachNewThread {
            var text = Data()
            while true {
                let chunk = PipeReading.next(reader)
                if chunk.isEmpty { break }
                text.append(chunk)
            }
            process.waitUntilExit()
            finished.promise.succeed((process.terminationStatus, String(decoding: text, as: UTF8.self)))
        }
        loop.scheduleTask(in: .seconds(120)) {
            finished.promise.fail(SyncTestTimeout(waitingFor: "lamina-conformance to finish"))
        }
        let (status, text) = try await finished.promise.futureResult.get()
        let failing = text.split(separator: "\n").filter { $0.hasPrefix("FAIL") }
        #expect(failing.isEmpty, "\(failing.joined(separator: "\n"))")
        #expect(status == 0, "\(text.suffix(2000))")
        let rows = text.split(separator: "\n").filter { $0.hasPrefix("ok ") }
        // 116, and issue 36's: SET_PRESENCE (5 rows), FOLLOW_USER (4), PEER_PRESENCE (3), the relayed presence frames (6); issue
        // 33's CREATE_CONVERSATION with the receipt switches set apart, without bit 13 (1); issue 38's REACT (3 states,
        // and without bit 14: 4), SEARCH_MESSAGES (4), replies (5) and notification levels and mentions (4).
        #expect(rows.count == 152)
        #expect(
            text.contains(
                "ok   authenticated | CREATE_CONVERSATION with receipts byte 2 (without bit 13) | ERROR forbidden (not fatal) | ERROR forbidden (not fatal)"
            ))
        #expect(text.contains("ok   authenticated | SET_PRESENCE (away) | ACK | ACK"))
        #expect(text.contains("ok   authenticated | FOLLOW_USER (unfollow, not followed) | ACK | ACK"))
        // A few rows the text pins, as printed.
        #expect(text.contains("ok   authenticated | NONCE_REQUEST | NONCE | NONCE"))
        #expect(
            text.contains(
                "ok   authenticated | AUTHENTICATE | ERROR unexpected-frame (fatal) | ERROR unexpected-frame (fatal)"))
        #expect(text.contains("ok   before authentication | ERROR | no answer | no answer"))
        #expect(text.contains("ok   authenticated | END_SESSION | ACK | ACK"))
        #expect(text.contains("ok   authenticated | REGISTER_PUSH_TOKEN (none: remove) | ACK | ACK"))
        #expect(text.contains("ok   authenticated | BLOCK_USER (unblock, not blocked) | ACK | ACK"))
        // The before-HELLO column, the feature bits and the order of effects (issue 31).
        #expect(
            text.contains(
                "ok   before HELLO | ERROR (fatal) | ERROR unexpected-frame (fatal) | ERROR unexpected-frame (fatal)"))
        #expect(
            text.contains(
                "ok   authenticated | TYPING (without bit 1) | ERROR forbidden (not fatal) | ERROR forbidden (not fatal)"
            ))
        #expect(
            text.contains(
                "ok   authenticated | SEND_MESSAGE, FETCH_HISTORY right behind it | ACK, the message before it | ACK, the message before it"
            ))
        await node.stop()
    }
}
